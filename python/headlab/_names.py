"""TransformerLens's short activation names -> headlab's hook names
(utils.get_act_name's forms), so that cache["pattern", 0] and
get_act_name("resid_post", 1) read as a TransformerLens user writes them."""
import re

from . import _core

# Short name -> where it sits: "block" (blocks.{l}.hook_X), "attn"
# (blocks.{l}.attn.hook_X), "mlp" (blocks.{l}.mlp.hook_X), "ln" (a LayerNorm's,
# blocks.{l}.{ln1|ln2}.hook_X or ln_final.hook_X), "top" (hook_X, no layer).
_WHERE = {
    "embed": "top", "pos_embed": "top",
    "resid_pre": "block", "resid_mid": "block", "resid_post": "block", "attn_out": "block", "mlp_out": "block",
    "attn_in": "block", "q_input": "block", "k_input": "block", "v_input": "block", "mlp_in": "block",
    "q": "attn", "k": "attn", "v": "attn", "z": "attn", "result": "attn", "attn_scores": "attn", "pattern": "attn",
    "pre": "mlp", "post": "mlp",
    "scale": "ln", "normalized": "ln",
}
# TransformerLens's aliases of the short names.
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "query": "q", "key": "k", "value": "v",
            "mlp_pre": "pre", "mlp_post": "post"}

SHORT_NAMES = frozenset(_WHERE) | frozenset(_ALIASES)

# TransformerLens's compact form: a short name without underscores, the layer,
# then the LayerNorm ("k6", "pattern0", "scale4ln1", "normalized2ln2").
_COMPACT = re.compile(r"([a-z]+)(\d+)(ln[12])?")

def is_copy_point(name):
    """Whether `name` is one of TransformerLens's copy points (blocks.0.hook_q_input ...),
    which its models compute only when the config asks (use_attn_in,
    use_split_qkv_input, use_hook_mlp_in), so that its cache of every point
    leaves them out: headlab's "every point" (names=None) too. The engine's
    list (layers::is_copy_point)."""
    return _core.is_copy_point(name)


def get_act_name(name, layer=None, layer_type=None, *, layers=None):
    """The hook name of a short activation name: get_act_name("pattern", 0) ->
    "blocks.0.attn.hook_pattern", ("scale", 1, "ln2") ->
    "blocks.1.ln2.hook_scale", ("scale") -> "ln_final.hook_scale", and
    TransformerLens's compact forms "pattern0", "k6", "scale1ln2". A full
    hook name comes back as it is. `layers`, the model's block count, lets
    a negative layer count from the end (-1: the last block)."""
    if not isinstance(name, str):
        raise TypeError(f"get_act_name: the name is a string such as 'pattern' or 'resid_post', got {name!r}")
    if "." in name or name.startswith("hook_"):
        return name
    compact = _COMPACT.fullmatch(name) if layer is None and layer_type is None else None
    if compact is not None and compact[1] not in SHORT_NAMES:
        compact = None  # not a short name followed by its layer: the unknown name below says so
    if compact is not None:  # TransformerLens's "k6", "pattern0", "scale4ln1"
        name, layer, layer_type = compact[1], int(compact[2]), compact[3] or None
    short = _ALIASES.get(name, name)
    where = _WHERE.get(short)
    if where is None:
        raise KeyError(f"get_act_name: unknown activation name {name!r}; the short names are "
                       f"{', '.join(sorted(_WHERE))} (and a full hook name, model.hook_names())")
    if where == "top":
        if layer is not None:
            raise ValueError(f"get_act_name: {name!r} is not a block's (hook_{short}): give no layer")
        return f"hook_{short}"
    if layer is None:
        if where == "ln" and layer_type in (None, "ln_final"):
            return f"ln_final.hook_{short}"
        raise ValueError(f"get_act_name: {name!r} is a block's activation: give its layer, e.g. ({name!r}, 0)")
    if not isinstance(layer, int) or isinstance(layer, bool):
        if type(layer).__module__ != "numpy" or not hasattr(layer, "__index__"):
            raise TypeError(f"get_act_name: the layer is an int, got {layer!r}")
        layer = int(layer)
    if layer < 0:
        if layers is None:
            raise ValueError(f"get_act_name: layer {layer} counts from the end of the model's blocks: give "
                             "layers=model.spec['layers'] (cache[name, layer] knows them)")
        if layer < -layers:
            raise ValueError(f"get_act_name: layer {layer} is not in [-{layers}, {layers}) (the model's blocks)")
        layer += layers
    elif layers is not None and layer >= layers:
        raise ValueError(f"get_act_name: layer {layer} is not in [-{layers}, {layers}) (the model's blocks)")
    if where == "block":
        return f"blocks.{layer}.hook_{short}"
    if where == "attn":
        return f"blocks.{layer}.attn.hook_{short}"
    if where == "mlp":
        return f"blocks.{layer}.mlp.hook_{short}"
    if layer_type not in ("ln1", "ln2"):
        raise ValueError(f"get_act_name: {name!r} of a block needs layer_type 'ln1' or 'ln2' (which LayerNorm), "
                         f"got {layer_type!r}")
    return f"blocks.{layer}.{layer_type}.hook_{short}"


def short_or_full(name):
    """A string short name that needs no more ("embed", "scale": ln_final's,
    TransformerLens's compact "pattern0") as its hook name, as cache[name] and
    names=[name] read it (a block's without its layer, "pattern", is
    get_act_name's ValueError asking for it); any other string as it is, for
    the hook-name check to name the nearest hook points."""
    if "." in name or name.startswith("hook_"):
        return name
    try:
        return get_act_name(name)
    except KeyError:  # no short name
        return name
