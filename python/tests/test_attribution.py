"""Direct logit attribution: the ActivationCache's methods (TransformerLens's)
and headlab.logit_attribution, checked against the forward pass itself."""
import numpy as np
import pytest

import headlab
from conftest import every_point, random_tokens


@pytest.fixture(params=["mlp", "attn", "no_ln"])
def model(request, mlp_model, attn_model):
    return {"mlp": mlp_model, "attn": attn_model}.get(request.param) or request.getfixturevalue("no_ln_model")


def some_targets(model, shape, seed=1):
    """Class ids, some positions without a target (-1)."""
    ys = np.random.default_rng(seed).integers(0, model.spec["classes"], size=shape)
    ys[:, 0] = -1
    return ys


def test_the_cache_is_still_a_dict(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=5)
    _, cache = mlp_model.run_with_cache(tokens)
    assert isinstance(cache, headlab.ActivationCache) and isinstance(cache, dict)
    assert list(cache) == every_point(mlp_model)
    plain = dict(cache)
    assert set(plain) == set(cache) and all(plain[n] is cache[n] for n in cache)
    assert cache["blocks.0.attn.hook_result"].shape == (2, 5, 2, 16)
    assert cache["ln_final.hook_scale"].shape == (2, 5, 1)
    _, some = mlp_model.run_with_cache(tokens, names=lambda n: n.endswith("hook_scale"))
    assert sorted(some) == ["blocks.0.ln1.hook_scale", "blocks.0.ln2.hook_scale", "blocks.1.ln1.hook_scale",
                            "blocks.1.ln2.hook_scale", "ln_final.hook_scale"]


def test_kept_results_and_scales_change_no_bit(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=6)
    names = [n for n in mlp_model.hook_names() if n.endswith(("hook_result", "hook_scale"))]
    hooked = mlp_model.run_with_hooks(tokens, fwd_hooks=[(n, lambda a, name: None) for n in names])
    assert np.array_equal(hooked, mlp_model(tokens))


def test_components_sum_to_the_logit(model):
    tokens = random_tokens(model, batch=3, seq_len=6)
    ys = some_targets(model, tokens.shape)
    attrs, labels = headlab.logit_attribution(model, tokens, ys)
    s = model.spec
    per_block = s["heads"] + 1 + (0 if s["attn_only"] else 1)
    assert len(labels) == attrs.shape[0] == 2 + s["layers"] * per_block + (2 if s["layernorm"] else 1)
    assert labels[:4] == ["embed", "pos_embed", "L0H0", "L0H1"] and labels[-1] == "head.bias"
    assert attrs.shape[1:] == tokens.shape and np.isnan(attrs[:, :, 0]).all()
    logits = model(tokens).astype(np.float64)
    rows, cols = np.nonzero(ys >= 0)
    np.testing.assert_allclose(attrs[:, rows, cols].sum(axis=0), logits[rows, cols, ys[rows, cols]], atol=1e-4)
    # A logit difference sums to the difference of the logits.
    diff, _ = headlab.logit_attribution(model, tokens, ys, incorrect=0)
    np.testing.assert_allclose(diff[:, rows, cols].sum(axis=0),
                               logits[rows, cols, ys[rows, cols]] - logits[rows, cols, 0], atol=1e-4)


def test_head_results_sum_to_attn_out_and_the_components_to_the_residual(model):
    tokens = random_tokens(model, batch=2, seq_len=5)
    _, cache = model.run_with_cache(tokens)
    h, n = model.spec["heads"], model.spec["layers"]
    stack, labels = cache.stack_head_results()
    assert labels == [f"L{l}H{i}" for l in range(n) for i in range(h)]
    for l in range(n):
        summed = stack[l * h:(l + 1) * h].sum(axis=0) + model.params[f"blocks.{l}.attn.o.bias"]
        np.testing.assert_allclose(summed, cache[f"blocks.{l}.hook_attn_out"], atol=1e-5)
    assert cache.stack_head_results(layer=1)[1] == labels[:h]
    parts, labels = cache.decompose_resid()
    assert labels[:3] == ["embed", "pos_embed", "0_attn_out"] and labels[-1] == f"{n - 1}_{'attn' if model.spec['attn_only'] else 'mlp'}_out"
    np.testing.assert_allclose(parts.sum(axis=0), cache[f"blocks.{n - 1}.hook_resid_post"], atol=1e-5)
    np.testing.assert_allclose(cache.decompose_resid(layer=1)[0].sum(axis=0), cache["blocks.1.hook_resid_pre"],
                               atol=1e-5)
    resid, labels = cache.accumulated_resid()
    assert labels == [f"{l}_pre" for l in range(n)] + ["final_post"]
    assert np.array_equal(resid[-1], cache[f"blocks.{n - 1}.hook_resid_post"])
    # With pos_slice an int, the position axis goes.
    assert cache.decompose_resid(pos_slice=-1)[0].shape == (len(parts), 2, model.spec["d_model"])


def test_the_frozen_layer_norm_of_the_components_sums_to_its_output(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=5)
    _, cache = mlp_model.run_with_cache(tokens)
    p = mlp_model.params
    parts, _ = cache.decompose_resid()
    np.testing.assert_allclose(cache.apply_ln_to_stack(parts).sum(axis=0) + p["ln_f.bias"],
                               cache["ln_final.hook_normalized"], atol=1e-5)
    parts, labels = cache.decompose_resid(layer=1, mlp_input=True)
    assert labels[-1] == "1_attn_out"
    np.testing.assert_allclose(cache.apply_ln_to_stack(parts, layer=1, mlp_input=True).sum(axis=0) + p["blocks.1.ln2.bias"],
                               cache["blocks.1.ln2.hook_normalized"], atol=1e-5)
    last, _ = cache.accumulated_resid(layer=1, incl_mid=True, pos_slice=-1)  # 0_pre, 0_mid, 1_pre at the last position
    np.testing.assert_allclose(cache.apply_ln_to_stack(last[-1:], layer=1, pos_slice=-1)[0] + p["blocks.1.ln1.bias"],
                               cache["blocks.1.ln1.hook_normalized"][:, -1], atol=1e-5)
    # logit_attrs of the whole residual is the logit without the biases after it.
    logits = mlp_model(tokens).astype(np.float64)
    attr = cache.logit_attrs(cache["blocks.1.hook_resid_post"][None], 3)
    np.testing.assert_allclose(attr[0] + p["ln_f.bias"] @ p["head.weight"][3] + p["head.bias"][3], logits[..., 3],
                               atol=1e-4)


def test_scales_are_the_std_and_their_gradient_flows(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=5)
    _, cache = mlp_model.run_with_cache(tokens)
    x = cache["blocks.1.hook_resid_post"].astype(np.float64)
    np.testing.assert_allclose(cache["ln_final.hook_scale"][..., 0], np.sqrt(x.var(axis=-1) + 1e-5), rtol=1e-5)
    ys = some_targets(mlp_model, tokens.shape)
    g = mlp_model.gradients(tokens, ys, ["ln_final.hook_scale", "ln_final.hook_normalized",
                                         "blocks.1.attn.hook_result", "blocks.1.hook_attn_out"])
    # normalized = centered / scale * w + b, so dL/dscale = -sum dL/dnormalized * (normalized - b) / scale.
    by_hand = -(g["ln_final.hook_normalized"] * (cache["ln_final.hook_normalized"] - mlp_model.params["ln_f.bias"])).sum(
        axis=-1, keepdims=True) / cache["ln_final.hook_scale"]
    assert np.abs(by_hand).max() > 1e-4
    np.testing.assert_allclose(g["ln_final.hook_scale"], by_hand, atol=1e-6)
    # attn_out = sum over the heads of result + o.bias: every head's result has attn_out's gradient.
    for head in range(mlp_model.spec["heads"]):
        np.testing.assert_allclose(g["blocks.1.attn.hook_result"][:, :, head], g["blocks.1.hook_attn_out"], atol=1e-7)


def test_zeroing_a_heads_result_is_zeroing_its_z(attn_model):
    tokens = random_tokens(attn_model, batch=2, seq_len=8)
    d_k = attn_model.spec["d_model"] // attn_model.spec["heads"]

    def zero_result(a, name):
        a[:, :, 1] = 0

    def zero_z(a, name):
        a[:, :, 1] = 0

    for layer in range(2):
        by_result = attn_model.run_with_hooks(tokens, [(f"blocks.{layer}.attn.hook_result", zero_result)])
        by_z = attn_model.run_with_hooks(tokens, [(f"blocks.{layer}.attn.hook_z", zero_z)])
        assert np.abs(by_result - attn_model(tokens)).max() > 1e-3
        np.testing.assert_allclose(by_result, by_z, atol=1e-5)
    assert d_k * attn_model.spec["heads"] == attn_model.spec["d_model"]


def test_a_heads_attribution_is_the_analysis_direct_logit(mlp_model):
    tokens = random_tokens(mlp_model, batch=3, seq_len=6)
    ys = some_targets(mlp_model, tokens.shape)
    attrs, labels = headlab.logit_attribution(mlp_model, tokens, ys)
    records = headlab.analyze(mlp_model, tokens, targets=ys, pruning=False)
    for record in records["heads"]:
        label = f"L{record['layer']}H{record['head']}"
        assert np.nanmean(attrs[labels.index(label)]) == pytest.approx(record["direct_logit"], abs=1e-5)


def test_rows_of_different_lengths(mlp_model):
    rng = np.random.default_rng(5)
    rows = [rng.integers(0, mlp_model.spec["vocab"], size=n) for n in (6, 3)]
    targets = [some_targets(mlp_model, (1, len(r)), seed=i)[0] for i, r in enumerate(rows)]
    attrs, labels = headlab.logit_attribution(mlp_model, rows, targets)
    assert attrs.shape == (len(labels), 2, 6) and np.isnan(attrs[:, 1, 3:]).all()
    for i, (row, ys) in enumerate(zip(rows, targets)):
        alone, _ = headlab.logit_attribution(mlp_model, [row], [ys])
        np.testing.assert_allclose(attrs[:, i, :len(row)], alone[:, 0], atol=1e-5)


def test_a_missing_hook_and_bad_arguments_are_named(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seq_len=4)
    _, cache = mlp_model.run_with_cache(tokens, names=["hook_embed", "hook_pos_embed"])
    with pytest.raises(KeyError, match="blocks.0.attn.hook_result"):
        cache.stack_head_results()
    with pytest.raises(KeyError, match="blocks.0.hook_attn_out"):
        cache.decompose_resid()
    _, cache = mlp_model.run_with_cache(tokens)
    parts, _ = cache.decompose_resid()
    with pytest.raises(KeyError, match="ln_final.hook_scale"):
        cache.__class__(mlp_model, {}).apply_ln_to_stack(parts)
    with pytest.raises(ValueError, match="layer 3"):
        cache.decompose_resid(layer=3)
    with pytest.raises(ValueError, match="pos_slice"):
        cache.apply_ln_to_stack(parts[:, :, :2])
    with pytest.raises(ValueError, match=f"outside \\[0, {mlp_model.spec['classes']}\\)"):
        cache.logit_attrs(parts, mlp_model.spec["classes"])
    with pytest.raises(ValueError, match="ints"):
        cache.logit_attrs(parts, 0.5)
    with pytest.raises(ValueError, match="targets"):
        headlab.logit_attribution(mlp_model, tokens, np.full(tokens.shape, -1))
