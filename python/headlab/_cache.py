"""ActivationCache: what run_with_cache returns, a dict of hook name -> numpy
array with TransformerLens's methods for reading the residual stream as a sum
of components (docs/python.md, "Direct logit attribution")."""
import warnings
import weakref

import numpy as np

from ._full_resid import FullResid
from ._names import get_act_name, is_copy_point, short_or_full


class ActivationCache(FullResid, dict):
    """hook name -> activation (numpy, read-only), as a plain dict, plus
    TransformerLens's stack_head_results, decompose_resid, accumulated_resid,
    apply_ln_to_stack and logit_attrs (and, from FullResid, compute_head_results,
    stack_neuron_results and get_full_resid_decomposition). Stacks are [components, B, T, d]
    (float32, the cache's values) with one label per component; the LayerNorm
    and the logit directions are applied in float64. Without the batch axis
    (run_with_cache(..., remove_batch_dim=True), has_batch_dim False) every
    value and stack lacks it: [components, T, d], as TransformerLens's."""

    has_batch_dim = True  # a cache pickled before the attribute has its batch axis

    def __init__(self, model, activations, made_by="run_with_cache", has_batch_dim=True):
        """ActivationCache(model, {hook name: array}): the methods read the
        model's spec and weights. has_batch_dim=False: the arrays have no
        batch axis (one sequence's)."""
        if not hasattr(model, "hook_names"):
            raise TypeError(f"ActivationCache(model, activations): the first argument is the headlab.Model, got "
                            f"{type(model).__name__}")
        super().__init__(activations)
        self.model = model
        self._made_by = made_by  # the call whose names= a missing entry needs
        self.has_batch_dim = bool(has_batch_dim)

    def remove_batch_dim(self):
        """Drops the batch axis of every value, in place, as TransformerLens's
        does: a cache of one sequence then holds [T, ...] arrays. Returns the
        cache. A batch of more than one is a ValueError naming its size."""
        if not self.has_batch_dim:
            warnings.warn("remove_batch_dim: the cache has no batch axis already", stacklevel=2)
            return self
        for name, value in self.items():
            if value.ndim == 0 or value.shape[0] != 1:
                size = value.shape[0] if value.ndim else "none"
                raise ValueError(f"remove_batch_dim: the cache holds a batch of {size} ({name} has shape "
                                 f"{list(value.shape)}); the batch axis goes only from a batch of one sequence "
                                 f"(cache a single sequence: tokens[i:i + 1])")
        for name, value in self.items():
            dict.__setitem__(self, name, value[0])  # a view: read-only as the value was
        self.has_batch_dim = False
        return self

    # --- reading the cache ---

    def __getitem__(self, key):
        """cache[name], or TransformerLens's short forms: cache["pattern", 0],
        cache["resid_post", -1], cache["scale", 1, "ln2"], cache["embed"],
        cache["scale"] (ln_final's), cache["pattern0"]: get_act_name's names (headlab.get_act_name)."""
        if isinstance(key, tuple):
            if not 1 <= len(key) <= 3:
                raise KeyError(f"cache[{key!r}]: expected (name, layer) or (name, layer, layer_type)")
            key = get_act_name(*key, layers=self.model.spec["layers"])
        elif isinstance(key, str) and not dict.__contains__(self, key):
            key = short_or_full(key)  # "embed", "scale" (ln_final's), "pattern0": the names needing no layer
        try:
            return super().__getitem__(key)
        except KeyError:
            if isinstance(key, str) and key in self.model.hook_names():
                raise self._missing(key) from None
            if isinstance(key, str):
                self.model._check_names([key])  # no hook point at all: a KeyError naming the nearest ones
            raise

    def __contains__(self, key):
        """As cache[key] reads it: ("pattern", 0), "pattern0" and "embed" are in
        the cache when their hook point is."""
        return dict.__contains__(self, self._full_name(key))

    def get(self, key, default=None):
        """cache[key] if `key` is in the cache (short names as cache[key]
        reads them: cache.get(("pattern", 0))), else `default`."""
        return dict.__getitem__(self, self._full_name(key)) if key in self else default

    def _full_name(self, key):
        """The hook name cache[key] reads, or key itself when it names none."""
        try:
            if isinstance(key, tuple):
                return get_act_name(*key, layers=self.model.spec["layers"])
            if isinstance(key, str) and not dict.__contains__(self, key):
                return short_or_full(key)
        except (TypeError, ValueError, KeyError):
            pass
        return key

    def __repr__(self):
        """The names and shapes, not the arrays (a notebook cell ending in
        `cache` shows this)."""
        items = [f"{name} {list(value.shape)}" for name, value in self.items()]
        shown = ", ".join(items[:8]) + (f", ... ({len(items) - 8} more)" if len(items) > 8 else "")
        axis = "" if self.has_batch_dim else " without the batch axis"
        return f"<headlab.ActivationCache of {len(items)} hook points{axis}: {shown}>"

    def _missing(self, name):
        every = ("names=None leaves out TransformerLens's copy points" if is_copy_point(name)
                 else "or names=None, every hook point")
        return KeyError(f"the cache has no {name!r}: {self._made_by}(tokens, names=...) must include it ({every})")

    def _need(self, name):
        """The cached activation at `name`, or a KeyError saying how to cache it."""
        if name not in self:
            raise self._missing(name)
        return self[name]

    def _layers(self, layer, what):
        """TransformerLens's `layer`: how many blocks count; None and -1 are all of them."""
        n = self.model.spec["layers"]
        if layer is None or (isinstance(layer, (int, np.integer)) and not isinstance(layer, bool) and layer == -1):
            return n
        if not isinstance(layer, (int, np.integer)) or isinstance(layer, bool) or not 0 <= layer <= n:
            raise ValueError(f"{what}: layer {layer!r} is not in [0, {n}] (or -1 / None for the whole model)")
        return int(layer)

    @staticmethod
    def _stack(parts, labels, pos_slice):
        """[components, B, T, d] (or [components, T, d] without the batch
        axis) of the arrays in `parts`, positions indexed by pos_slice (numpy
        indexing of the positions' axis: an int drops it)."""
        stack = np.stack([np.broadcast_to(p, parts[0].shape) for p in parts])
        return _positions(stack, pos_slice, axis=-2), labels

    def stack_activation(self, activation_name, layer=-1, sublayer_type=None):
        """[layers, ...]: one block's point ("pattern", "resid_post", "scale"
        with sublayer_type "ln1" ...) stacked over the first `layer` blocks
        (-1 or None: all). TransformerLens's stack_activation."""
        n = self._layers(layer, "stack_activation")
        if n == 0:
            raise ValueError("stack_activation: layer 0 holds no block (the blocks before `layer` count)")
        names = [get_act_name(activation_name, l, sublayer_type) for l in range(n)]
        return np.stack([self._need(name) for name in names])

    def _finished(self, parts, labels, pos_slice, apply_ln, return_labels, layer, mlp_input=False):
        """What the three stacking methods return, as TransformerLens's keywords
        ask: apply_ln=True puts the stack through apply_ln_to_stack(layer,
        mlp_input) (TransformerLens's logit lens: accumulated_resid(apply_ln=True));
        return_labels=False gives the stack alone (their default; headlab's
        is (stack, labels))."""
        stack, labels = self._stack(parts, labels, pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack

    # --- the residual stream as components ---

    def stack_head_results(self, layer=-1, pos_slice=None, *, apply_ln=False, return_labels=True):
        """(stack [heads, B, T, d], labels ["L0H0", "L0H1", ...]): each head's
        blocks.{l}.attn.hook_result of the first `layer` blocks (-1 or None:
        all), without o's bias. TransformerLens's stack_head_results;
        apply_ln and return_labels as theirs (_finished)."""
        _check_switches(apply_ln, return_labels)
        n = self._layers(layer, "stack_head_results")
        if n == 0:
            raise ValueError("stack_head_results: layer 0 holds no head (heads of the blocks before `layer` count)")
        parts, labels = [], []
        for l in range(n):
            result = self._need(f"blocks.{l}.attn.hook_result")
            for h in range(result.shape[-2]):  # [B, T, heads, d], or [T, heads, d]
                parts.append(result[..., h, :])
                labels.append(f"L{l}H{h}")
        return self._finished(parts, labels, pos_slice, apply_ln, return_labels, layer)

    def decompose_resid(self, layer=None, mlp_input=False, pos_slice=None, *, apply_ln=False, return_labels=True):
        """(stack [components, B, T, d], labels): what the residual stream
        entering block `layer` (None or -1: after the last block) sums over,
        "embed", "pos_embed", "{l}_attn_out", "{l}_mlp_out" (no MLP in an
        attn-only model); mlp_input=True adds block `layer`'s attn_out (what
        its MLP reads). TransformerLens's decompose_resid."""
        _check_switches(apply_ln, return_labels)
        n = self._layers(layer, "decompose_resid")
        if mlp_input and (n == self.model.spec["layers"] or self.model.spec["attn_only"]):
            raise ValueError(f"decompose_resid: mlp_input=True needs the layer of an MLP, got layer={layer!r} "
                             f"of a model with {self.model.spec['layers']} layers"
                             + (" and no MLP (attn-only)" if self.model.spec["attn_only"] else ""))
        parts, labels = [self._need("hook_embed"), self._need("hook_pos_embed")], ["embed", "pos_embed"]
        for l in range(n + (1 if mlp_input else 0)):
            parts.append(self._need(f"blocks.{l}.hook_attn_out"))
            labels.append(f"{l}_attn_out")
            if l < n and not self.model.spec["attn_only"]:
                parts.append(self._need(f"blocks.{l}.hook_mlp_out"))
                labels.append(f"{l}_mlp_out")
        return self._finished(parts, labels, pos_slice, apply_ln, return_labels, layer, mlp_input)

    def accumulated_resid(self, layer=None, incl_mid=False, pos_slice=None, *, apply_ln=False, return_labels=True):
        """(stack [components, B, T, d], labels): the residual stream itself at
        each block's entry up to block `layer` ("0_pre", ..., with incl_mid
        "0_mid" too), and after the last block ("final_post") when `layer` is
        None or -1. TransformerLens's accumulated_resid (the logit lens)."""
        _check_switches(apply_ln, return_labels)
        n_layers = self.model.spec["layers"]
        n = self._layers(layer, "accumulated_resid")
        if incl_mid and self.model.spec["attn_only"]:
            raise ValueError("accumulated_resid: an attn-only model has no hook_resid_mid (incl_mid=False)")
        parts, labels = [], []
        for l in range(n + 1):
            if l == n_layers:
                parts.append(self._need(f"blocks.{n_layers - 1}.hook_resid_post"))
                labels.append("final_post")
                continue
            parts.append(self._need(f"blocks.{l}.hook_resid_pre"))
            labels.append(f"{l}_pre")
            if incl_mid and l < n:
                parts.append(self._need(f"blocks.{l}.hook_resid_mid"))
                labels.append(f"{l}_mid")
        return self._finished(parts, labels, pos_slice, apply_ln, return_labels, layer)

    # --- through the LayerNorm to the logits ---

    def apply_ln_to_stack(self, stack, layer=None, mlp_input=False, pos_slice=None):
        """Each component of `stack` [components, B, T, d] through a LayerNorm
        frozen at this cache's scale: (x - mean(x)) / scale * weight, float64,
        without the LayerNorm's bias (one bias for the whole sum, not one per
        component: the components then sum to the LayerNorm's output minus its
        bias). The final LayerNorm (layer None or -1, or the number of layers),
        or block `layer`'s ln1 (ln2 with mlp_input=True). pos_slice: the one
        the stack was made with. A model without LayerNorm gives the stack
        back, in float64."""
        _refuse_normalized(stack, "apply_ln_to_stack", "it would be normalized twice: pass the stack as stacked "
                           "(apply_ln=False)")
        stack = np.asarray(stack, dtype=np.float64)
        if not self.model.spec["layernorm"]:
            return stack
        n_layers = self.model.spec["layers"]
        n = self._layers(layer, "apply_ln_to_stack")
        if n == n_layers:
            ln = "ln_final"
            weight = self.model.params["ln_f.weight"]
        else:
            if mlp_input and self.model.spec["attn_only"]:
                raise ValueError("apply_ln_to_stack: an attn-only model has no ln2 (mlp_input=False)")
            ln = f"blocks.{n}.ln{2 if mlp_input else 1}"
            weight = self.model.params[f"{ln}.weight"]
        scale = _positions(self._need(f"{ln}.hook_scale"), pos_slice, axis=-2).astype(np.float64)  # [B, T, 1]
        if stack.ndim < 2 or stack.shape[-1] != weight.shape[0] or stack.shape[1:-1] != scale.shape[:-1]:
            raise ValueError(f"apply_ln_to_stack: stack of shape {list(stack.shape)} does not fit the cache's "
                             f"[components, {', '.join(map(str, scale.shape[:-1]))}, {weight.shape[0]}] "
                             f"(give the pos_slice the stack was made with)")
        centered = stack - stack.mean(axis=-1, keepdims=True)
        return _mark_normalized(centered / scale * weight.astype(np.float64), ln)

    def logit_attrs(self, stack, classes=None, incorrect=None, pos_slice=None, *, tokens=None,
                    incorrect_tokens=None):
        """[components, B, T] (float64): each component's direct contribution
        to the logit of `classes`, through the final LayerNorm frozen at this
        cache's scale (apply_ln_to_stack) and the unembedding's rows
        head.weight[classes], without any bias. classes: an int or an int array
        broadcast to [B, T] (of the positions pos_slice keeps), -1 = none
        (NaN there); `incorrect` likewise gives the logit difference
        classes - incorrect. TransformerLens's logit_attrs, whose keywords
        tokens= and incorrect_tokens= are classes and incorrect."""
        classes = _one_of(classes, tokens, "classes", "tokens")
        incorrect = _one_of(incorrect, incorrect_tokens, "incorrect", "incorrect_tokens")
        if classes is None:
            raise TypeError("logit_attrs: give the classes whose logit the components write (class ids: an int or "
                            "an array broadcast to the stack's positions)")
        _refuse_normalized(stack, "logit_attrs", "logit_attrs applies the final LayerNorm itself, so its scale would "
                           "count twice: pass the stack made with apply_ln=False, or take the normalized stack's "
                           "logit directly, (stack * model.tokens_to_residual_directions(classes)).sum(-1) "
                           "(docs/python.md, \"Direct logit attribution\")")
        scaled = self.apply_ln_to_stack(stack, pos_slice=pos_slice)
        directions, none = self._directions(classes, scaled.shape[1:-1], "classes")
        if incorrect is not None:
            other, other_none = self._directions(incorrect, scaled.shape[1:-1], "incorrect")
            directions, none = directions - other, none | other_none
        out = np.einsum("c...d,...d->c...", scaled, directions)
        out[:, none] = np.nan
        return out

    def _directions(self, classes, shape, what):
        """(head.weight rows [*shape, d] float64, mask of the -1 entries)."""
        w_u = self.model.params["head.weight"].astype(np.float64)
        ids = _class_ids(classes, shape, w_u.shape[0], what)
        return w_u[np.where(ids < 0, 0, ids)], ids < 0


# The arrays apply_ln_to_stack returned (and so apply_ln=True's stacks), by id,
# each with a weak reference that says whether that id is still the array:
# handing one to logit_attrs or apply_ln_to_stack again would divide by the
# LayerNorm's scale twice, a result off by that factor (x9 on the induction
# model) with nothing to show it. A view of one (stack[:2]) counts as it; an
# array computed from one (stack * 2, np.asarray copies) does not.
_normalized = {}


def _mark_normalized(array, ln):
    for key in [k for k, (ref, _) in list(_normalized.items()) if ref() is None]:
        del _normalized[key]
    _normalized[id(array)] = (weakref.ref(array), ln)
    return array


def _refuse_normalized(stack, what, why):
    array = stack
    while isinstance(array, np.ndarray):
        ref, ln = _normalized.get(id(array), (None, None))
        if ref is not None and ref() is array:
            raise ValueError(f"{what}: this stack has been through {ln} already (apply_ln=True or "
                             f"apply_ln_to_stack); {why}")
        array = array.base


def _one_of(value, alias, name, alias_name):
    """A keyword given under headlab's name or TransformerLens's, not both."""
    if value is not None and alias is not None:
        raise TypeError(f"logit_attrs: give {name}= or {alias_name}= (TransformerLens's name for it), not both")
    return alias if value is None else value


def _check_switches(apply_ln, return_labels):
    for name, value in (("apply_ln", apply_ln), ("return_labels", return_labels)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {value!r}")


def _positions(array, pos_slice, axis):
    """array indexed by pos_slice along `axis` (None: every position)."""
    if pos_slice is None:
        return array
    index = [slice(None)] * array.ndim
    index[axis] = pos_slice
    try:
        return array[tuple(index)]
    except (IndexError, TypeError) as e:
        raise ValueError(f"pos_slice {pos_slice!r} does not index the {array.shape[axis]} positions: {e}") from None


def _class_ids(classes, shape, count, what):
    """classes as an int array of `shape`, each in [-1, count)."""
    ids = np.asarray(classes)
    if ids.dtype.kind not in "iu" or ids.dtype == bool:
        raise ValueError(f"logit_attrs: {what} must be class ids (ints), got dtype {ids.dtype}")
    try:
        ids = np.broadcast_to(ids, shape)
    except ValueError:
        raise ValueError(f"logit_attrs: {what} of shape {list(ids.shape)} does not broadcast to the stack's "
                         f"positions {list(shape)}") from None
    if ids.size and (ids.min() < -1 or ids.max() >= count):
        bad = np.argwhere((ids < -1) | (ids >= count))[0]
        raise ValueError(f"logit_attrs: {what} {int(ids[tuple(bad)])} at {bad.tolist()} is outside [0, {count}) "
                         f"(or -1 for none)")
    return ids
