"""headlab.train is `headlab train`, byte for byte; Run reads a run folder."""
import json

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
