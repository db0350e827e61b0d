"""headlab.patching: activation-patching grids, as TransformerLens's
`transformer_lens.patching` gives them (get_act_patch_resid_pre, ...).

Each function runs the clean sequences once (caching only the hook points it
patches), then the corrupted ones once per cell with one clean activation
patched in, and returns the metric of each patched run as a numpy grid:

    grid = headlab.patching.resid_pre(model, clean, corrupted)          # [layers, T]
    grid = headlab.patching.head_out(model, clean, corrupted)           # [layers, heads]
    grid = headlab.patching.head_out(model, clean, corrupted, by_position=True)  # [layers, T, heads]

The default metric is the share of the clean-vs-corrupted loss gap the patch
restores, the analysis's `patch_restored` (docs/head-metrics.md,
"Interventions"); docs/python.md, "Patching grids", is the reference.
"""
import sys
import time

import numpy as np

from . import _tokens
from ._analyze import _corrupted
from ._model import _as_model
from ._patch_metric import _NonFinite, _PaddingProbe, _cell, _noted, _number
from ._targets import mean_loss, warn_if_not_next_token

# kind -> (hook point of layer l, its layout): "bt" activations are [B, T, ...]
# (positions on axis 1), "z" is [B, T, h, d_k] (hook_z, hook_q, hook_k, hook_v),
# "pattern" [B, h, T(query), T(key)].
KINDS = {
    "resid_pre": ("blocks.{}.hook_resid_pre", "bt"),
    "resid_mid": ("blocks.{}.hook_resid_mid", "bt"),
    "resid_post": ("blocks.{}.hook_resid_post", "bt"),
    "attn_out": ("blocks.{}.hook_attn_out", "bt"),
    "mlp_out": ("blocks.{}.hook_mlp_out", "bt"),
    "head_out": ("blocks.{}.attn.hook_z", "z"),
    "head_q": ("blocks.{}.attn.hook_q", "z"),
    "head_k": ("blocks.{}.attn.hook_k", "z"),
    "head_v": ("blocks.{}.attn.hook_v", "z"),
    "head_pattern": ("blocks.{}.attn.hook_pattern", "pattern"),
}

# Below this loss gap the default metric's ratio is noise (the analysis's bound).
MIN_GAP = 1e-9


def grid(model, kind, clean, corrupted, metric=None, *, by_position=None, targets=None, lengths=None,
         progress=True):
    """The metric of the corrupted run with the clean `kind` activation patched
    in, one cell at a time. kind: one of KINDS. Residual and layer outputs
    give [layers, T] (one position patched per cell); "head_out" (one head's
    `hook_z`) and "head_pattern" (its `hook_pattern`, at query positions)
    give [layers, heads] patched at every position, or [layers, T, heads]
    with by_position=True (at one position, the query's for a pattern).

    clean, corrupted: [B, T] ids, or lists of sequences of different lengths,
    each corrupted row as long as its clean one (read as headlab.analyze's
    `corrupted`); lengths: [B] real lengths of padded arrays. Only real
    positions are patched: the cell of position p patches the rows in which
    p is real and leaves the others corrupted; NaN where no row has p.

    metric(logits [B, T, C] numpy) -> a number. None: the share of the loss
    gap restored, (loss_corrupted - loss_patched) / (loss_corrupted -
    loss_clean), mean cross-entropy over `targets` (None: the next token,
    as headlab.analyze), a ValueError naming both losses when the gap is
    below 1e-9 (the corruption changed nothing the loss sees).
    targets go with the default metric only (a ValueError with yours).
    progress: a line on stderr once the grid has taken over 2 s."""
    model = _as_model(model)
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"patching: unknown kind {kind!r}; one of {', '.join(map(repr, KINDS))}")
    template, layout = KINDS[kind]
    if by_position is None:
        by_position = layout == "bt"
    if not isinstance(by_position, (bool, np.bool_)):
        raise TypeError(f"patching: by_position must be True or False, got {by_position!r}")
    if layout == "bt" and not by_position:
        raise ValueError(f"patching: {kind} grids are per position ([layers, T], TransformerLens's "
                         f"get_act_patch_{kind}): by_position=False is for head_out and head_pattern")
    _check_options(metric, targets, progress)
    metric = _noted(metric)
    ragged = _tokens.ragged(clean, lengths)  # then the targets come per sequence too
    ids, lengths = _tokens.padded(clean, model.spec, lengths, "clean")
    bad = _corrupted(corrupted, ids, lengths, model.spec)
    names = [template.format(layer) for layer in range(model.spec["layers"])]
    missing = [n for n in names if n not in model.hook_names()]
    if missing:
        raise ValueError(f"patching: {kind} needs hook point {missing[0]!r}, which this model lacks "
                         f"(attn-only models have no MLP and no hook_resid_mid)")

    clean_logits, cache = model.run_with_cache(ids, names=names, lengths=lengths)
    unfinite = _NonFinite(kind, metric)
    probe = _PaddingProbe(kind, metric, lengths, ids.shape)
    if metric is None:
        metric = _restored(model, ids, bad, lengths, targets, clean_logits, ragged)
    B, T = ids.shape
    real = np.ones((B, T), dtype=bool) if lengths is None else np.arange(T) < lengths[:, None]
    heads = [None] if layout == "bt" else range(model.spec["heads"])
    positions = range(T) if by_position else [None]
    out = np.full((len(names), len(positions), len(heads)), np.nan)  # NaN: a position no row has
    cells = list(_cells(names, positions, heads, real))
    shown = _Progress(kind, len(cells) if progress else 0)
    try:  # nothing here catches an exception: the first Ctrl-C of a forward pass ends the grid
        for index, name, rows, head in cells:
            hook = _patch(cache[name], layout, rows, head)
            logits = model.run_with_hooks(bad, [(name, hook)], lengths=lengths)
            cell = _cell(name, index[1] if by_position else None, head)
            out[index] = unfinite.seen(probe.check(_number(metric(logits), kind, cell), logits, cell), cell)
            shown.step()
    finally:  # the progress line ended, also on an error
        shown.done()
    unfinite.warn(len(cells))
    if layout == "bt":
        return out[:, :, 0]
    return out if by_position else out[:, 0, :]


def _check_options(metric, targets, progress):
    """The arguments every patching function shares."""
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"patching: progress must be True or False, got {progress!r}")
    if metric is not None and not callable(metric):
        raise TypeError(f"patching: metric must be a function logits -> number, got {metric!r}")
    if metric is not None and targets is not None:  # else they would be dropped without a word
        raise ValueError("patching: targets are read by the default metric only; a metric of your own gets "
                         "the logits alone: let it read your targets itself (a closure)")


def _cells(names, positions, heads, real):
    """(grid index, hook name, rows [B, T] to patch, head) of every cell with a
    real position in some row."""
    for layer, name in enumerate(names):
        for i, position in enumerate(positions):
            rows = real
            if position is not None:
                rows = np.zeros_like(real)
                rows[:, position] = real[:, position]
            if rows.any():
                for j, head in enumerate(heads):
                    yield (layer, i, j), name, rows, head


def resid_pre(model, clean, corrupted, metric=None, *, targets=None, lengths=None, progress=True):
    """[layers, T]: `blocks.{l}.hook_resid_pre` patched at one position
    (TransformerLens's get_act_patch_resid_pre). See `grid`."""
    return grid(model, "resid_pre", clean, corrupted, metric, targets=targets, lengths=lengths, progress=progress)


def resid_mid(model, clean, corrupted, metric=None, *, targets=None, lengths=None, progress=True):
    """[layers, T]: `blocks.{l}.hook_resid_mid` (get_act_patch_resid_mid); models with an MLP."""
    return grid(model, "resid_mid", clean, corrupted, metric, targets=targets, lengths=lengths, progress=progress)


def attn_out(model, clean, corrupted, metric=None, *, targets=None, lengths=None, progress=True):
    """[layers, T]: `blocks.{l}.hook_attn_out` (get_act_patch_attn_out)."""
    return grid(model, "attn_out", clean, corrupted, metric, targets=targets, lengths=lengths, progress=progress)


def mlp_out(model, clean, corrupted, metric=None, *, targets=None, lengths=None, progress=True):
    """[layers, T]: `blocks.{l}.hook_mlp_out` (get_act_patch_mlp_out); models with an MLP."""
    return grid(model, "mlp_out", clean, corrupted, metric, targets=targets, lengths=lengths, progress=progress)


def head_out(model, clean, corrupted, metric=None, *, by_position=False, targets=None, lengths=None, progress=True):
    """[layers, heads] (get_act_patch_attn_head_out_all_pos), or [layers, T,
    heads] with by_position=True (..._by_pos): one head's `hook_z`. With the
    default metric the [layers, heads] grid is headlab.analyze(...,
    corrupted=...)'s `patch_restored` of each head."""
    return grid(model, "head_out", clean, corrupted, metric, by_position=by_position, targets=targets,
                lengths=lengths, progress=progress)


def head_q(model, clean, corrupted, metric=None, *, by_position=False, targets=None, lengths=None, progress=True):
    """[layers, heads] (get_act_patch_attn_head_q_all_pos), or [layers, T,
    heads] with by_position=True (..._by_pos): one head's queries, `hook_q`."""
    return grid(model, "head_q", clean, corrupted, metric, by_position=by_position, targets=targets,
                lengths=lengths, progress=progress)


def head_k(model, clean, corrupted, metric=None, *, by_position=False, targets=None, lengths=None, progress=True):
    """As head_q for one head's keys, `hook_k` (get_act_patch_attn_head_k_*); by position, the key's."""
    return grid(model, "head_k", clean, corrupted, metric, by_position=by_position, targets=targets,
                lengths=lengths, progress=progress)


def head_v(model, clean, corrupted, metric=None, *, by_position=False, targets=None, lengths=None, progress=True):
    """As head_q for one head's values, `hook_v` (get_act_patch_attn_head_v_*); by position, the value's."""
    return grid(model, "head_v", clean, corrupted, metric, by_position=by_position, targets=targets,
                lengths=lengths, progress=progress)


def head_pattern(model, clean, corrupted, metric=None, *, by_position=False, targets=None, lengths=None,
                 progress=True):
    """[layers, heads] (get_act_patch_attn_head_pattern_all_pos), or [layers,
    T, heads] with by_position=True: one head's attention pattern, at every
    query position or at one (TransformerLens's ..._by_pos is per query too,
    laid out [layers, heads, T])."""
    return grid(model, "head_pattern", clean, corrupted, metric, by_position=by_position, targets=targets,
                lengths=lengths, progress=progress)


def _patch(clean, layout, rows, head):
    """A hook writing the clean activation into the (writable) corrupted one
    at `rows` [B, T] (positions, or query positions of a pattern), of one
    head or, for "bt", the whole vector."""
    def hook(activation, name):
        if layout == "bt":
            activation[rows] = clean[rows]
        elif layout == "z":
            activation[:, :, head][rows] = clean[:, :, head][rows]
        else:
            activation[:, head][rows] = clean[:, head][rows]
    return hook


def _restored(model, ids, bad, lengths, targets, clean_logits, ragged):
    """The default metric: (loss_corrupted - loss_patched) / (loss_corrupted - loss_clean)."""
    if targets is None:
        warn_if_not_next_token(model, "patching")
    ys = _tokens.padded_targets(targets, ids, lengths, model.spec, ragged)
    clean_loss = mean_loss(clean_logits, ys)
    corrupted_loss = mean_loss(model(bad, lengths), ys)
    if not np.isfinite([clean_loss, corrupted_loss]).all():  # every cell would be NaN: refuse before the grid
        raise ValueError(f"patching: the loss is not finite (clean {clean_loss:.6g}, corrupted {corrupted_loss:.6g}): "
                         "the model's logits hold NaN or infinity on these sequences (a diverged run?), so the "
                         "share of the loss gap restored is undefined; check model(tokens) for NaN")
    gap = corrupted_loss - clean_loss
    if abs(gap) < MIN_GAP:
        raise ValueError(f"patching: the corruption does not change the loss (clean {clean_loss:.6g}, corrupted "
                         f"{corrupted_loss:.6g}), so the share of it restored is undefined; give corrupted tokens "
                         "that change the targets' loss, or a metric of your own")
    return lambda logits: (corrupted_loss - mean_loss(logits, ys)) / gap


class _Progress:
    """`patching KIND: k/n cells` on stderr, only once the grid has run 2 s:
    one line redrawn in place (a carriage return) on a terminal or in a
    notebook, else (a log file, a pipe, where a carriage return redraws
    nothing) a line of its own at each tenth of the cells."""

    def __init__(self, kind, total):
        self.kind, self.total, self.count = kind, total, 0
        self.start = self.last = time.monotonic()
        self.shown = False
        self.redraw = _redraws(sys.stderr)
        self.printed = 0  # the count of the last line of its own

    def step(self):
        self.count += 1
        now = time.monotonic()
        if not self.total or now - self.start <= 2:
            return
        if self.redraw and now - self.last > 0.5:
            self.last, self.shown = now, True
            print(f"\r{self._line()}", end="", file=sys.stderr, flush=True)
        elif not self.redraw and self.count * 10 // self.total > self.printed * 10 // self.total:
            self._own_line()

    def done(self):
        if self.shown and self.redraw:
            print(f"\r{self._line()}", file=sys.stderr, flush=True)
        elif self.shown and self.printed != self.count:
            self._own_line()

    def _own_line(self):
        self.printed, self.shown = self.count, True
        print(self._line(), file=sys.stderr, flush=True)

    def _line(self):
        return f"patching {self.kind}: {self.count}/{self.total} cells"


def _redraws(stream):
    """Whether a carriage return redraws the line on `stream`: a terminal's,
    or a Jupyter kernel's (ipykernel's stream, which the notebook renders)."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
    return type(stream).__module__.split(".")[0] == "ipykernel"


# transformer_lens.patching's names -> what headlab.patching calls that grid.
_TL_NAMES = {
    "get_act_patch_resid_pre": "resid_pre(model, clean, corrupted, metric)",
    "get_act_patch_resid_mid": "resid_mid(model, clean, corrupted, metric)",
    "get_act_patch_attn_out": "attn_out(model, clean, corrupted, metric)",
    "get_act_patch_mlp_out": "mlp_out(model, clean, corrupted, metric)",
    "get_act_patch_block_every": "resid_pre, attn_out and mlp_out (model, clean, corrupted, metric), one call each",
    "get_act_patch_attn_head_out_all_pos": "head_out(model, clean, corrupted, metric)",
    "get_act_patch_attn_head_out_by_pos": "head_out(model, clean, corrupted, metric, by_position=True)",
    "get_act_patch_attn_head_pattern_all_pos": "head_pattern(model, clean, corrupted, metric)",
    "get_act_patch_attn_head_pattern_by_pos": "head_pattern(model, clean, corrupted, metric, by_position=True)",
    "get_act_patch_attn_head_all_pos_every": "head_out, head_q, head_k, head_v and head_pattern (model, clean, "
                                             "corrupted, metric), one call each",
    "get_act_patch_attn_head_by_pos_every": "head_out, head_q, head_k, head_v and head_pattern (model, clean, "
                                            "corrupted, metric, by_position=True), one call each",
    "generic_activation_patch": "grid(model, kind, clean, corrupted, metric), kind one of KINDS",
}
for _which in "qkv":
    _TL_NAMES[f"get_act_patch_attn_head_{_which}_all_pos"] = f"head_{_which}(model, clean, corrupted, metric)"
    _TL_NAMES[f"get_act_patch_attn_head_{_which}_by_pos"] = (f"head_{_which}(model, clean, corrupted, metric, "
                                                             "by_position=True)")


def __getattr__(name):
    """transformer_lens.patching's function names: an AttributeError naming
    headlab's function and its arguments, which differ (the clean tokens, not
    the clean cache; the metric gets numpy logits)."""
    if name in _TL_NAMES:
        raise AttributeError(f"headlab.patching has no {name} (TransformerLens's): call headlab.patching."
                             f"{_TL_NAMES[name]}, with the clean tokens (not a clean cache) before the corrupted "
                             "ones; the metric receives numpy logits [B, T, C] (docs/python.md, \"Patching grids\")")
    raise AttributeError(f"module 'headlab.patching' has no attribute {name!r}")


def __dir__():
    """What dir() and a notebook's tab completion list: the grids and their
    constants, not this module's imports (np, sys, time, mean_loss ...)."""
    mine = (__name__, __name__.rsplit(".", 1)[0] + "._path_patching")
    return sorted(name for name, value in globals().items() if not name.startswith("_") and (
        name in ("KINDS", "MIN_GAP") or getattr(value, "__module__", None) in mine))


from ._path_patching import path  # noqa: E402  (it reads this module's helpers)
