"""The ActivationCache methods that split the residual stream finer than
decompose_resid: into heads, neurons and one bias term, as TransformerLens's
compute_head_results, stack_neuron_results and get_full_resid_decomposition
(docs/python.md, "Direct logit attribution"). A mixin of ActivationCache,
which gives _need, _layers and _finished."""
import numpy as np


class FullResid:
    def compute_head_results(self):
        """Adds each block's `attn.hook_result` (head i's output through its
        columns of W_O, [B, T, h, d]) computed from the cached `attn.hook_z`,
        where the cache lacks it, as TransformerLens's does before
        stack_head_results. A cache of every point holds them already (the
        engine computes them), and this changes nothing there. Returns None."""
        if self._made_by == "gradients":  # hook_z's gradient through W_O is no gradient at hook_result
            raise ValueError("compute_head_results: this cache holds gradients, and the gradient at hook_result is "
                             "not hook_z's through W_O; name the hook_result points in model.gradients(..., names=)")
        w_o = None
        for l in range(self.model.spec["layers"]):
            name = f"blocks.{l}.attn.hook_result"
            if dict.__contains__(self, name):
                continue
            z = self._need(f"blocks.{l}.attn.hook_z")  # a KeyError naming the point to cache
            w_o = self.model.W_O if w_o is None else w_o  # [L, h, d_k, d]
            result = np.einsum("...hk,hkd->...hd", z.astype(np.float64), w_o[l].astype(np.float64))
            result = result.astype(z.dtype)
            result.setflags(write=False)  # read-only, as the engine's cached arrays
            dict.__setitem__(self, name, result)

    def stack_neuron_results(self, layer=-1, pos_slice=None, neuron_slice=None, *, apply_ln=False,
                             return_labels=True):
        """(stack [neurons, B, T, d], labels ["L0N0", "L0N1", ...]): each MLP
        neuron's output, `mlp.hook_post[..., n] * W_out[l, n]` (without the
        MLP's bias), of the first `layer` blocks (-1 or None: all);
        neuron_slice indexes each block's neurons (an int, a slice, a list).
        TransformerLens's stack_neuron_results; apply_ln and return_labels as
        the other stacks'. The stack is [neurons, B, T, d] float32: mind its
        size (d_ff * layers of hook_resid_post's)."""
        _switches(apply_ln, return_labels)
        parts, labels = self._neurons(layer, neuron_slice, "stack_neuron_results")
        return self._finished(parts, labels, pos_slice, apply_ln, return_labels, layer)

    def _neurons(self, layer, neuron_slice, what):
        """([each neuron's output [B, T, d]], labels) of the first `layer` blocks."""
        if self.model.spec["attn_only"]:
            raise ValueError(f"{what}: an attn-only model has no MLP neurons")
        n = self._layers(layer, what)
        if n == 0:
            raise ValueError(f"{what}: layer 0 holds no neuron (the neurons of the blocks before `layer` count)")
        w_out = self.model.W_out  # [L, d_ff, d]
        chosen = np.arange(w_out.shape[1])
        if neuron_slice is not None:
            try:
                chosen = np.atleast_1d(chosen[neuron_slice])
            except (IndexError, TypeError) as e:
                raise ValueError(f"{what}: neuron_slice {neuron_slice!r} does not index the {w_out.shape[1]} "
                                 f"neurons: {e}") from None
        parts, labels = [], []
        for l in range(n):
            post = self._need(f"blocks.{l}.mlp.hook_post")  # [B, T, d_ff]
            for i in chosen:
                parts.append(post[..., i, None] * w_out[l, i])
                labels.append(f"L{l}N{i}")
        return parts, labels

    def get_full_resid_decomposition(self, layer=None, mlp_input=False, expand_neurons=True, *, apply_ln=False,
                                     pos_slice=None, return_labels=True):
        """(stack [components, B, T, d], labels): the residual stream entering
        block `layer` (None or -1: after the last block; mlp_input=True: what
        block `layer`'s MLP reads) as each head ("L0H0", ...), each MLP neuron
        ("L0N0", ...; with expand_neurons=False each MLP's output,
        "0_mlp_out"), "embed", "pos_embed" and "bias" (every o.bias, and with
        expanded neurons every MLP bias, of the blocks counted). They sum to
        that residual stream. TransformerLens's get_full_resid_decomposition."""
        _switches(apply_ln, return_labels)
        spec = self.model.spec
        n = self._layers(layer, "get_full_resid_decomposition")
        if mlp_input and (n == spec["layers"] or spec["attn_only"]):
            raise ValueError(f"get_full_resid_decomposition: mlp_input=True needs the layer of an MLP, got "
                             f"layer={layer!r} of a model with {spec['layers']} layers"
                             + (" and no MLP (attn-only)" if spec["attn_only"] else ""))
        heads = n + (1 if mlp_input else 0)
        parts, labels = [], []
        if heads:
            stack, labels = self.stack_head_results(heads)
            parts = list(stack)
        expand = expand_neurons and not spec["attn_only"]
        if n and not spec["attn_only"]:
            if expand:
                more, more_labels = self._neurons(n, None, "get_full_resid_decomposition")
            else:
                more = [self._need(f"blocks.{l}.hook_mlp_out") for l in range(n)]
                more_labels = [f"{l}_mlp_out" for l in range(n)]
            parts += more
            labels += more_labels
        embed = self._need("hook_embed")
        parts += [embed, self._need("hook_pos_embed")]
        labels += ["embed", "pos_embed"]
        bias = self.model.b_O[:heads].sum(axis=0, dtype=np.float64)
        if expand and n:
            bias = bias + self.model.b_out[:n].sum(axis=0, dtype=np.float64)
        parts.append(np.broadcast_to(bias.astype(embed.dtype), embed.shape))
        labels.append("bias")
        return self._finished(parts, labels, pos_slice, apply_ln, return_labels, layer, mlp_input)


def _switches(apply_ln, return_labels):
    """apply_ln and return_labels checked before a stack is built, as the
    cache's other stacking methods check them."""
    from ._cache import _check_switches  # here: _cache imports this module

    _check_switches(apply_ln, return_labels)
