"""Fixtures: tiny runs trained once per session by the headlab binary, and the
package imported from the build folder (HEADLAB_BUILD, default build/)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("HEADLAB_BUILD", REPO / "build")).resolve()
sys.path.insert(0, str(BUILD / "python"))

import headlab  # noqa: E402

HEADLAB = BUILD / "headlab"

# A model with every kind of hook point (LayerNorm, MLP), trained a few steps.
MLP_FLAGS = ["--task", "first-prev-pair", "--layers", "2", "--heads", "2", "--d-model", "16", "--steps", "6",
             "--batch", "8", "--eval-batch", "8", "--log-every", "3", "--analyze-every", "3", "--threads", "1",
             "--seed", "3"]
# Attention only, as the induction notebook's.
ATTN_FLAGS = ["--task", "induction", "--layers", "2", "--heads", "2", "--d-model", "16", "--attn-only",
              "--steps", "6", "--batch", "8", "--eval-batch", "8", "--log-every", "3", "--threads", "1",
              "--seed", "1"]


def cli(*args):
    """Runs the headlab binary; returns its stdout (a failure fails the test with stderr)."""
    done = subprocess.run([str(HEADLAB), *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, f"headlab {' '.join(map(str, args))} failed: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def mlp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "mlp"
    cli("train", *MLP_FLAGS, "--out", out)
    return out


@pytest.fixture(scope="session")
def attn_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "attn"
    cli("train", *ATTN_FLAGS, "--out", out)
    return out


@pytest.fixture(scope="session")
def no_ln_model(tmp_path_factory):
    """An MLP model without LayerNorm (the grokking shape), two steps."""
    out = tmp_path_factory.mktemp("runs") / "no-ln"
    cli("train", "--task", "first-prev-pair", "--layers", "2", "--heads", "2", "--d-model", "16", "--no-layernorm",
        "--steps", "2", "--batch", "8", "--eval-batch", "8", "--log-every", "2", "--threads", "1", "--seed", "4",
        "--out", out)
    return headlab.load(out)


@pytest.fixture(scope="session")
def bidirectional_model(tmp_path_factory):
    """A --bidirectional model (every query sees every real key), two steps."""
    out = tmp_path_factory.mktemp("runs") / "bidirectional"
    cli("train", "--task", "first-prev-pair", "--bidirectional", "--d-model", "16", "--steps", "2", "--batch", "8",
        "--eval-batch", "8", "--threads", "1", "--seed", "5", "--out", out)
    return headlab.load(out)


@pytest.fixture(scope="session")
def mlp_model(mlp_run):
    return headlab.load(mlp_run)


@pytest.fixture(scope="session")
def attn_model(attn_run):
    return headlab.load(attn_run)


# TransformerLens's copy points, which names=None leaves out (they come when named).
COPY_POINTS = ("hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input", "hook_mlp_in")


def every_point(model):
    """The hook names run_with_cache and gradients take for names=None."""
    return [n for n in model.hook_names() if not n.endswith(COPY_POINTS)]


def random_tokens(model, batch=3, seq_len=None, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, model.spec["vocab"], size=(batch, seq_len or model.spec["max_seq_len"]))


def cross_entropy(logits, targets):
    """Mean over targets != -1, in float64."""
    logits = logits.astype(np.float64)
    mask = targets != -1
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, np.where(mask, targets, 0)[..., None], axis=-1)[..., 0]
    return float(-(picked * mask).sum() / mask.sum())
