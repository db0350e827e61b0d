"""headlab.analyze: the C++ head analysis on the caller's own sequences."""
import json

import numpy as np

from . import _core, _tokens
from ._model import _as_model


def analyze(model, tokens, targets=None, *, example=0, pruning=True, importance_examples=64, corrupted=None,
            corruption="the caller's corrupted tokens"):
    """The records heads.json holds (scores, labels, ablations, importance,
    circuits, ...; docs/head-metrics.md) for these sequences, as a dict.

    targets: [B, T] class ids, -1 where a position has none; by default the
    next token (models whose classes are their tokens). example: which
    sequence the example attention shows. importance_examples (>= 1): how
    many sequences the gradient importance averages over. corrupted: [B, T]
    tokens for activation patching (adds mean and resample ablation and
    patching). Needs seq_len >= 3."""
    model = _as_model(model)
    ids = model.tokens(tokens)
    if ids.shape[1] < 3:
        raise ValueError(f"analyze needs seq_len >= 3 (the positional scores read queries at positions >= 2), "
                         f"got {ids.shape[1]} positions")
    example = _whole("example", example, 0, ids.shape[0] - 1, f"one of the {ids.shape[0]} sequences")
    importance_examples = _whole("importance_examples", importance_examples, 1, None,
                                 "how many sequences the gradient importance averages over")
    if not isinstance(pruning, (bool, np.bool_)):
        raise TypeError(f"analyze: pruning must be True or False, got {pruning!r}")
    ys = _tokens.next_token_targets(ids, model.spec) if targets is None else _tokens.targets(targets, ids, model.spec)
    bad = None if corrupted is None else _tokens.tokens(corrupted, model.spec, "corrupted")
    if bad is not None and bad.shape != ids.shape:
        raise ValueError(f"corrupted: expected shape {list(ids.shape)} (the tokens'), got {list(bad.shape)}")
    return json.loads(_core.analyze(model._core, ids, ys, example, bool(pruning), importance_examples, bad, corruption))


def _whole(name, value, low, high, meaning):
    """`value` as an int in [low, high] (high None: no bound), else a TypeError
    or ValueError naming it: a float or a string is never truncated."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"analyze: {name} must be an int ({meaning}), got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"analyze: {name} must be {bound} ({meaning}), got {value}")
    return int(value)
