"""What a TransformerLens user types on the first day, from memory, found by a
QA pass: cache.get and `in` with short names, model.cfg, the cache methods'
return_labels= and apply_ln=."""
import numpy as np
import pytest

from conftest import random_tokens


def test_cache_get_and_in_read_short_names_as_indexing_does(mlp_model):
    _, cache = mlp_model.run_with_cache(random_tokens(mlp_model), names=["hook_embed", ("pattern", 0)])
    pattern = cache["blocks.0.attn.hook_pattern"]
    for key in (("pattern", 0), ("pattern", -2), "pattern0", "blocks.0.attn.hook_pattern"):
        assert key in cache
        assert cache.get(key) is pattern
    for key in ("embed", ("embed",)):
        assert key in cache and cache.get(key) is cache["hook_embed"]
    # Not cached, or no hook point at all: not in the cache, and get's default.
    for key in (("pattern", 1), "pattern1", ("pattern", 7), "pattern", "no.such.point", ("resid_pots", 0), 3):
        assert key not in cache
        assert cache.get(key) is None and cache.get(key, "default") == "default"


def test_cfg_has_transformer_lens_names(mlp_model, attn_model):
    cfg = mlp_model.cfg
    spec = mlp_model.spec
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head) == (
        spec["layers"], spec["heads"], spec["d_model"], spec["d_model"] // spec["heads"])
    assert (cfg.d_vocab, cfg.d_vocab_out, cfg.n_ctx, cfg.d_mlp) == (
        spec["vocab"], spec["classes"], spec["max_seq_len"], spec["d_ff"])
    assert (cfg.act_fn, cfg.normalization_type, cfg.attention_dir, cfg.attn_only) == ("gelu", "LN", "causal", False)
    # The shapes it names are the weights' and the cache's.
    assert mlp_model.W_Q.shape == (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head)
    assert mlp_model.W_U.shape == (cfg.d_model, cfg.d_vocab_out)
    assert attn_model.cfg.d_mlp is None and attn_model.cfg.attn_only and attn_model.cfg.act_fn is None
    with pytest.raises(AttributeError):
        cfg.n_layers = 5  # the model's shape is the checkpoint's: a changed cfg would change nothing
    assert "n_layers=2" in repr(cfg)


def test_cache_methods_take_return_labels_and_apply_ln(mlp_model):
    _, cache = mlp_model.run_with_cache(random_tokens(mlp_model))
    # The logit lens as TransformerLens's tutorials write it.
    stack, labels = cache.accumulated_resid(layer=-1, incl_mid=True, pos_slice=-1, apply_ln=True,
                                            return_labels=True)
    plain, same = cache.accumulated_resid(layer=-1, incl_mid=True, pos_slice=-1)
    assert labels == same
    np.testing.assert_array_equal(stack, cache.apply_ln_to_stack(plain, pos_slice=-1))
    # return_labels=False gives the stack alone, as TransformerLens's default does.
    np.testing.assert_array_equal(cache.decompose_resid(pos_slice=-1, return_labels=False),
                                  cache.decompose_resid(pos_slice=-1)[0])
    heads = cache.stack_head_results(layer=1, apply_ln=True, return_labels=False)
    np.testing.assert_array_equal(heads, cache.apply_ln_to_stack(cache.stack_head_results(layer=1)[0], layer=1))
    mid = cache.decompose_resid(layer=1, mlp_input=True, apply_ln=True)[0]
    np.testing.assert_array_equal(mid, cache.apply_ln_to_stack(cache.decompose_resid(layer=1, mlp_input=True)[0],
                                                               layer=1, mlp_input=True))
    for bad in ("yes", None, 1):
        with pytest.raises(TypeError, match="return_labels must be True or False"):
            cache.accumulated_resid(return_labels=bad)
        with pytest.raises(TypeError, match="apply_ln must be True or False"):
            cache.stack_head_results(apply_ln=bad)


def test_transformer_lens_names_headlab_lacks_say_what_to_use(mlp_model):
    for name, advice in (("hooks", "fwd_hooks="), ("add_hook", "fwd_hooks="), ("reset_hooks", "fwd_hooks="),
                         ("to_tokens", "token ids"), ("to_str_tokens", "token ids"), ("tokenizer", "token ids"),
                         ("state_dict", "model.params"), ("load_state_dict", "with_params"),
                         ("blocks", "model.params")):
        with pytest.raises(AttributeError, match=rf"headlab.Model has no {name}.*{advice}"):
            getattr(mlp_model, name)
        assert not hasattr(mlp_model, name)
    with pytest.raises(AttributeError, match="no_such_thing"):
        mlp_model.no_such_thing


def test_stack_activation_stacks_a_point_over_the_layers(mlp_model):
    _, cache = mlp_model.run_with_cache(random_tokens(mlp_model))
    patterns = cache.stack_activation("pattern")
    assert patterns.shape == (2, *cache["pattern", 0].shape)
    for l in range(2):
        np.testing.assert_array_equal(patterns[l], cache["blocks.%d.attn.hook_pattern" % l])
    np.testing.assert_array_equal(cache.stack_activation("scale", layer=1, sublayer_type="ln2")[0],
                                  cache["blocks.0.ln2.hook_scale"])
    _, some = mlp_model.run_with_cache(random_tokens(mlp_model), names=["pattern0"])
    with pytest.raises(KeyError, match="blocks.1.attn.hook_pattern"):
        some.stack_activation("pattern")
    with pytest.raises(ValueError, match="layer 0 holds no block"):
        cache.stack_activation("pattern", layer=0)


def test_more_transformer_lens_names_say_what_to_use(mlp_model):
    # Found by a QA pass writing TransformerLens's tutorials from memory.
    for name, advice in (("unembed", "W_U"), ("ln_final", "apply_ln_to_stack"), ("embed", "W_E"),
                         ("pos_embed", "W_pos"), ("to", "CPU"), ("cuda", "CPU"), ("eval", "inference"),
                         ("set_use_attn_result", "hook_result"), ("set_use_split_qkv_input", "copy points"),
                         ("hook_dict", "hook_names"), ("generate", "no sampling"), ("loss_fn", "return_type")):
        with pytest.raises(AttributeError, match=rf"headlab.Model has no {name}.*{advice}"):
            getattr(mlp_model, name)
    assert mlp_model.cfg.device == "cpu"
    tokens = random_tokens(mlp_model, batch=1, seq_len=4)
    with pytest.raises(TypeError, match="no backward hooks; model.gradients"):
        mlp_model.run_with_hooks(tokens, bwd_hooks=[("hook_embed", lambda g, hook: None)])
    import headlab.patching as patching
    with pytest.raises(AttributeError, match=r"has no get_act_patch_attn_head_out_by_pos .*head_out\(model, clean, "
                                             r"corrupted, metric, by_position=True\)"):
        patching.get_act_patch_attn_head_out_by_pos
    with pytest.raises(AttributeError, match=r"head_k\(model, clean, corrupted, metric\)"):
        patching.get_act_patch_attn_head_k_all_pos
    with pytest.raises(AttributeError, match="has no attribute 'nothing_like_it'"):
        patching.nothing_like_it
