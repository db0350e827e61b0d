"""headlab.logit_attribution: each component's direct contribution to the
target logit, from one run_with_cache (docs/python.md, "Direct logit
attribution")."""
import numpy as np

from . import _tokens
from ._model import _as_model
from ._targets import warn_if_not_next_token


def logit_attribution(model, tokens, targets=None, lengths=None, incorrect=None):
    """(attributions [components, B, T] float64, labels): how much each part of
    the residual stream writes the target's logit directly, through the final
    LayerNorm frozen at the run's scale. Components: "embed", "pos_embed";
    per block l, each head "L{l}H{h}" (its hook_result), "{l}_attn_bias" (o's
    bias) and "{l}_mlp_out"; "ln_final.bias" (with LayerNorm) and "head.bias".
    Their sum is the target's logit (the LayerNorm is linear once its scale is
    fixed). targets: as model.gradients takes them (default: the next token);
    `incorrect` (an int or [B, T] ids) makes each entry a logit difference
    target - incorrect. NaN where a position has no target (padding, -1)."""
    model = _as_model(model)
    spec = model.spec
    ids, lengths = model.padded(tokens, lengths)
    if targets is None:
        warn_if_not_next_token(model, "logit_attribution")
    ys = _tokens.padded_targets(targets, ids, lengths, spec, _tokens.ragged(tokens, lengths))
    names = ["hook_embed", "hook_pos_embed"]
    for l in range(spec["layers"]):
        names.append(f"blocks.{l}.attn.hook_result")
        if not spec["attn_only"]:
            names.append(f"blocks.{l}.hook_mlp_out")
    if spec["layernorm"]:
        names.append("ln_final.hook_scale")
    _, cache = model.run_with_cache(ids, names=names, lengths=lengths)

    params = model.params
    heads, head_labels = cache.stack_head_results()
    h = spec["heads"]
    parts, labels = [cache["hook_embed"], cache["hook_pos_embed"]], ["embed", "pos_embed"]
    for l in range(spec["layers"]):
        parts.extend(heads[l * h:(l + 1) * h])
        labels.extend(head_labels[l * h:(l + 1) * h])
        parts.append(np.broadcast_to(params[f"blocks.{l}.attn.o.bias"], ids.shape + (spec["d_model"],)))
        labels.append(f"{l}_attn_bias")
        if not spec["attn_only"]:
            parts.append(cache[f"blocks.{l}.hook_mlp_out"])
            labels.append(f"{l}_mlp_out")
    attrs = [cache.logit_attrs(np.stack(parts), ys, incorrect=incorrect)]

    # The biases after the residual stream: one term each, not one per component.
    w_u, b_u = params["head.weight"].astype(np.float64), params["head.bias"].astype(np.float64)
    picked = np.where(ys < 0, 0, ys)
    other = None if incorrect is None else np.broadcast_to(np.asarray(incorrect), ys.shape)
    if spec["layernorm"]:
        direction = w_u @ params["ln_f.bias"].astype(np.float64)  # [C]
        attrs.append(_at(direction, picked, other)[None])
        labels.append("ln_final.bias")
    attrs.append(_at(b_u, picked, other)[None])
    labels.append("head.bias")
    out = np.concatenate(attrs)
    out[:, (ys < 0) if other is None else (ys < 0) | (other < 0)] = np.nan
    return out, labels


def _at(per_class, picked, other):
    """per_class[picked] (- per_class[other]): [B, T]. `other` was checked by logit_attrs."""
    value = per_class[picked]
    return value if other is None else value - per_class[np.where(other < 0, 0, other)]
