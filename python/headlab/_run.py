"""headlab.train and headlab.Run: a run folder, written by the CLI's own code."""
import contextlib
import ctypes
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import _core, _data
from ._sweep import is_sweep_folder


def _flag_args(flags):
    """{"d_model": 64, "attn_only": True, "betas": (0.9, 0.98)} -> CLI arguments,
    each `--flag=value`, so that a value is never read as a flag nor a flag as
    a value: steps=True gives --steps=true, which the CLI rejects naming it."""
    args = []
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, (list, tuple, range, np.ndarray)):
            text = ",".join(_flag_text(v) for v in (value.ravel() if isinstance(value, np.ndarray) else value))
        else:
            text = _flag_text(value)
        args.append(f"{flag}={text}")
    return args


def _flag_text(value):
    """One value as the CLI reads it: a bool as true/false (a sweep's list
    attn_only=[True, False] too), a path as itself."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def command(*args):
    """Runs `headlab ARGS...` in this process; raises on failure: ValueError for a
    usage error (exit 2), KeyboardInterrupt for a stop by a signal, else RuntimeError."""
    status, error = _core.run_command_line([str(a) for a in args])
    raise_for_status(status, error, args[0] if args else "")


def raise_for_status(status, error, name):
    """A command's exit as the exception `command` raises (nothing for 0)."""
    if status == 0:
        return
    message = error or f"headlab {name} exited with status {status}"
    if status == 2:
        raise ValueError(message)
    if status > 128:
        raise KeyboardInterrupt(message)
    raise RuntimeError(message)


@contextlib.contextmanager
def _engine_output_through_sys_stdout():
    """The engine's file-descriptor-1 output of the block, written to
    sys.stdout once it ends: a notebook then shows it in order with the cell's
    own prints (ipykernel forwards fd 1 on its own thread, later), and
    contextlib.redirect_stdout catches it. Only for quiet runs: a few lines,
    where nothing is lost by holding them until the end."""
    sys.stdout.flush()
    with tempfile.TemporaryFile(mode="w+b") as held:
        saved = os.dup(1)
        os.dup2(held.fileno(), 1)
        try:
            yield
        finally:
            ctypes.CDLL(None).fflush(None)  # the C library's buffer, before fd 1 is given back
            os.dup2(saved, 1)
            os.close(saved)
            held.seek(0)
            sys.stdout.write(held.read().decode("utf-8", "replace"))
            sys.stdout.flush()


def train(out=None, **flags):
    """Trains as `headlab train --out OUT --flag value ...` does, in this process
    and through the same code: the same flags give the same metrics.jsonl and
    checkpoint, byte for byte (timings aside). Flags are the CLI's, with _ for
    -: train(out="runs/x", task="induction", attn_only=True, steps=500).
    Returns the Run. train(resume="runs/x", steps=1000) continues a run in its
    own folder (`headlab train --resume`, no out=); help=True prints the flags.
    quiet=True (--quiet) prints only a summary of a few lines at the end
    instead of every log line and the whole report, through sys.stdout (so
    in order with a notebook cell's prints); train.log, heads.json and
    report.html in the run folder keep everything. Without it the engine
    writes each line to file descriptor 1 as it goes.
    data= and eval_data= take a file, or rows (an int array [B, T], a list of
    sequences, or a dict of write_data's tokens, targets, lengths, attend):
    these are written into the run folder as data.jsonl and eval-data.jsonl
    and trained on from there; with resume=, rows must be the run's own."""
    if flags.pop("help", False):
        command("train", "--help")
        return None
    resume = flags.get("resume")
    for name, path in (("out", out), ("resume", resume)):
        if path is not None and not os.fspath(path):  # the CLI would choose a folder of its own for --out ""
            raise ValueError(f"train: {name}= is empty; give a run folder")
    if out is None and resume is None:
        raise ValueError("train: give out=, the run folder to write (or resume=, a run folder to continue)")
    undo, written = _put_rows(out, resume, flags)
    args = ("train", *([] if out is None else [f"--out={os.fspath(out)}"]), *_flag_args(flags))
    try:
        if _truthy(flags.get("quiet", False)):
            with _engine_output_through_sys_stdout():
                command(*args)
        else:
            command(*args)
    except ValueError as e:
        undo()
        raise ValueError(_as_rows(str(e), written)) from None
    except BaseException:
        undo()
        raise
    return Run(resume if out is None else out)


# train(data=rows): the rows go into the run folder as its own data file, so
# that the run holds its data. The checkpoint records the file's absolute
# path and hash, which --resume, `headlab eval RUN`, `headlab analyze RUN` and
# Run.model().task_batch() read and check; a moved or copied folder still
# names the old path, and its own file of that name is read when it has the
# recorded hash (train/run_data.h). The folder gets its marker first,
# as a sweep's run folder does (it holds stdout.log before its run starts),
# and the CLI is told --force, which clears only a run's own files: the data
# stays.
_DATA_FILES = {"data": "data.jsonl", "eval_data": "eval-data.jsonl"}
_ROW_KEYS = ("tokens", "targets", "lengths", "attend")


def _is_rows(value):
    return value is not None and not isinstance(value, (str, bytes, os.PathLike))


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _encode(key, value, causal):
    """data= or eval_data= rows (an array, a list of sequences, or a dict of
    write_data's arguments) as a data file's text, every value checked."""
    try:
        if isinstance(value, Mapping):
            unknown = [k for k in value if k not in _ROW_KEYS]
            if unknown or "tokens" not in value:
                raise TypeError(f"a dict of rows has the keys {', '.join(_ROW_KEYS)} (tokens required), got "
                                f"{', '.join(map(repr, value))}")
            return _data.encode(**value, causal=causal)
        return _data.encode(value, causal=causal)
    except (TypeError, ValueError) as e:
        raise type(e)(f"train: {key}=: {e}") from None


def _regular_bytes(path):
    """The bytes of a regular file, else None (a FIFO is never opened)."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            return Path(path).read_bytes()
    except OSError:
        pass
    return None


def _recorded(folder):
    """config.json of a run folder ({} when it has none)."""
    try:
        return json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return {}


def _check_same_rows(folder, texts, what):
    """Each text is the file the run in `folder` recorded for its flag, else a
    ValueError: a run goes on with its own data. Returns those paths."""
    config, paths = _recorded(folder), {}
    for key, text in texts.items():
        recorded = config.get(key.replace("_", "-")) or ""
        # A moved run folder reads its own file of the recorded name when the
        # recorded one is gone or changed (the CLI checks its hash).
        found = [p for p in ([recorded, os.path.join(folder, os.path.basename(recorded))] if recorded else [])
                 if _regular_bytes(p) == text.encode()]
        if not found:
            was = f"its --{key.replace('_', '-')} {recorded}" if recorded else f"no --{key.replace('_', '-')}"
            raise ValueError(f"train: {key}= differs from the rows the run in {folder} trained on ({was}); {what}")
        paths[key] = found[0]
    return paths


def _as_rows(message, written):
    """The CLI's message on line N of a file written from rows names row N - 1
    of the argument too (the file is gone once the refused run is undone)."""
    for key, path in written.items():
        line = re.search(re.escape(path) + r":(\d+): ", message)
        if line:
            return f"train: {key}= row {int(line[1]) - 1}: {message[line.start():]}"
        # The refusal of lines with no target: "FILE: K of its N sequences have
        # no target (lines 5, 10 and 21: ..." (the first five, then "and M more").
        lines = re.search(re.escape(path) + r": \d+ of its \d+ sequences? ha(?:s|ve) no target \(lines? "
                          r"((?:\d+(?:, | and (?=\d+[:, ]))?)+)", message)
        if lines:
            rows = [str(int(n) - 1) for n in re.findall(r"\d+", lines[1])]
            named = rows[0] if len(rows) == 1 else ", ".join(rows[:-1]) + " and " + rows[-1]
            return f"train: {key}= row{'s' if len(rows) > 1 else ''} {named} (counting from 0): {message}"
    return message


def _put_rows(out, resume, flags):
    """Writes data= / eval_data= rows where the CLI reads them and points the
    flags there; returns what undoes it when the CLI refuses to start, and
    {flag: path} of the files written."""
    rows = {key: flags[key] for key in _DATA_FILES if _is_rows(flags.get(key))}
    nothing = (lambda: None), {}
    if not rows:
        return nothing
    if resume is not None:
        config = _recorded(resume)
        texts = {key: _encode(key, value, not config.get("bidirectional", False)) for key, value in rows.items()}
        _check_same_rows(resume, texts, f"a resumed run goes on with its own: drop {'= and '.join(texts)}=, or "
                                        "train a new run (out=...)")
        for key in texts:
            del flags[key]
        return nothing
    # The model's attention is a flag, or a key of config=; the CLI checks the file again in any case.
    causal = not _truthy(flags.get("bidirectional", "config" in flags))
    texts = {key: _encode(key, value, causal) for key, value in rows.items()}
    folder = Path(os.path.abspath(os.fspath(out)))
    kind = _folder_kind(folder)
    if kind == "run" and not _truthy(flags.get("force", False)):
        # The CLI refuses the folder (it holds a run); nothing is written.
        flags.update(_check_same_rows(folder, texts, "pass force=True to replace that run, or choose another out="))
        return nothing
    created = next((p for p in reversed([folder, *folder.parents]) if not p.exists()), None)
    folder.mkdir(parents=True, exist_ok=True)
    names = [_DATA_FILES[key] for key in texts]
    before = {name: _regular_bytes(folder / name) for name in names}
    checkpoint = _identity(folder / "checkpoint.safetensors")
    if kind is None:
        _data.write_atomic(folder / ".headlab", '{"headlab":"run"}\n')  # as train/run_folder.cpp writes it
    for key, text in texts.items():
        path = _data.check_output(folder / _DATA_FILES[key], True, into_run=True, caller="train")
        _data.write_atomic(path, text)
        flags[key] = str(path)
    flags["force"] = True

    def undo():
        if kind is None and set(os.listdir(folder)) <= {".headlab", *names}:
            for name in (".headlab", *names):
                (folder / name).unlink(missing_ok=True)
            if created is not None:
                for path in [folder, *folder.parents]:
                    path.rmdir()
                    if path == created:
                        break
        elif kind == "run" and checkpoint is not None and _identity(folder / "checkpoint.safetensors") == checkpoint:
            for name, old in before.items():  # the old run is still whole: its data back
                if old is None:
                    (folder / name).unlink(missing_ok=True)
                else:
                    _data.write_atomic(folder / name, old.decode())
    return undo, {key: flags[key] for key in texts}


def _folder_kind(folder):
    """None for a new or empty folder, "run" for a run's; else a ValueError as
    the CLI's --out gives (a sweep's, a folder of other files, a file)."""
    if not folder.exists():
        return None
    if not folder.is_dir():
        raise ValueError(f"train: out={folder} exists and is not a folder")
    if not any(folder.iterdir()):
        return None
    kind = _data.folder_kind(folder)
    if kind == "run":
        return kind
    if kind == "sweep":
        raise ValueError(f"train: out={folder} holds a sweep, not a run; choose another out=")
    raise ValueError(f"train: out={folder} holds files that are not a headlab run; choose an empty or new folder "
                     "(data= rows are written into the run's own folder)")


def _identity(path):
    try:
        info = os.stat(path)
        return info.st_ino, info.st_size, info.st_mtime_ns
    except OSError:
        return None


class Run:
    """A run folder: config.json, metrics.jsonl, heads.json, the checkpoint."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such run folder")
        # A sweep's folder has a config.json too, but no run of its own.
        if is_sweep_folder(self.path):
            raise ValueError(f"{self.path} is a sweep folder; its runs are {self.path}/<name>/ "
                             f"(headlab.Sweep({str(self.path)!r}))")
        if not (self.path / "config.json").exists() and not (self.path / "checkpoint.safetensors").exists():
            raise FileNotFoundError(f"{self.path}: not a run folder (no config.json nor checkpoint.safetensors)")

    def __repr__(self):
        return f"<headlab.Run {self.path}>"

    @property
    def config(self):
        """config.json: every setting, flag names as keys."""
        return json.loads((self.path / "config.json").read_text())

    @property
    def metrics(self):
        """metrics.jsonl as a list of dicts, one per logged step."""
        path = self.path / "metrics.jsonl"
        if not path.exists():
            return []
        lines = [(n, line) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
        out = []
        for i, (n, line) in enumerate(lines):
            try:
                out.append(json.loads(line))
            except ValueError:
                if i == len(lines) - 1:
                    break  # the last write, cut short by a kill: dropped, as headlab's --resume does
                raise ValueError(f"{path}:{n}: a damaged line with {len(lines) - 1 - i} line(s) after it; mend or "
                                 "remove it (headlab train --resume stops at it too)") from None
        return out

    def metrics_frame(self):
        """metrics as a pandas DataFrame (needs pandas), nested records flattened
        with dots ("heads.L0H0.score")."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("metrics_frame needs pandas (Debian: python3-pandas); .metrics is the same as a list") from e
        return pandas.json_normalize(self.metrics)

    @property
    def heads(self):
        """heads.json: the final head analysis."""
        return json.loads((self.path / "heads.json").read_text())

    def emergence(self, pattern=None):
        """When each head's pattern emerged in training: {head: {"pattern": name,
        "step": step or None}}, by the rule of the run's report.html and of
        sweep.json (the first analysis logged in metrics.jsonl from which the
        pattern's score stays at the score that labels a head on the run's
        set, the final analysis the last point; None when the last score is
        below that, or no analysis was logged). pattern=None: each head's own final label, for the heads whose
        label is a pattern; a name ("previous-token", a user pattern of the
        run's heads.json): that pattern, for every head."""
        if pattern is not None and not isinstance(pattern, str):
            raise TypeError(f"emergence: pattern must be a pattern's name (str) or None, got {pattern!r}")
        if pattern == "":
            raise ValueError("emergence: pattern is empty; give a pattern's name, or None for each head's own label")
        heads = self.path / "heads.json"
        if not heads.is_file():
            raise FileNotFoundError(f"{heads}: no final analysis yet (headlab train --resume {self.path} writes it)")
        found = _core.emergence(heads.read_text(), os.fsencode(self.path / "metrics.jsonl"), pattern or "")
        return {head: {"pattern": name, "step": step} for head, name, step in found}

    @property
    def snapshots(self):
        """{step: path} of the checkpoints `--snapshot-every` kept
        (snapshots/step-NNNNNN.safetensors), by step. The folder an `analyze
        --step N` wrote (snapshots/step-NNNNNN/) is no snapshot; it stays when
        --keep-snapshots removes the snapshot it analyzed."""
        found = {}
        for path in (self.path / "snapshots").glob("step-*.safetensors"):
            digits = path.name[len("step-"):-len(".safetensors")]
            if digits.isdigit() and path.is_file():
                found[int(digits)] = path
        return dict(sorted(found.items()))

    def model(self, step=None):
        """The run's model: its checkpoint, or with step= the snapshot of that
        step (run.snapshots lists them), or the checkpoint when it is of that
        step (a run's last step needs no snapshot)."""
        from ._model import load

        if step is None:
            return load(self.path)
        snapshots = self.snapshots
        if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"model: step must be an int (a snapshot's step), got {step!r}")
        if step not in snapshots:
            final = load(self.path)
            if final.step == step:
                return final
            kept = ", ".join(map(str, snapshots)) or "none (train with --snapshot-every N to keep them)"
            analysis = self.path / "snapshots" / f"step-{step:06d}"
            gone = (f" (it is gone; the analysis an earlier `headlab analyze --step {step}` wrote is kept in "
                    f"{analysis})") if analysis.is_dir() else ""
            raise ValueError(f"{self.path} has no snapshot of step {step}{gone}; its snapshots: {kept}")
        return load(snapshots[step])
