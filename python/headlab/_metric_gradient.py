"""The seed of model.gradients for a metric of the caller's: its gradient at
the logits, given as grad_logits= (numpy) or taken from metric= by torch's
autograd. Padded positions get no gradient: their logits mean nothing."""
import warnings

import numpy as np

from ._targets import _caller_level


def seed_function(metric, grad_logits, lengths):
    """logits [B, T, C] (a writable float copy) -> dMetric/dlogits of the same
    shape and dtype, what the C++ backward pass starts from."""

    def seed(logits):
        if metric is not None:
            g = _torch_gradient(metric, logits)
        else:
            g = _given(grad_logits, logits)
        if lengths is not None:
            padded = np.arange(logits.shape[1])[None, :] >= lengths[:, None]  # [B, T]
            reads = (g != 0).any(axis=-1) & padded
            if reads.any():
                rows = ", ".join(str(int(b)) for b in np.unique(np.nonzero(reads)[0]))
                if not g[~padded].any():
                    raise ValueError(f"gradients: the metric reads only padded positions (of rows {rows}), whose "
                                     "logits mean nothing, so every gradient would be 0; read each row's last real "
                                     "position, logits[b, lengths[b] - 1]")
                warnings.warn(f"gradients: the metric reads padded positions of rows {rows} (logits[:, -1] of a "
                              "shorter row is padding); they get no gradient: read each row's last real position, "
                              "logits[b, lengths[b] - 1]", UserWarning, stacklevel=_caller_level())
            g[padded] = 0
        return g

    return seed


def _given(grad_logits, logits):
    """grad_logits as the logits' float array, checked."""
    g = grad_logits
    if type(g).__module__.split(".")[0] == "torch" and hasattr(g, "detach"):
        g = g.detach().cpu().numpy()
    try:
        array = np.asarray(g)
    except (TypeError, ValueError):
        array = None
    if array is None or array.dtype.kind not in "fiu" or array.dtype == np.bool_:
        raise TypeError(f"gradients: grad_logits must be a float array of the logits' shape {list(logits.shape)} "
                        f"(dMetric/dlogits), got {type(grad_logits).__name__}")
    if array.shape != logits.shape:
        raise ValueError(f"gradients: grad_logits has shape {list(array.shape)}; expected the logits' shape "
                         f"{list(logits.shape)} [B, T, classes] (padded rows: their longest length)")
    return _finite(array.astype(logits.dtype, copy=True), "grad_logits")


# What numpy's functions raise on a tensor that requires a gradient (np.mean(l)
# a TypeError from torch's mean, np.log(l) a RuntimeError from .numpy()): a
# metric written for headlab.patching, which hands it numpy logits.
_NUMPY_ON_TORCH = ("headlab: raised in your metric, which model.gradients calls with the logits as a torch tensor "
                   "that requires a gradient; if it uses numpy's functions (np.mean(l), np.log(l), l.numpy()), which "
                   "do not take such a tensor, write it with the tensor's own operations (l.mean(), "
                   "l.log_softmax(-1)), or pass grad_logits=")


def _torch_gradient(metric, logits):
    """dMetric/dlogits by torch: metric(logits as a torch tensor) -> one number."""
    try:
        import torch
    except ImportError:
        raise ImportError("gradients(metric=...) differentiates your metric with torch, which is not installed "
                          "(apt-get install python3-torch); or pass grad_logits=, dMetric/dlogits as a numpy array "
                          "of the logits' shape") from None
    x = torch.from_numpy(logits).requires_grad_(True)
    with torch.enable_grad():
        try:
            value = metric(x)
        except (TypeError, RuntimeError) as e:  # raised as it was, with a note on the likely cause
            e.add_note(_NUMPY_ON_TORCH)
            raise
    if isinstance(value, torch.Tensor) and value.is_complex():
        raise TypeError(f"gradients: metric(logits) must return a real number, got the complex {value!r:.100}")
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"gradients: metric(logits) must return a torch tensor computed from the tensor it is "
                        f"given (logits [B, T, classes], torch), got {value!r:.200}")
    if value.numel() != 1:
        raise ValueError(f"gradients: metric(logits) must return one number, got a tensor of shape "
                         f"{list(value.shape)}; reduce it, e.g. with .mean()")
    if not value.requires_grad:
        raise ValueError("gradients: metric(logits) does not depend on the logits: compute it from the tensor it "
                         "is given with torch operations (a result through numpy or .item() has no gradient)")
    (g,) = torch.autograd.grad(value.reshape(()), x, allow_unused=True)
    if g is None:  # it requires a gradient through another tensor only (a parameter of yours, detached logits)
        raise ValueError("gradients: metric(logits) does not depend on the logits it is given (its gradient reaches "
                         "other tensors only: logits.detach(), a result through numpy, times a tensor of yours that "
                         "requires a gradient), so every gradient would be 0: compute it from the tensor itself")
    return _finite(g.detach().numpy().astype(logits.dtype, copy=True), "the metric's gradient at the logits")


def _finite(array, what):
    if not np.isfinite(array).all():
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"gradients: {what} is {array[where]} at {list(where)}; it must be finite")
    return array
