"""TransformerLens's finer decompositions of the residual stream, found
missing by a QA pass: compute_head_results, stack_neuron_results and
get_full_resid_decomposition, checked against the cached residual stream and
a numpy recomputation from the weights."""
import numpy as np
import pytest

from conftest import random_tokens


def test_compute_head_results_fills_hook_result_from_hook_z(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=5)
    _, full = mlp_model.run_with_cache(tokens)
    _, only_z = mlp_model.run_with_cache(tokens, names=lambda n: n.endswith("hook_z"))
    assert "blocks.0.attn.hook_result" not in only_z
    assert only_z.compute_head_results() is None
    for l in range(2):
        name = f"blocks.{l}.attn.hook_result"
        np.testing.assert_allclose(only_z[name], full[name], atol=1e-5)
        assert only_z[name].dtype == np.float32 and not only_z[name].flags.writeable
    kept = dict(full)
    full.compute_head_results()  # the engine's own results stay as they are
    assert all(full[n] is kept[n] for n in kept)
    _, none = mlp_model.run_with_cache(tokens, names=["hook_embed"])
    with pytest.raises(KeyError, match="blocks.0.attn.hook_z"):
        none.compute_head_results()
    grads = mlp_model.gradients(tokens, tokens % mlp_model.cfg.d_vocab_out, names=lambda n: n.endswith("hook_z"))
    with pytest.raises(ValueError, match="this cache holds gradients"):
        grads.compute_head_results()
    _, one = mlp_model.run_with_cache(tokens[:1], names=lambda n: n.endswith("hook_z"), remove_batch_dim=True)
    one.compute_head_results()
    np.testing.assert_allclose(one["result", 1], full["result", 1][0], atol=1e-5)


def test_neuron_results_are_each_neurons_output_and_sum_to_mlp_out(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=5)
    _, cache = mlp_model.run_with_cache(tokens)
    stack, labels = cache.stack_neuron_results()
    d_ff = mlp_model.cfg.d_mlp
    assert stack.shape == (2 * d_ff, 2, 5, 16) and labels[:2] == ["L0N0", "L0N1"] and labels[d_ff] == "L1N0"
    w_out = mlp_model.params["blocks.1.mlp.fc2.weight"].astype(np.float64)  # [d, d_ff]
    post = cache["post", 1].astype(np.float64)
    np.testing.assert_allclose(stack[d_ff + 3], post[..., 3, None] * w_out[:, 3], atol=1e-6)
    for l in range(2):
        summed = stack[l * d_ff:(l + 1) * d_ff].astype(np.float64).sum(0) + mlp_model.b_out[l]
        np.testing.assert_allclose(summed, cache["mlp_out", l], atol=1e-5)
    some, some_labels = cache.stack_neuron_results(1, pos_slice=-1, neuron_slice=[2, 5])
    assert some.shape == (2, 2, 16) and some_labels == ["L0N2", "L0N5"]
    np.testing.assert_array_equal(some, stack[[2, 5]][:, :, -1])
    assert np.array_equal(cache.stack_neuron_results(1, neuron_slice=4, return_labels=False), stack[[4]])
    with pytest.raises(ValueError, match="neuron_slice 999 does not index the"):
        cache.stack_neuron_results(neuron_slice=999)


def test_full_resid_decomposition_sums_to_the_residual_stream(mlp_model, attn_model):
    for model in (mlp_model, attn_model):
        tokens = random_tokens(model, batch=2, seq_len=6)
        _, cache = model.run_with_cache(tokens)
        L, H = model.cfg.n_layers, model.cfg.n_heads
        for layer, mlp_input, target in ((None, False, cache["resid_post", -1]), (1, False, cache["resid_pre", 1]),
                                         (0, False, cache["resid_pre", 0])) + (
                                        ((1, True, cache["resid_mid", 1]),) if not model.cfg.attn_only else ()):
            for expand in (True, False):
                stack, labels = cache.get_full_resid_decomposition(layer, mlp_input, expand)
                assert len(labels) == len(stack) and labels[-3:] == ["embed", "pos_embed", "bias"]
                np.testing.assert_allclose(stack.astype(np.float64).sum(0), target, atol=1e-4)
        stack, labels = cache.get_full_resid_decomposition(expand_neurons=False)
        mlps = [] if model.cfg.attn_only else [f"{l}_mlp_out" for l in range(L)]
        assert labels == [f"L{l}H{h}" for l in range(L) for h in range(H)] + mlps + ["embed", "pos_embed", "bias"]
        lens = cache.get_full_resid_decomposition(pos_slice=-1, apply_ln=True, return_labels=False)
        np.testing.assert_array_equal(
            lens, cache.apply_ln_to_stack(cache.get_full_resid_decomposition(pos_slice=-1)[0], pos_slice=-1))
    with pytest.raises(ValueError, match="attn-only model has no MLP neurons"):
        cache.stack_neuron_results()


def test_logit_attrs_take_transformer_lens_keywords(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=5)
    _, cache = mlp_model.run_with_cache(tokens)
    stack, _ = cache.decompose_resid(pos_slice=-1)
    np.testing.assert_array_equal(cache.logit_attrs(stack, tokens=3, incorrect_tokens=1, pos_slice=-1),
                                  cache.logit_attrs(stack, 3, 1, pos_slice=-1))
    with pytest.raises(TypeError, match="give classes= or tokens="):
        cache.logit_attrs(stack, 3, tokens=3, pos_slice=-1)
    with pytest.raises(TypeError, match="give the classes"):
        cache.logit_attrs(stack, pos_slice=-1)
