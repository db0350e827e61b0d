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
import functools
import sys
import time
import warnings

import numpy as np

from . import _tokens
from ._analyze import _corrupted
from ._model import _as_model
from ._targets import _caller_level, mean_loss, warn_if_not_next_token

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


# What torch's tensor methods raise on numpy logits (l.log_softmax(-1) an
# AttributeError, l.gather an AttributeError, torch.log_softmax(l, -1) a
# TypeError): a metric written for TransformerLens or for model.gradients.
_TORCH_ON_NUMPY = ("headlab: raised in your metric, which headlab.patching calls with the logits as a numpy array "
                   "[B, T, C]; if it is written for torch tensors (l.log_softmax(-1), torch.log_softmax(l, -1)), "
                   "write it in numpy, or convert inside it: torch.from_numpy(l)")


def _noted(metric):
    """The caller's metric, with a note on an AttributeError or TypeError it
    raises (raised as it was otherwise); None stays None."""
    if metric is None:
        return None

    @functools.wraps(metric)
    def noted(logits):
        try:
            return metric(logits)
        except (AttributeError, TypeError) as e:
            e.add_note(_TORCH_ON_NUMPY)
            raise

    return noted


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


def _cell(name, position, head):
    """A cell as messages name it: the hook point, then its position and head."""
    return name + ("" if position is None else f" position {position}") + ("" if head is None else f" head {head}")


def _number(value, kind, cell):
    """The metric's value as a float, or an error naming the cell and the value."""
    try:  # without a dtype: as float64, None would be NaN and "0.5" a number
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: a torch tensor that requires grad
        array = None
    if array is None or array.dtype.kind not in "biuf":
        raise TypeError(f"patching {kind}: the metric must return a number, got {value!r:.200} "
                        f"(patching {cell})")
    if array.shape != ():
        raise ValueError(f"patching {kind}: the metric must return one number, got an array of shape "
                         f"{list(array.shape)} (patching {cell}); reduce it, e.g. with .mean()")
    return float(array.astype(np.float64))


def _metric_name(metric):
    """A metric as warnings name it: its function's name, else its repr."""
    metric = getattr(metric, "__wrapped__", metric)  # _noted's
    return getattr(metric, "__name__", None) or repr(metric)


class _PaddingProbe:
    """Warns when a metric of the caller's reads padded positions, whose logits
    mean nothing (logits[:, -1] of a row shorter than the batch): at the first
    cell, the metric again on the logits with noise at every padded position,
    a value that changes is read from there. One more call of the metric, no
    forward pass; nothing without padding, nor for the default metric (it
    reads the targets' positions only)."""

    def __init__(self, kind, metric, lengths, shape):
        self.kind, self.metric = kind, metric
        self.padded = None
        if metric is not None and lengths is not None:
            self.padded = np.arange(shape[1])[None, :] >= lengths[:, None]  # [B, T]

    def check(self, value, logits, cell):
        if self.padded is None:
            return value
        padded, self.padded = self.padded, None  # the first cell only
        noisy = np.array(logits)
        noisy[padded] = np.random.default_rng(0).normal(0.0, 10.0, noisy[padded].shape)
        other = _number(self.metric(noisy), self.kind, cell)
        if not np.isclose(value, other, rtol=1e-6, atol=1e-9, equal_nan=True):
            rows = ", ".join(str(int(b)) for b in np.flatnonzero(padded.any(axis=1)))
            warnings.warn(f"patching {self.kind}: the metric {_metric_name(self.metric)} reads padded positions "
                          f"(of rows {rows}): its value changes with their logits, which mean nothing (logits[:, -1] of a shorter row is padding); read each row's last real position, "
                          "logits[b, lengths[b] - 1] (model.padded(tokens) gives the lengths)", UserWarning,
                          stacklevel=_caller_level())
        return value


class _NonFinite:
    """Counts the cells whose metric is NaN or infinite, and warns once, after
    the grid, naming the metric and the first such cell: such a value is kept
    in the grid (the metric may mean it), but it looks like the NaN of a
    position no row has, and a plot draws it as a blank cell."""

    def __init__(self, kind, metric):
        self.kind, self.count, self.first = kind, 0, None
        self.name = ("the default metric (the share of the loss gap restored)" if metric is None else
                     f"the metric {_metric_name(metric)}")

    def seen(self, value, cell):
        if not np.isfinite(value):
            self.count += 1
            if self.first is None:
                self.first = (value, cell)
        return value

    def warn(self, total):
        if not self.count:
            return
        value, cell = self.first
        warnings.warn(f"patching {self.kind}: {self.name} returned NaN or infinity in {self.count} of {total} "
                      f"cells, the first {value} (patching {cell}); the grid holds these values as "
                      "returned: a metric dividing by zero, or the log of 0, on the patched logits?",
                      RuntimeWarning, stacklevel=_caller_level())


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


from ._path_patching import path  # noqa: E402  (it reads this module's helpers)
