"""headlab.sweep is `headlab sweep`: the same runs, the same refusals, its
output through sys.stdout and sys.stderr, Ctrl-C a stop that --resume ends."""
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

import headlab
from headlab import _program
from conftest import cli

# Two runs of 3 steps (well under a second each), a grid over a switch given as a list of bools.
FLAGS = dict(seeds=[0], attn_only=[True, False], heads=2, steps=3, d_model=16, batch=8, eval_batch=8, analyze_every=0,
             log_every=3, jobs=2)
CLI_FLAGS = ["--seeds", "0", "--attn-only", "true,false", "--heads", "2", "--steps", "3", "--d-model", "16", "--batch",
             "8", "--eval-batch", "8", "--analyze-every", "0", "--log-every", "3", "--jobs", "2"]
RUNS = ["attn-only-on-h2-s0", "attn-only-off-h2-s0"]


def test_sweep_from_python_is_the_cli_s(tmp_path, capfd):
    by_cli, out = tmp_path / "cli", tmp_path / "py"
    cli("sweep", *CLI_FLAGS, "--out", by_cli)
    capfd.readouterr()
    sweep = headlab.sweep(out=out, **FLAGS)
    printed = capfd.readouterr()
    assert isinstance(sweep, headlab.Sweep) and sweep.path == out
    theirs = headlab.Sweep(by_cli)
    assert list(sweep.runs) == list(theirs.runs) and sorted(sweep.runs) == sorted(RUNS)
    assert sweep.settings == theirs.settings
    assert sweep.settings["attn-only-off-h2-s0"] == {"attn-only": False, "heads": 2, "seed": 0}
    assert sweep.config == theirs.config
    assert sweep.summary["grid"] == theirs.summary["grid"] == {"attn-only": [True, False]}
    for name in RUNS:  # the same training, bit for bit
        assert (out / name / "checkpoint.safetensors").read_bytes() == \
            (by_cli / name / "checkpoint.safetensors").read_bytes(), name
    # The CLI's stdout on sys.stdout, its progress lines on sys.stderr.
    assert f"sweep.json: {out}/sweep.json" in printed.out.splitlines()
    assert re.search(r"^\[[12]/2\] attn-only (on|off), h2 s0: acc ", printed.err, re.M), printed.err
    assert printed.err.startswith("sweep: 2 runs"), printed.err


def test_an_earlier_sweep_is_kept_without_force_and_resumed_or_replaced(tmp_path, capfd):
    out = tmp_path / "s"
    headlab.sweep(out=out, **FLAGS)
    checkpoint = out / RUNS[0] / "checkpoint.safetensors"
    before = checkpoint.stat().st_mtime_ns
    capfd.readouterr()
    with pytest.raises(ValueError, match=re.escape(f"headlab sweep: error: --out {out} is not empty; pass --force")):
        headlab.sweep(out=out, **FLAGS)
    assert capfd.readouterr().err == ""  # raised, not printed as well
    assert checkpoint.stat().st_mtime_ns == before
    # --resume of a finished sweep keeps its runs.
    assert headlab.sweep(resume=out).path == out
    assert checkpoint.stat().st_mtime_ns == before
    # --force trains them again, the same.
    data = checkpoint.read_bytes()
    assert headlab.sweep(out=out, force=True, **FLAGS).runs[RUNS[0]].path == out / RUNS[0]
    assert checkpoint.stat().st_mtime_ns != before and checkpoint.read_bytes() == data


def test_bad_calls_are_refused_before_anything_is_written(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=re.escape("headlab sweep: error: unknown flag --step (did you mean "
                                                   "--steps?)")):
        headlab.sweep(out=tmp_path / "x", step=3)
    with pytest.raises(ValueError, match="out= is empty"):
        headlab.sweep(out="", steps=3)
    with pytest.raises(ValueError, match="give out="):
        headlab.sweep(steps=3)
    with pytest.raises(TypeError, match=re.escape("sweep: data= takes a data file's path, got list")):
        headlab.sweep(out=tmp_path / "x", data=[[1, 2, 3]])
    assert list(tmp_path.iterdir()) == []
    assert capfd.readouterr().err == ""


def test_keywords_become_the_cli_s_lists():
    from headlab._run import _flag_args

    assert _flag_args({"seeds": range(3), "attn_only": [True, False], "shuffle": np.array([False, True]),
                       "lr": (1e-3, 0.01), "heads": 2, "bidirectional": True, "init": None}) == [
        "--seeds=0,1,2", "--attn-only=true,false", "--shuffle=false,true", "--lr=0.001,0.01", "--heads=2",
        "--bidirectional=true"]


def test_help_prints_the_flags_and_sweeps_nothing(tmp_path, capfd):
    assert headlab.sweep(out=tmp_path / "x", help=True) is None
    assert "--seeds" in capfd.readouterr().out
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_stops_the_runs_with_a_checkpoint_and_resume_finishes_them(tmp_path, sig):
    # Python's own handler first: a suite started in the background (`cmd &`
    # without job control) inherits SIGINT ignored, and Python keeps that.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        _stop_then_resume(tmp_path, sig)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signal.getsignal(signal.SIGTERM) is on_sigterm  # the sweep's passing on is gone


STEPS = 2000  # a run of a fraction of a second: the signal comes while it trains


def _stop_then_resume(tmp_path, sig):
    out = tmp_path / "s"
    metrics = out / "h2-s0" / "metrics.jsonl"

    def signal_once_training():
        deadline = time.monotonic() + 30
        while not metrics.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(os.getpid(), sig)

    flags = dict(FLAGS, seeds="0", attn_only=True, steps=STEPS, log_every=1, jobs=1)
    stop = threading.Thread(target=signal_once_training)
    stop.start()
    try:
        # Ctrl-C is passed on to the sweep; SIGTERM too, and stops it as it stops train (KeyboardInterrupt).
        with pytest.raises(KeyboardInterrupt, match=re.escape(f"headlab sweep: stopped by signal {int(sig)}; "
                                                              f"continue with: headlab sweep --resume {out}")):
            headlab.sweep(out=out, **flags)
    finally:
        stop.join()
    stopped = headlab.Run(out / "h2-s0").model().step
    assert 0 < stopped < STEPS  # stopped after a step, with a checkpoint
    if sig == signal.SIGINT:
        sweep = headlab.sweep(resume=out)
        assert sweep.runs["h2-s0"].model().step == STEPS
        assert [m["step"] for m in sweep.runs["h2-s0"].metrics] == list(range(1, STEPS + 1))


def test_a_program_of_another_build_is_refused(tmp_path, monkeypatch, capfd):
    # build/headlab older or newer than the module (one of the two rebuilt alone) would train the sweep's runs
    # on other code than headlab.train: its --version line must be the module's.
    fake = tmp_path / "headlab"
    fake.write_text("#!/bin/sh\necho 'headlab 0.1.0 (git 0000000)'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_program, "_built_program", lambda: fake)
    with pytest.raises(RuntimeError, match=r"another build than this module \(it says 'headlab 0\.1\.0 \(git "
                                           r"0000000\)'.*scripts/setup\.sh --python"):
        headlab.sweep(out=tmp_path / "s", **FLAGS)
    assert not (tmp_path / "s").exists()
    assert capfd.readouterr().out == ""  # refused before the sweep started
    # The program of this build passes: it says the module's line.
    monkeypatch.undo()
    assert _program.program() == _program._built_program()
    assert headlab._core.version_line().startswith("headlab ")
