"""headlab.train and headlab.Run: a run folder, written by the CLI's own code."""
import json
import os
from pathlib import Path

import numpy as np

from . import _core


def _flag_args(flags):
    """{"d_model": 64, "attn_only": True, "betas": (0.9, 0.98)} -> CLI arguments,
    each `--flag=value`, so that a value is never read as a flag nor a flag as
    a value: steps=True gives --steps=true, which the CLI rejects naming it."""
    args = []
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, (bool, np.bool_)):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple, np.ndarray)):
            text = ",".join(str(v) for v in (value.ravel() if isinstance(value, np.ndarray) else value))
        else:
            text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        args.append(f"{flag}={text}")
    return args


def command(*args):
    """Runs `headlab ARGS...` in this process; raises on failure: ValueError for a
    usage error (exit 2), KeyboardInterrupt for a stop by a signal, else RuntimeError."""
    status, error = _core.run_command_line([str(a) for a in args])
    if status == 0:
        return
    message = error or f"headlab {args[0] if args else ''} exited with status {status}"
    if status == 2:
        raise ValueError(message)
    if status > 128:
        raise KeyboardInterrupt(message)
    raise RuntimeError(message)


def train(out=None, **flags):
    """Trains as `headlab train --out OUT --flag value ...` does, in this process
    and through the same code: the same flags give the same metrics.jsonl and
    checkpoint, byte for byte (timings aside). Flags are the CLI's, with _ for
    -: train(out="runs/x", task="induction", attn_only=True, steps=500).
    Returns the Run. train(resume="runs/x", steps=1000) continues a run in its
    own folder (`headlab train --resume`, no out=); help=True prints the flags."""
    if flags.pop("help", False):
        command("train", "--help")
        return None
    resume = flags.get("resume")
    for name, path in (("out", out), ("resume", resume)):
        if path is not None and not os.fspath(path):  # the CLI would choose a folder of its own for --out ""
            raise ValueError(f"train: {name}= is empty; give a run folder")
    if out is None and resume is None:
        raise ValueError("train: give out=, the run folder to write (or resume=, a run folder to continue)")
    command("train", *([] if out is None else [f"--out={os.fspath(out)}"]), *_flag_args(flags))
    return Run(resume if out is None else out)


class Run:
    """A run folder: config.json, metrics.jsonl, heads.json, the checkpoint."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such run folder")
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

    @property
    def snapshots(self):
        """{step: path} of the checkpoints `--snapshot-every` kept
        (snapshots/step-NNNNNN.safetensors), by step."""
        found = {}
        for path in (self.path / "snapshots").glob("step-*.safetensors"):
            digits = path.name[len("step-"):-len(".safetensors")]
            if digits.isdigit():
                found[int(digits)] = path
        return dict(sorted(found.items()))

    def model(self, step=None):
        """The run's model: its checkpoint, or with step= the snapshot of that
        step (run.snapshots lists them)."""
        from ._model import load

        if step is None:
            return load(self.path)
        snapshots = self.snapshots
        if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"model: step must be an int (a snapshot's step), got {step!r}")
        if step not in snapshots:
            kept = ", ".join(map(str, snapshots)) or "none (train with --snapshot-every N to keep them)"
            raise ValueError(f"{self.path} has no snapshot of step {step}; its snapshots: {kept}")
        return load(snapshots[step])
