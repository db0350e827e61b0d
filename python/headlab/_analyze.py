"""headlab.analyze: the C++ head analysis on the caller's own sequences."""
import json

import numpy as np

from . import _core, _patterns, _tokens
from ._model import _as_model
from ._targets import warn_if_not_next_token


def analyze(model, tokens, targets=None, *, lengths=None, patterns=None, roles=None, sources=False, example=0,
            pruning=True, importance_examples=64, corrupted=None, corruption="the caller's corrupted tokens",
            threshold=0.5, margin=0.15, diffuse_entropy=0.8, sink_delta_loss=0.02, chunk_rows=None):
    """The records heads.json holds (scores, labels, ablations, importance,
    circuits, the verdict ...; docs/head-metrics.md) for these sequences, as a dict.

    tokens: [B, T] ids, or a list of sequences of different lengths (padded
    and masked, as a data file's). targets: class ids of the tokens' shape, -1
    where a position has none (for a list of sequences, one list per
    sequence as long as its tokens); by default the next token (models whose
    classes are their tokens). lengths: [B] real lengths of a padded array.
    patterns: your own head patterns, scored for every head and used as
    labels: a dict name -> a boolean mask [B, T, T] or [T, T] (query, key:
    where the attention counts; a sequence of L tokens reads mask[:L, :L]),
    "offset:K" or "position:K", or per-sequence key lists as a data file's
    "attend"; or (pattern, definition) pairs. Each must give some query a key.
    roles: the roles you expect, a dict role -> pattern name (built-in or
    yours): the verdict says which were found; a pattern no role names is
    scored only (`headlab analyze --scored-only NAME`; `--expect NAME` adds a
    role). sources: the targets are
    copies of earlier tokens (as in induction): adds the task-position
    scores. `model.task_batch()` gives all of these for the run's own task.
    example: which sequence the example attention shows.
    importance_examples (>= 1): the gradient importance averages over the
    sequences with a target among the first this many. corrupted: tokens for activation patching (adds mean and
    resample ablation and patching), read with the clean sequences' lengths:
    a list of sequences, each as long as its clean one, or a [B, T] array
    whose positions past a clean sequence's length are padding (`headlab
    analyze --data F --corrupted C` from the CLI). threshold, margin,
    diffuse_entropy, sink_delta_loss: the label rules (`headlab analyze
    --threshold ...`). chunk_rows: sequences run at a time (None: as `headlab
    analyze` picks them, about 64 MiB of activations per chunk), so memory
    does not grow with the set; the numbers do not depend on it but for float
    rounding. Needs seq_len >= 3. A model edited from Python
    (Model.with_params) adds its provenance, "edited", as heads.json does."""
    model = _as_model(model)
    ragged = _tokens.ragged(tokens, lengths)  # then the targets come per sequence too
    ids, lengths = _tokens.padded(tokens, model.spec, lengths)
    if ids.shape[1] < 3:
        raise ValueError(f"analyze needs seq_len >= 3 (the positional scores read queries at positions >= 2), "
                         f"got {ids.shape[1]} positions")
    example = _whole("example", example, 0, ids.shape[0] - 1, f"one of the {ids.shape[0]} sequences")
    importance_examples = _whole("importance_examples", importance_examples, 1, None,
                                 "how many sequences the gradient importance averages over")
    chunk = 0 if chunk_rows is None else _whole("chunk_rows", chunk_rows, 1, None, "sequences run at a time")
    for name, flag in (("pruning", pruning), ("sources", sources)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"analyze: {name} must be True or False, got {flag!r}")
    # By heads.json's label_options keys, which are these keywords.
    labels = {"threshold": _fraction("threshold", threshold), "margin": _fraction("margin", margin),
              "diffuse_entropy": _fraction("diffuse_entropy", diffuse_entropy),
              "sink_delta_loss": _number("sink_delta_loss", sink_delta_loss)}
    if targets is None:
        warn_if_not_next_token(model, "analyze")
    ys = _tokens.padded_targets(targets, ids, lengths, model.spec, ragged)
    bad = None if corrupted is None else _corrupted(corrupted, ids, lengths, model.spec)
    user = _patterns.patterns(patterns, ids.shape[0], ids.shape[1], lengths)
    records = json.loads(_core.analyze(model._core, ids, ys, lengths, user, _patterns.roles(roles), bool(sources),
                                       labels, example, bool(pruning), importance_examples, bad, corruption, chunk))
    if model.edited is not None:  # as heads.json of `headlab analyze` on the saved edit: not the source's heads
        records["edited"] = model.edited
    return records


def _corrupted(values, ids, lengths, spec):
    """[B, T] corrupted ids for `padded`'s ids: the corrupted run uses the clean
    rows' lengths, so a corrupted row must be real wherever its clean row is.
    Rows of other lengths than T must each have their clean row's length
    (a longer one would be cut, a shorter one read past its end); a [B, T]
    array (rows of T) is read as padded, its padding set to 0 as the clean
    rows' is."""
    B, T = ids.shape
    clean = [T] * B if lengths is None else [int(n) for n in lengths]
    if isinstance(values, (list, tuple)) and values and all(isinstance(r, (list, tuple, np.ndarray)) for r in values):
        if len(values) != B:
            raise ValueError(f"corrupted: {len(values)} sequences for {B} clean ones; give one per sequence")
        if any(len(row) != T for row in values):
            array = np.zeros((B, T), dtype=np.int64)
            for i, row in enumerate(values):
                if len(row) != clean[i]:
                    raise ValueError(f"corrupted[{i}]: {len(row)} tokens, but its clean sequence tokens[{i}] has {clean[i]}; "
                                     "a corrupted sequence must be as long as its clean one (the corrupted run "
                                     "reads the clean sequence's positions)")
                ids_i = _tokens._int_array(row, f"corrupted[{i}]")
                if ids_i.shape[0] != 1:
                    raise ValueError(f"corrupted[{i}]: expected a sequence of ids, got shape {list(ids_i.shape)}")
                array[i, :len(row)] = ids_i[0]
            values = array
    bad = _tokens.tokens(values, spec, "corrupted")
    if bad.shape != ids.shape:
        raise ValueError(f"corrupted: expected shape {list(ids.shape)} (the tokens'), got {list(bad.shape)}")
    if lengths is not None:
        bad = bad.copy()
        bad[np.arange(T) >= lengths[:, None]] = 0  # what the clean rows are padded with
    return bad


def _fraction(name, value):
    value = _number(name, value)
    if not 0 <= value <= 1:
        raise ValueError(f"analyze: {name} must be between 0 and 1, got {value}")
    return value


def _number(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"analyze: {name} must be a number, got {value!r}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"analyze: {name} must be a finite number >= 0, got {value}")
    return float(value)


def _whole(name, value, low, high, meaning):
    """`value` as an int in [low, high] (high None: no bound), else a TypeError
    or ValueError naming it: a float or a string is never truncated."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"analyze: {name} must be an int ({meaning}), got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"analyze: {name} must be {bound} ({meaning}), got {value}")
    return int(value)
