"""TransformerLens's short activation names -> headlab's hook names
(utils.get_act_name's forms), so that cache["pattern", 0] and
get_act_name("resid_post", 1) read as a TransformerLens user writes them."""
from . import _core

# The table of short names, their aliases and TransformerLens's compact form
# ("pattern0", "k6", "scale1ln2") are the engine's (layers/hooks_short_names.h),
# the rule the CLI's --hooks reads too; this module checks Python's arguments
# and says what is wrong in Python's exceptions.


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
    if layer is None and layer_type is None:  # TransformerLens's compact "k6", "pattern0", "scale4ln1"
        compact = _core.split_compact_hook_name(name)
        if compact is not None and _core.is_short_hook_name(compact[0]):
            name, layer, layer_type = compact[0], compact[1], compact[2] or None
    if not _core.is_short_hook_name(name):
        raise KeyError(f"get_act_name: unknown activation name {name!r}; the short names are "
                       f"{', '.join(_core.short_hook_names())} (and a full hook name, model.hook_names())")
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(f"get_act_name: layer_type is 'ln1', 'ln2' or 'ln_final', got {layer_type!r}")
    if layer is not None:
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
    try:
        return _core.act_name(name, layer, layer_type or "")
    except ValueError as e:  # a layer for a point of no block, none for a block's, no LayerNorm named
        raise ValueError(f"get_act_name: {e}") from None


def short_or_full(name):
    """A string short name that needs no more ("embed", "scale": ln_final's,
    TransformerLens's compact "pattern0") as its hook name, as cache[name] and
    names=[name] read it (a block's without its layer, "pattern", is
    get_act_name's ValueError asking for it); any other string as it is, for
    the hook-name check to name the nearest hook points. The CLI's --hooks
    reads a name by the same function (layers::full_hook_name)."""
    return _core.full_hook_name(name)
