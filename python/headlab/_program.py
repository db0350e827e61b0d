"""The headlab program as a child process, for the one command the module
cannot run in this process: a sweep starts each run by executing its own
program again (/proc/self/exe), which here is the interpreter."""
import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
from pathlib import Path

from . import _core
from ._run import raise_for_status


def program():
    """The headlab binary of the build this module is from: build/headlab next
    to build/python/headlab/, checked to be of the same build (_check_same_build)."""
    path = _built_program()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise RuntimeError(f"a sweep runs the headlab program (each run is a process of its own), and {path}, the "
                           "one built with this module, is missing: build it (scripts/setup.sh --python, or "
                           "cmake --build build --target headlab)")
    _check_same_build(path)
    return path


def _built_program():
    return Path(_core.__file__).resolve().parents[2] / "headlab"


# The programs found of this module's build, by (path, mtime, size): one
# `headlab --version` per program file, not one per sweep.
_same_build = set()


def _check_same_build(path):
    """Raises RuntimeError unless `path --version` prints this module's
    version line: the commit and, for a build of uncommitted edits, a hash of
    them (cmake/version_header.cmake). A program rebuilt without the module,
    or the module without the program, would run a sweep's runs on other code
    than headlab.train runs in this process."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key in _same_build:
        return
    ours = _core.version_line()
    try:
        theirs = subprocess.run([str(path), "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                errors="replace", timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        theirs = f"no version ({e})"
    if theirs != ours:
        raise RuntimeError(f"a sweep runs the headlab program, and {path} is of another build than this module (it "
                           f"says {theirs!r}, the module {ours!r}): its runs could compute otherwise than "
                           "headlab.train here. Build both again: scripts/setup.sh --python (or cmake --build build "
                           "--target headlab headlab_python)")
    _same_build.add(key)


def run(*args):
    """Runs `headlab ARGS...` as a child and raises on failure as
    _run.command does: ValueError for a usage error (exit 2),
    KeyboardInterrupt for a stop by a signal, else RuntimeError, with the
    command's error line. Its stdout goes to sys.stdout as it comes (so a
    notebook shows it live, in order with the cell's prints); its stderr to
    sys.stderr, all but the error line of a failure, which is raised instead
    of printed as well. Ctrl-C here is passed on as one SIGINT, which stops
    the command as Ctrl-C in a terminal does, then raised once it has exited."""
    args = [str(a) for a in args]
    sys.stdout.flush()
    sys.stderr.flush()
    # Its own process group: a terminal's Ctrl-C reaches this process only,
    # which passes it on once. Killed with this process, the child gets
    # SIGPIPE at its next line and stops as it does on a signal.
    child = subprocess.Popen([str(program()), *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
    streams = _Streams(child)
    try:
        with _passed_on(child):
            interrupted = _wait(child, streams)
    finally:
        if child.poll() is None:  # an exception of our own (a failed write): the child must not outlive the call
            child.terminate()
            child.wait()
        streams.close()
    error = streams.last_error_line()
    status = child.returncode if child.returncode >= 0 else 128 - child.returncode  # killed: as a shell says it
    if interrupted and status <= 128:
        raise KeyboardInterrupt(error or f"headlab {args[0]} stopped")
    raise_for_status(status, error, args[0])
    streams.flush_held()


def _wait(child, streams):
    """Forwards the output until the child has exited; whether Ctrl-C came
    meanwhile (each one passed on as SIGINT)."""
    interrupted = False
    while True:
        try:
            streams.pump()
            child.wait()
            return interrupted
        except KeyboardInterrupt:
            interrupted = True
            if child.poll() is None:
                child.send_signal(signal.SIGINT)


@contextlib.contextmanager
def _passed_on(child):
    """SIGTERM and SIGHUP of this process go to the child, which stops as
    `headlab sweep` does on them (its runs saving a checkpoint), as
    headlab.train's trainer stops on them in this process. Only on the main
    thread, the one Python's handlers run on, and not one this process
    ignores (under nohup, SIGHUP): the child, started before, ignores it too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, lambda sig, _: child.send_signal(sig)) for sig in (signal.SIGTERM, signal.SIGHUP)
             if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


class _Streams:
    """The child's stdout and stderr, forwarded as they come, line by line on
    stderr: a line of the command's own ("headlab sweep: ...", the form of its
    error) is held until another follows it or the exit says whether it is
    the error to raise; progress lines ("[2/10] h2 s1: ...") go at once."""

    def __init__(self, child):
        self._selector = selectors.DefaultSelector()
        self._decoders = {}
        for pipe, sink in ((child.stdout, sys.stdout), (child.stderr, sys.stderr)):
            self._selector.register(pipe, selectors.EVENT_READ, sink)
            self._decoders[pipe] = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial = ""  # stderr after its last newline
        self._held = ""  # a complete stderr line that may be the error

    def pump(self):
        """Forwards output until both pipes are closed."""
        while self._selector.get_map():
            for key, _ in self._selector.select():
                chunk = os.read(key.fd, 65536)
                text = self._decoders[key.fileobj].decode(chunk, final=not chunk)
                if not chunk:
                    self._selector.unregister(key.fileobj)
                if key.data is sys.stderr:
                    text = self._stderr_lines(text, closed=not chunk)
                if text:
                    key.data.write(text)
                    key.data.flush()

    def _stderr_lines(self, text, closed):
        """What of stderr can be shown now; holds the rest."""
        lines = (self._partial + text).splitlines(keepends=True)
        self._partial = "" if closed or not lines or lines[-1].endswith("\n") else lines.pop()
        shown = []
        for line in lines:
            shown.append(self._held)
            self._held = ""
            if line.startswith("headlab "):
                self._held = line
            else:
                shown.append(line)
        return "".join(shown)

    def last_error_line(self):
        return self._held.strip()

    def flush_held(self):
        if self._held:
            sys.stderr.write(self._held)
            sys.stderr.flush()

    def close(self):
        for key in list(self._selector.get_map().values()):
            self._selector.unregister(key.fileobj)
        self._selector.close()
        for pipe in self._decoders:
            pipe.close()
