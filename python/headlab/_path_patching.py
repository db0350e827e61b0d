"""headlab.patching.path: path patching. How much of the metric one head's
output restores through one path only: to the logits directly, or into the
queries, keys or values of chosen later heads (K-composition is the path into
their keys).

For each sender head, two forward passes of the corrupted sequences:
1. the sender's `hook_z` takes the clean run's value (at every real
   position), every other head's `hook_z` and every MLP's output keep the
   corrupted run's, so that only the sender's own output changes the
   residual stream; the receivers' inputs (their `hook_q`/`hook_k`/`hook_v`,
   or the final residual stream) are recorded;
2. the corrupted run again with only those receiver inputs replaced by the
   recorded ones, and the metric read from its logits.
The clean activation goes into the corrupted run, as in the other grids
(docs/python.md, "Path patching")."""
import numpy as np

from . import _tokens
from ._analyze import _corrupted
from ._model import _as_model
from ._patch_metric import _NonFinite, _PaddingProbe, _cell, _noted, _number
from ._patching import _Progress, _check_options, _restored


def path(model, clean, corrupted, receivers="logits", metric=None, *, receiver_input="qkv", targets=None,
         lengths=None, progress=True):
    """[layers, heads]: the metric when the sender head's clean output reaches
    the corrupted run through one path only. receivers: "logits" (the direct
    path, into the last block's `hook_resid_post`) or a list of (layer, head)
    whose inputs named by receiver_input ("q", "k", "v" or any combination,
    "qkv" by default) take the path. A sender has a cell when some receiver
    is in a later layer (every head, for "logits"); NaN otherwise.
    clean, corrupted, metric, targets, lengths and progress as in `grid`."""
    model = _as_model(model)
    _check_options(metric, targets, progress)
    metric = _noted(metric)
    L, H = model.spec["layers"], model.spec["heads"]
    points = _receiver_points(receivers, receiver_input, L, H)
    last = L if receivers == "logits" else max(layer for layer, _, _ in points)

    ragged = _tokens.ragged(clean, lengths)
    ids, lengths = _tokens.padded(clean, model.spec, lengths, "clean")
    bad = _corrupted(corrupted, ids, lengths, model.spec)
    z = [f"blocks.{layer}.attn.hook_z" for layer in range(L)]
    mlp = [f"blocks.{layer}.hook_mlp_out" for layer in range(L) if f"blocks.{layer}.hook_mlp_out" in
           model.hook_names()]
    clean_logits, clean_cache = model.run_with_cache(ids, names=z, lengths=lengths)
    _, bad_cache = model.run_with_cache(bad, names=z + mlp, lengths=lengths)
    unfinite = _NonFinite("path", metric)
    probe = _PaddingProbe("path", metric, lengths, ids.shape)
    if metric is None:
        metric = _restored(model, ids, bad, lengths, targets, clean_logits, ragged)
    real = np.ones(ids.shape, dtype=bool) if lengths is None else np.arange(ids.shape[1]) < lengths[:, None]

    out = np.full((L, H), np.nan)
    senders = [(layer, head) for layer in range(min(last, L)) for head in range(H)]
    shown = _Progress("path", len(senders) if progress else 0)
    try:
        for layer, head in senders:
            hooks = [(z[layer], _sender(clean_cache[z[layer]], bad_cache[z[layer]], head, real))]
            hooks += [(name, _frozen(bad_cache[name])) for name in z[layer + 1:]]
            hooks += [(name, _frozen(bad_cache[name])) for name in mlp if _layer_of(name) >= layer]
            seen = {}
            hooks += [(name, _recorder(seen, name)) for name in sorted({name for _, _, name in points})]
            model.run_with_hooks(bad, hooks, lengths=lengths)
            patch = [(name, _receiver(seen[name], head_r, real)) for _, head_r, name in points]
            logits = model.run_with_hooks(bad, patch, lengths=lengths)
            cell = _cell(z[layer], None, head)
            out[layer, head] = unfinite.seen(probe.check(_number(metric(logits), "path", cell), logits, cell), cell)
            shown.step()
    finally:
        shown.done()
    unfinite.warn(len(senders))
    return out


def _receiver_points(receivers, receiver_input, L, H):
    """(layer, head or None, hook name) of every receiver input."""
    if not isinstance(receiver_input, str) or not receiver_input or set(receiver_input) - set("qkv"):
        raise ValueError(f"patching.path: receiver_input must be made of \"q\", \"k\" and \"v\" (\"k\": the "
                         f"receivers' keys, K-composition), got {receiver_input!r}")
    if isinstance(receivers, str):
        if receivers != "logits":
            raise ValueError(f"patching.path: receivers must be \"logits\" or a list of (layer, head), "
                             f"got {receivers!r}")
        if receiver_input != "qkv":
            raise ValueError(f"patching.path: receiver_input={receiver_input!r} chooses the inputs of receiving "
                             "heads; receivers=\"logits\" is the direct path, which has none")
        return [(L, None, f"blocks.{L - 1}.hook_resid_post")]
    try:
        pairs = [tuple(r) for r in receivers]
    except TypeError:
        pairs = None
    if not pairs or any(len(p) != 2 for p in pairs):
        raise ValueError(f"patching.path: receivers must be \"logits\" or a non-empty list of (layer, head), "
                         f"got {receivers!r:.200}")
    points = []
    for layer, head in pairs:
        for value, size, what in ((layer, L, "layer"), (head, H, "head")):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
                raise ValueError(f"patching.path: receiver ({layer!r}, {head!r}): {what} {value!r} is not in "
                                 f"[0, {size})")
        points += [(int(layer), int(head), f"blocks.{layer}.attn.hook_{c}") for c in sorted(set(receiver_input))]
    if max(layer for layer, _, _ in points) == 0:
        raise ValueError("patching.path: every receiver is in layer 0, so no head writes into its inputs; "
                         "choose receivers in a later layer, or receivers=\"logits\"")
    return points


def _layer_of(name):
    return int(name.split(".")[1])


def _sender(clean, bad, head, real):
    """hook_z of the sender's layer: the sender clean at the real positions,
    the other heads as the corrupted run had them."""
    def hook(activation, name):
        activation[...] = bad
        activation[:, :, head][real] = clean[:, :, head][real]
        return activation
    return hook


def _frozen(value):
    """The corrupted run's activation, whatever the sender changed upstream."""
    def hook(activation, name):
        activation[...] = value
        return activation
    return hook


def _recorder(seen, name):
    def hook(activation, _):
        seen[name] = activation.copy()
    return hook


def _receiver(recorded, head, real):
    """A receiver input as recorded in pass 1: one head's queries, keys or
    values, or (head None) the whole residual stream, at the real positions."""
    def hook(activation, name):
        if head is None:
            activation[real] = recorded[real]
        else:
            activation[:, :, head][real] = recorded[:, :, head][real]
        return activation
    return hook
