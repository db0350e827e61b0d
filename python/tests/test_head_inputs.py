"""TransformerLens's copy points: hook_attn_in and hook_q_input, hook_k_input,
hook_v_input (each head's own input), hook_mlp_in (what the MLP reads)."""
import numpy as np
import pytest

import headlab
from conftest import COPY_POINTS, cross_entropy, random_tokens


def f64(a):
    return np.asarray(a, dtype=np.float64)


def layer_norm(model, x, name):
    """model's LayerNorm `name` (blocks.1.ln1 ...) of x [..., d] in float64."""
    x = f64(x)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * f64(model.params[f"{name}.weight"]) + f64(model.params[f"{name}.bias"])


def test_the_copy_points_have_their_short_names_and_come_when_named(mlp_model):
    names = mlp_model.hook_names()
    at = names.index("blocks.1.hook_resid_pre")
    assert names[at:at + 6] == ["blocks.1.hook_resid_pre", "blocks.1.hook_attn_in", "blocks.1.hook_q_input",
                                "blocks.1.hook_k_input", "blocks.1.hook_v_input", "blocks.1.ln1.hook_scale"]
    assert names[names.index("blocks.1.hook_resid_mid") + 1] == "blocks.1.hook_mlp_in"
    for short in ("attn_in", "q_input", "k_input", "v_input", "mlp_in"):
        assert headlab.get_act_name(short, 1) == f"blocks.1.hook_{short}"
    tokens = random_tokens(mlp_model, batch=2)
    B, T = tokens.shape
    h, d = mlp_model.spec["heads"], mlp_model.spec["d_model"]
    # Every point by default but the copies, as TransformerLens's cache of a model without its flags.
    _, every = mlp_model.run_with_cache(tokens)
    assert set(every) == {n for n in names if not n.endswith(COPY_POINTS)}
    with pytest.raises(KeyError, match="names=None leaves out TransformerLens's copy points"):
        every["k_input", 0]
    _, cache = mlp_model.run_with_cache(tokens, names=[("attn_in", 0), ("k_input", 0), ("mlp_in", 1),
                                                       "blocks.0.hook_resid_pre", "blocks.1.hook_resid_mid"])
    assert cache["k_input", 0].shape == (B, T, h, d)
    for head in range(h):
        np.testing.assert_array_equal(cache["attn_in", 0][:, :, head], cache["resid_pre", 0])
        np.testing.assert_array_equal(cache["k_input", 0][:, :, head], cache["resid_pre", 0])
    np.testing.assert_array_equal(cache["mlp_in", 1], cache["resid_mid", 1])


def test_patching_one_heads_k_input_from_the_clean_run(mlp_model):
    """Head 0's keys of block 1 read the clean run's residual stream; the
    other head's keys, every query, and the other head's pattern stay the
    corrupted run's; head 0's keys and pattern are numpy's from the weights
    (ln1 of the clean resid_pre through W_K, then the corrupted queries')."""
    layer, head = 1, 0
    d_k = mlp_model.spec["d_model"] // mlp_model.spec["heads"]
    clean = random_tokens(mlp_model, batch=3, seed=1)
    corrupted = random_tokens(mlp_model, batch=3, seed=2)
    k_input, resid_pre = f"blocks.{layer}.hook_k_input", f"blocks.{layer}.hook_resid_pre"
    read = [f"blocks.{layer}.attn.hook_{p}" for p in ("q", "k", "pattern")]
    _, clean_cache = mlp_model.run_with_cache(clean, names=[k_input, resid_pre])
    bad_logits, bad = mlp_model.run_with_cache(corrupted, names=read)

    def patch(x, hook):
        x[:, :, head] = clean_cache[hook.name][:, :, head]

    logits, patched = mlp_model.run_with_cache(corrupted, names=read, fwd_hooks=[(k_input, patch)])
    q, k, pattern = (patched[n] for n in read)
    # Q reads the residual stream as without the hook; K's heads run as one
    # batched GEMM, the other head's to float rounding of the fused product.
    np.testing.assert_array_equal(q, bad[read[0]])
    np.testing.assert_allclose(np.delete(k, head, axis=2), np.delete(bad[read[1]], head, axis=2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.delete(pattern, head, axis=1), np.delete(bad[read[2]], head, axis=1), atol=1e-6)
    want_k = (layer_norm(mlp_model, clean_cache[resid_pre], f"blocks.{layer}.ln1") @ f64(mlp_model.W_K[layer, head])
              + f64(mlp_model.b_K[layer, head]))
    np.testing.assert_allclose(k[:, :, head], want_k, rtol=1e-5, atol=1e-5)
    assert np.abs(k[:, :, head] - bad[read[1]][:, :, head]).max() > 1e-2
    scores = np.einsum("bqk,bsk->bqs", f64(q[:, :, head]), want_k) / np.sqrt(d_k)
    T = scores.shape[-1]
    scores[:, np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
    want_pattern = np.exp(scores - scores.max(axis=-1, keepdims=True))
    want_pattern /= want_pattern.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(pattern[:, head], want_pattern, atol=1e-5)
    assert not np.array_equal(logits, bad_logits)


def test_a_replaced_head_input_with_its_blocks_ln1_point_is_refused(mlp_model, no_ln_model):
    tokens = random_tokens(mlp_model, batch=2)
    shift = lambda x, hook: x + 1  # noqa: E731
    with pytest.raises(ValueError, match=r"blocks\.0\.ln1\.hook_normalized.*blocks\.0\.hook_q_input.*a pass of its own"):
        mlp_model.run_with_cache(tokens, names=["blocks.0.ln1.hook_normalized"],
                                 fwd_hooks=[("blocks.0.hook_q_input", shift)])
    # Kept, nothing to refuse; another block's ln1, or a model without ln1, neither.
    mlp_model.run_with_cache(tokens, names=["blocks.0.ln1.hook_normalized"],
                             fwd_hooks=[("blocks.0.hook_q_input", lambda x, hook: None)])
    mlp_model.run_with_cache(tokens, names=["blocks.1.ln1.hook_normalized"],
                             fwd_hooks=[("blocks.0.hook_q_input", shift)])
    no_ln_model.run_with_cache(tokens, fwd_hooks=[("blocks.0.hook_attn_in", shift)])


def test_gradients_at_the_copies(mlp_model):
    """Against a finite difference, and adding up: the heads' Q, K and V
    inputs to hook_attn_in's, every head's attn_in and the skip path's
    resid_mid to resid_pre's."""
    tokens = random_tokens(mlp_model, batch=2, seed=4)
    targets = random_tokens(mlp_model, batch=2, seed=6) % mlp_model.spec["classes"]
    names = [f"blocks.0.hook_{p}" for p in ("resid_pre", "attn_in", "q_input", "k_input", "v_input", "resid_mid")]
    g = {name.split(".hook_")[1]: f64(value) for name, value in mlp_model.gradients(tokens, targets, names).items()}
    np.testing.assert_allclose(g["attn_in"], g["q_input"] + g["k_input"] + g["v_input"], atol=1e-6)
    np.testing.assert_allclose(g["resid_pre"], g["resid_mid"] + g["attn_in"].sum(axis=2), atol=1e-6)
    name = "blocks.1.hook_k_input"
    grad = mlp_model.gradients(tokens, targets, [name])[name]
    # Along head 1's own gradient (a few steps of training leave the loss
    # flat in a random direction): the derivative there is its norm.
    direction = np.zeros(grad.shape, np.float32)
    direction[:, :, 1] = grad[:, :, 1] / np.linalg.norm(grad[:, :, 1])
    eps = 3e-3

    def loss(sign):
        return cross_entropy(mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, lambda x, hook: x + sign * eps * direction)]),
                             targets)

    numeric = (loss(1) - loss(-1)) / (2 * eps)
    assert float((f64(grad) * direction).sum()) == pytest.approx(numeric, rel=1e-2)
    assert numeric > 1e-4
