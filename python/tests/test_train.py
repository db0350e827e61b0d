"""headlab.train is `headlab train`, byte for byte; Run reads a run folder."""
import json
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

import headlab
from conftest import ATTN_FLAGS, cli

TIMING = {"tokens_per_s"}


def without_timing(path):
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in path.read_text().splitlines()]


def flags_as_keywords(flags):
    out, i = {}, 0
    while i < len(flags):
        key = flags[i][2:].replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            out[key] = flags[i + 1]
            i += 2
        else:
            out[key] = True
            i += 1
    return out


def test_train_from_python_equals_the_cli(tmp_path):
    cli("train", *ATTN_FLAGS, "--out", tmp_path / "cli")
    run = headlab.train(out=tmp_path / "py", **flags_as_keywords(ATTN_FLAGS))
    assert isinstance(run, headlab.Run)
    a, b = tmp_path / "cli", tmp_path / "py"
    assert (a / "checkpoint.safetensors").read_bytes() == (b / "checkpoint.safetensors").read_bytes()
    assert without_timing(a / "metrics.jsonl") == without_timing(b / "metrics.jsonl")
    assert (a / "config.json").read_bytes() == (b / "config.json").read_bytes()
    assert (a / "heads.json").read_bytes() == (b / "heads.json").read_bytes()


def test_run_reads_the_folder(attn_run):
    run = headlab.Run(attn_run)
    assert run.config["task"] == "induction"
    assert [m["step"] for m in run.metrics] == [3, 6]
    assert run.heads["layers"] == 2
    assert run.model().spec["attn_only"] is True


def test_metrics_frame(attn_run):
    pytest.importorskip("pandas")
    frame = headlab.Run(attn_run).metrics_frame()
    assert list(frame["step"]) == [3, 6]
    assert "eval_loss" in frame.columns


def test_train_errors_are_python_exceptions(tmp_path):
    with pytest.raises(ValueError, match="unknown flag --d-modle"):
        headlab.train(out=tmp_path / "x", d_modle=16, steps=1)
    with pytest.raises(ValueError, match="--heads"):
        headlab.train(out=tmp_path / "y", heads=3, d_model=16, steps=1)
    with pytest.raises(FileNotFoundError):
        headlab.Run(tmp_path / "nowhere")


# A tiny run for the calls below: well under a second.
TINY = dict(task="induction", layers=1, d_model=16, heads=2, attn_only=True, batch=8, eval_batch=8, threads=1,
            analyze_every=0, log_every=1)


def test_resume_from_python_and_flags_as_arrays(tmp_path):
    out = tmp_path / "run"
    run = headlab.train(out=out, steps=2, betas=np.array([0.8, 0.9]), **TINY)
    assert run.config["betas"] == [0.8, 0.9]
    resumed = headlab.train(resume=out, steps=4)
    assert resumed.path == out
    assert [m["step"] for m in resumed.metrics] == [1, 2, 3, 4]
    assert resumed.model().step == 4


def test_roles_to_expect_are_the_runs_for_every_analysis(tmp_path):
    # train's --expect / --scored-only from Python: lists as the flags' comma lists,
    # kept in config.json, and the run's own batch (analyze RUN's) counts the same roles.
    data = tmp_path / "data.jsonl"
    data.write_text('{"tokens": [1, 2, 3, 4], "attend": {"one-back": [null, 0, 1, 2], "start": [0, 0, 0, 0]}}\n'
                    '{"tokens": [4, 3, 2, 1, 0], "attend": {"start": [0, 0, 0, 0, 0]}}\n')
    tiny = {k: v for k, v in TINY.items() if k != "task"}
    run = headlab.train(out=tmp_path / "run", data=data, steps=2, scored_only=["start"], expect=["first-token", "self"],
                        **tiny)
    assert run.config["scored-only"] == ["start"]
    assert run.config["expect"] == ["first-token", "self"]
    roles = [r["pattern"] for r in run.heads["expected_roles"]]
    assert roles == ["one-back", "first-token", "self"]
    assert list(run.model().task_batch()["roles"].values()) == roles
    with pytest.raises(ValueError, match="--scored-only one-bak"):
        headlab.train(out=tmp_path / "bad", data=data, steps=2, scored_only=["one-bak"], **tiny)
    assert not (tmp_path / "bad").exists()


def test_snapshots_are_models_of_their_step(tmp_path):
    run = headlab.train(out=tmp_path / "run", steps=4, snapshot_every=2, **TINY)
    assert list(run.snapshots) == [2, 4]
    early = run.model(step=2)
    assert early.step == 2 and run.model(step=4).step == 4
    tokens = np.arange(early.spec["max_seq_len"]) % early.spec["vocab"]
    assert not np.array_equal(early(tokens), run.model()(tokens))  # two steps of training apart
    with pytest.raises(ValueError, match="has no snapshot of step 3; its snapshots: 2, 4"):
        run.model(step=3)
    with pytest.raises(TypeError, match="step must be an int"):
        run.model(step="2")


def test_the_last_step_is_the_checkpoint_without_a_snapshot(tmp_path):
    run = headlab.train(out=tmp_path / "run", steps=3, **TINY)
    assert run.snapshots == {}
    last = run.model(step=3)
    assert last.step == 3
    tokens = np.arange(last.spec["max_seq_len"]) % last.spec["vocab"]
    assert np.array_equal(last(tokens), run.model()(tokens))
    with pytest.raises(ValueError, match="has no snapshot of step 2; its snapshots: none"):
        run.model(step=2)


def test_an_analysis_outlives_its_pruned_snapshot(tmp_path):
    # --keep-snapshots removes snapshot files, never the analysis a user asked for of one.
    run = headlab.train(out=tmp_path / "run", steps=4, snapshot_every=2, keep_snapshots=2, **TINY)
    cli("analyze", run.path, "--step", "2", "--quiet")
    analysis = run.path / "snapshots" / "step-000002"
    assert (analysis / "heads.json").is_file()
    run = headlab.train(resume=run.path, steps=6)
    assert list(run.snapshots) == [4, 6]  # the folder is no snapshot
    assert (analysis / "heads.json").is_file()
    with pytest.raises(ValueError, match=re.escape(
            f"has no snapshot of step 2 (it is gone; the analysis an earlier `headlab analyze --step 2` wrote is "
            f"kept in {analysis}); its snapshots: 4, 6")):
        run.model(step=2)


def test_a_damaged_metrics_line_is_named_unless_it_is_the_last(tmp_path):
    run = headlab.train(out=tmp_path / "run", steps=3, **TINY)
    path = run.path / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines) + '{"step": 4, "lo')  # a write cut short by a kill
    assert [m["step"] for m in run.metrics] == [1, 2, 3]
    path.write_text(lines[0] + '{"step": 2, "lo\n' + lines[2])
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: a damaged line with 1 line\(s\) after it"):
        run.metrics


def test_train_refuses_bad_calls_before_training(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="out= is empty"):
        headlab.train(out="", steps=1, **TINY)
    with pytest.raises(ValueError, match="give out="):
        headlab.train(steps=1, **TINY)
    with pytest.raises(ValueError, match="--steps 'true' is not a whole number"):
        headlab.train(out=tmp_path / "x", steps=True, **TINY)
    assert list(tmp_path.iterdir()) == []
    # The error is raised, not printed as well.
    assert capfd.readouterr().err == ""


def test_quiet_prints_a_summary_and_the_log_keeps_every_line(tmp_path, capfd):
    # The engine writes to file descriptor 1: capfd sees what a notebook cell would. Two
    # layers, as induction needs: one would add the warning naming the model that solves it.
    run = headlab.train(out=tmp_path / "q", steps=4, quiet=True, **dict(TINY, layers=2))
    out = capfd.readouterr().out.splitlines()
    assert len(out) == 4, out
    assert out[0].startswith("trained 4 steps in ") and out[0].endswith(f"checkpoint: {run.path}/checkpoint.safetensors")
    assert out[1].startswith("Verdict: ")
    assert out[2:] == [f"report: {run.path}/report.html", f"heads:  {run.path}/heads.json"]
    log = (run.path / "train.log").read_text()
    assert all(f"step {step:>6}  loss" in log for step in range(1, 5)), log


def test_help_prints_the_flags_and_trains_nothing(tmp_path, capfd):
    assert headlab.train(out=tmp_path / "x", help=True) is None
    assert "--steps" in capfd.readouterr().out
    assert not (tmp_path / "x").exists()


def test_overlapping_trainings_give_the_interpreter_its_sigint_back(tmp_path):
    # Training a starts, b starts while a runs and ends after it: b must not
    # leave the trainer's handler behind, which would swallow Ctrl-C.
    # Python's own handler first: a suite started in the background (`cmd &`
    # without job control) inherits SIGINT ignored, and Python keeps that.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _overlapping_trainings_then_ctrl_c(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _overlapping_trainings_then_ctrl_c(tmp_path):
    errors = []

    def train(name, steps):
        try:
            headlab.train(out=tmp_path / name, steps=steps, **TINY)
        except BaseException as e:  # noqa: B902 (reported below)
            errors.append(e)

    a = threading.Thread(target=train, args=("a", 150))
    a.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "a" / "metrics.jsonl").exists() and a.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    b = threading.Thread(target=train, args=("b", 450))
    b.start()
    a.join()
    b.join()
    assert errors == []
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(2)  # Python's handler raises at once; the trainer's would swallow it
    assert headlab.train(out=tmp_path / "c", steps=2, **TINY).model().step == 2
