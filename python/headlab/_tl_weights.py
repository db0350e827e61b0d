"""TransformerLens's weight names on headlab.Model: model.W_Q [L, h, d, d_k],
model.W_OV, model.W_E @ model.W_U ..., numpy arrays in HookedTransformer's
shapes, computed from the checkpoint's parameters (docs/model.md), and
Model.with_tl_params, the way back to with_params (docs/python.md)."""
import difflib
from collections.abc import Mapping

import numpy as np

from ._factored import FactoredMatrix


# TransformerLens's name -> (headlab's parameter, "{l}" for each layer;
# from headlab's layout to TransformerLens's; back). `h` is the head count.
# q.weight [h d_k, d] holds head i in rows i*d_k..: W_Q[l, i] = rows.T [d, d_k].
# o.weight [d, h d_k] reads head i in columns i*d_k..: W_O[l, i] = columns.T [d_k, d].
def _heads_in(w, h):
    return w.reshape(h, -1, w.shape[1]).transpose(0, 2, 1)


def _heads_in_back(w):
    return w.transpose(0, 2, 1).reshape(-1, w.shape[1])


def _head_bias(b, h):
    return b.reshape(h, -1)


def _flat(b):
    return b.reshape(-1)


def _same(w, h=None):
    return w


def _t(w, h=None):
    return w.T


_SOURCES = {
    "W_E": ("tok_emb.weight", _same, _same),
    "W_pos": ("pos_emb.weight", _same, _same),
    "W_U": ("head.weight", _t, _t),
    "b_U": ("head.bias", _same, _same),
    "W_Q": ("blocks.{l}.attn.q.weight", _heads_in, _heads_in_back),
    "W_K": ("blocks.{l}.attn.k.weight", _heads_in, _heads_in_back),
    "W_V": ("blocks.{l}.attn.v.weight", _heads_in, _heads_in_back),
    "W_O": ("blocks.{l}.attn.o.weight", lambda w, h: w.T.reshape(h, -1, w.shape[0]),
            lambda w: w.reshape(-1, w.shape[-1]).T),
    "b_Q": ("blocks.{l}.attn.q.bias", _head_bias, _flat),
    "b_K": ("blocks.{l}.attn.k.bias", _head_bias, _flat),
    "b_V": ("blocks.{l}.attn.v.bias", _head_bias, _flat),
    "b_O": ("blocks.{l}.attn.o.bias", _same, _same),
    "W_in": ("blocks.{l}.mlp.fc1.weight", _t, _t),
    "b_in": ("blocks.{l}.mlp.fc1.bias", _same, _same),
    "W_out": ("blocks.{l}.mlp.fc2.weight", _t, _t),
    "b_out": ("blocks.{l}.mlp.fc2.bias", _same, _same),
}
_MLP = ("W_in", "b_in", "W_out", "b_out")
# Computed from the names above: read, never given back.
_DERIVED = {"W_E_pos": "W_E and W_pos", "W_QK": "W_Q and W_K", "QK": "W_Q and W_K", "W_OV": "W_V and W_O",
            "OV": "W_V and W_O"}


def _weight(name, doc):
    """The read-only property `name` of TLWeights."""
    return property(lambda self: self._tl(name), doc=doc)


class TLWeights:
    """TransformerLens's weight properties for headlab.Model. Each is a
    read-only numpy array of the parameters' dtype in its own memory (no
    view of model.params), computed once per model: a model's weights never
    change. An edit goes through with_tl_params (or with_params)."""

    def _tl(self, name):
        """The property `name`, computed at its first read."""
        cache = self.__dict__.setdefault("_tl_cache", {})
        if name not in cache:
            array = np.array(self._tl_compute(name), order="C")  # always a copy, never a view of params
            array.setflags(write=False)
            cache[name] = array
        return cache[name]

    def _tl_compute(self, name):
        if name == "W_E_pos":
            return np.concatenate([self.W_E, self.W_pos])
        if name == "W_QK":
            return self.W_Q @ self.W_K.swapaxes(-1, -2)
        if name == "W_OV":
            return self.W_V @ self.W_O
        if name in _MLP and self.spec["attn_only"]:
            raise AttributeError(f"{name}: this model is attn-only, it has no MLP (so no W_in, b_in, W_out, b_out; "
                                 "model.spec['attn_only'] is True)")
        source, forward, _ = _SOURCES[name]
        h = self.spec["heads"]
        if "{l}" not in source:
            return forward(self.params[source], h)
        return np.stack([forward(self.params[source.format(l=l)], h) for l in range(self.spec["layers"])])

    W_E = _weight("W_E", "[d_vocab, d]: the token embedding, tok_emb.weight (hook_embed = W_E[tokens]).")
    W_pos = _weight("W_pos", "[n_ctx, d]: the position embedding, pos_emb.weight.")
    W_E_pos = _weight("W_E_pos", "[d_vocab + n_ctx, d]: W_E above W_pos, TransformerLens's basis of the input space.")
    W_U = _weight("W_U", "[d, C]: head.weight transposed (logits = ln_final's output @ W_U + b_U).")
    b_U = _weight("b_U", "[C]: head.bias.")
    W_Q = _weight("W_Q", "[L, h, d, d_k]: hook_q[..., i, :] of layer l = x @ W_Q[l, i] + b_Q[l, i], x what the layer "
                         "reads (ln1.hook_normalized; hook_resid_pre without LayerNorm). Rows i*d_k.. of q.weight, "
                         "transposed.")
    W_K = _weight("W_K", "[L, h, d, d_k]: as W_Q, for hook_k (k.weight).")
    W_V = _weight("W_V", "[L, h, d, d_k]: as W_Q, for hook_v (v.weight).")
    W_O = _weight("W_O", "[L, h, d_k, d]: hook_result[..., i, :] of layer l = hook_z[..., i, :] @ W_O[l, i]. Columns "
                         "i*d_k.. of o.weight, transposed.")
    b_Q = _weight("b_Q", "[L, h, d_k]: q.bias, head by head.")
    b_K = _weight("b_K", "[L, h, d_k]: k.bias, head by head.")
    b_V = _weight("b_V", "[L, h, d_k]: v.bias, head by head.")
    b_O = _weight("b_O", "[L, d]: o.bias (hook_attn_out = hook_result summed over the heads + b_O).")
    W_in = _weight("W_in", "[L, d, d_ff]: mlp.hook_pre = ln2.hook_normalized @ W_in[l] + b_in[l] (fc1.weight "
                           "transposed). An AttributeError for an attn-only model, as the other MLP names.")
    b_in = _weight("b_in", "[L, d_ff]: fc1.bias.")
    W_out = _weight("W_out", "[L, d_ff, d]: hook_mlp_out = mlp.hook_post @ W_out[l] + b_out[l] (fc2.weight "
                             "transposed).")
    b_out = _weight("b_out", "[L, d]: fc2.bias.")
    W_QK = _weight("W_QK", "[L, h, d, d]: W_Q @ W_K^T per head (the biases and 1/sqrt(d_k) left out), dense; "
                           "model.QK is the same product as a FactoredMatrix.")
    W_OV = _weight("W_OV", "[L, h, d, d]: W_V @ W_O per head (the biases left out), dense; model.OV is the same "
                           "product as a FactoredMatrix.")

    @property
    def QK(self):
        """FactoredMatrix(W_Q, W_K^T) [L, h, d, d], TransformerLens's: np.asarray(model.QK) is W_QK."""
        return FactoredMatrix(self.W_Q, self.W_K.swapaxes(-1, -2))

    @property
    def OV(self):
        """FactoredMatrix(W_V, W_O) [L, h, d, d], TransformerLens's: (model.W_E @ model.OV[l, h] @ model.W_U).AB
        is what head h of layer l adds to the logits per attended token, without LayerNorm and biases."""
        return FactoredMatrix(self.W_V, self.W_O)

    def with_tl_params(self, params):
        """A new Model with the parameters given under TransformerLens's names
        replaced, as with_params: {"W_O": w} with w of model.W_O's shape
        [L, h, d_k, d] replaces every layer's attn.o.weight (a layer whose
        values are unchanged is not recorded as replaced). Names: W_E, W_pos,
        W_U, b_U, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, W_in, b_in, W_out,
        b_out; headlab's own names (model.params) are taken too, as they are
        (LayerNorm weights: blocks.{l}.ln1.weight ...). A numpy array or a
        torch tensor, float, finite, of the property's shape; else an error
        naming the key."""
        from ._model import _as_array  # here: _model imports this module

        if not isinstance(params, Mapping):
            raise TypeError(f"with_tl_params takes a dict name -> array ({{'W_O': w}}), got {type(params).__name__}")
        out, given_as = {}, {}

        def put(name, value, key):
            if name in out:
                raise ValueError(f"with_tl_params: {name!r} is given twice, by {given_as[name]!r} and by {key!r}")
            out[name], given_as[name] = value, key

        for key, value in params.items():
            if key in self.params:
                put(key, value, key)
                continue
            source = self._tl_source(key)
            array = _as_array(key, value)
            if np.ma.isMaskedArray(array):
                raise TypeError(f"with_tl_params: {key!r} is a numpy masked array, whose mask a parameter cannot "
                                "keep: pass .filled(x) or .data")
            if array.dtype.kind != "f":
                raise TypeError(f"with_tl_params: {key!r} has dtype {array.dtype}; a parameter takes float16, "
                                "float32 or float64 values (convert with .astype(np.float32))")
            like = getattr(self, key)
            if array.shape != like.shape:
                raise ValueError(f"with_tl_params: {key!r} has shape {list(array.shape)}, the model's is "
                                 f"{list(like.shape)} (model.{key}.shape)")
            bad = np.argwhere(~np.isfinite(array))
            if len(bad):
                at = tuple(int(i) for i in bad[0])
                raise ValueError(f"with_tl_params: {key!r} holds {array[at]} at {list(at)}; parameters are finite")
            _, _, back = _SOURCES[key]
            if "{l}" not in source:
                put(source, back(array), key)
            else:
                for l in range(self.spec["layers"]):
                    put(source.format(l=l), back(array[l]), key)
        return self.with_params(out)

    def _tl_source(self, key):
        """The headlab parameter template of TransformerLens's name `key`, or the KeyError that says why not."""
        if key in _SOURCES and not (key in _MLP and self.spec["attn_only"]):
            return _SOURCES[key][0]
        if key in _MLP:
            raise KeyError(f"with_tl_params: {key!r}: this model is attn-only, it has no MLP")
        if key in _DERIVED:
            raise KeyError(f"with_tl_params: {key!r} is computed from {_DERIVED[key]}: give those instead (a "
                           "computed array: W_OV's factors are not determined by their product)")
        names = [n for n in _SOURCES if not (n in _MLP and self.spec["attn_only"])]
        lower = {n.lower(): n for n in names}  # W_q -> W_Q first
        near = [lower[n] for n in difflib.get_close_matches(str(key).lower(), lower, n=3, cutoff=0.5)]
        raise KeyError(f"with_tl_params: no parameter {key!r}"
                       f"{' (nearest: ' + ', '.join(near) + ')' if near else ''}; TransformerLens's names are "
                       f"{', '.join(names)}, and headlab's own (model.params) are taken too")
