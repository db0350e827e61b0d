"""What a patching grid does with the caller's metric (docs/python.md,
"Patching grids"): its value read as one number, a NaN or infinity counted
and warned of once, a read of padded positions found by one more call, and
an exception of a metric written for torch noted."""
import functools
import warnings

import numpy as np

from ._targets import _caller_level


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
