"""headlab.analyze: the C++ head analysis on the caller's own sequences."""
import json

from . import _core, _tokens
from ._model import _as_model


def analyze(model, tokens, targets=None, *, example=0, pruning=True, importance_examples=64, corrupted=None,
            corruption="the caller's corrupted tokens"):
    """The records heads.json holds (scores, labels, ablations, importance,
    circuits, ...; docs/head-metrics.md) for these sequences, as a dict.

    targets: [B, T] class ids, -1 where a position has none; by default the
    next token (models whose classes are their tokens). example: which
    sequence the example attention shows. corrupted: [B, T] tokens for
    activation patching (adds mean and resample ablation and patching)."""
    model = _as_model(model)
    ids = model.tokens(tokens)
    ys = _tokens.next_token_targets(ids, model.spec) if targets is None else _tokens.targets(targets, ids, model.spec)
    bad = None if corrupted is None else model.tokens(corrupted)
    if bad is not None and bad.shape != ids.shape:
        raise ValueError(f"corrupted: expected shape {list(ids.shape)} (the tokens'), got {list(bad.shape)}")
    return json.loads(_core.analyze(model._core, ids, ys, int(example), bool(pruning), int(importance_examples), bad,
                                    corruption))
