"""model.gradients(fwd_hooks=...): the gradients of the hooked pass."""
import numpy as np
import pytest

from conftest import cross_entropy, random_tokens

LAYER, HEAD = 1, 1
UPSTREAM = ["blocks.0.hook_resid_pre", "blocks.0.attn.hook_z", "blocks.1.hook_resid_pre", "blocks.1.attn.hook_q",
            "blocks.1.attn.hook_v"]


def zero_head(z, hook):
    z[:, :, HEAD] = 0
    return z


def loss_batch(model):
    tokens = random_tokens(model, batch=2, seed=4)
    targets = random_tokens(model, batch=2, seed=6) % model.spec["classes"]
    targets[:, 0] = -1
    return tokens, targets


def without_head(model):
    """The weight edit equal to zero-ablating HEAD's hook_z: its block of W_O zeroed."""
    name, d_k = f"blocks.{LAYER}.attn.o.weight", model.spec["d_model"] // model.spec["heads"]
    w = np.array(model.params[name])
    w[:, HEAD * d_k:(HEAD + 1) * d_k] = 0
    return model.with_params({name: w})


def test_a_zero_ablated_head_gives_the_gradients_of_the_weight_edit(mlp_model):
    tokens, targets = loss_batch(mlp_model)
    ablate = [(("z", LAYER), zero_head)]
    hooked = mlp_model.gradients(tokens, targets, UPSTREAM, fwd_hooks=ablate)
    edited = without_head(mlp_model).gradients(tokens, targets, UPSTREAM)
    plain = mlp_model.gradients(tokens, targets, UPSTREAM)
    for name in UPSTREAM:
        np.testing.assert_allclose(hooked[name], edited[name], rtol=1e-4, atol=1e-7, err_msg=name)
    # The ablation matters here: without the hook the gradients are others.
    assert not np.allclose(plain["blocks.1.attn.hook_v"], edited["blocks.1.attn.hook_v"], atol=1e-6)
    # The ablated head's own inputs get none; the other head's do.
    assert np.all(hooked["blocks.1.attn.hook_v"][:, :, HEAD] == 0)
    assert np.any(hooked["blocks.1.attn.hook_v"][:, :, 1 - HEAD] != 0)

    # A metric's gradients too (given at the logits).
    seed = np.zeros_like(mlp_model(tokens))
    seed[:, -1, 0], seed[:, -1, 1] = 1, -1
    hooked = mlp_model.gradients(tokens, names=UPSTREAM, grad_logits=seed, fwd_hooks=ablate)
    edited = without_head(mlp_model).gradients(tokens, names=UPSTREAM, grad_logits=seed)
    for name in UPSTREAM:
        np.testing.assert_allclose(hooked[name], edited[name], rtol=1e-4, atol=1e-7, err_msg=name)


def test_hooked_gradients_match_a_finite_difference_of_the_hooked_run(mlp_model):
    tokens, targets = loss_batch(mlp_model)
    ablate = (("z", LAYER), zero_head)
    names = ["blocks.0.hook_resid_mid", "blocks.1.attn.hook_z"]
    grads = mlp_model.gradients(tokens, targets, names, fwd_hooks=[ablate])
    rng = np.random.default_rng(1)
    for name in names:
        direction = rng.standard_normal(grads[name].shape).astype(np.float32)
        eps = 3e-3

        def loss(sign):
            # The shift after the ablation: the gradient is at what flows on from the point.
            shifted = lambda a, hook: a + sign * eps * direction  # noqa: E731
            logits = mlp_model.run_with_hooks(tokens, fwd_hooks=[ablate, (name, shifted)])
            return cross_entropy(logits, targets)

        numeric = (loss(1) - loss(-1)) / (2 * eps)
        analytic = float((grads[name].astype(np.float64) * direction).sum())
        assert analytic == pytest.approx(numeric, rel=5e-2, abs=1e-3), name


def test_a_changed_entry_passes_no_gradient_upstream(mlp_model):
    # A hook computes outside the graph: what it changes is a constant (a detached patch).
    tokens, targets = loss_batch(mlp_model)
    point, before = "blocks.0.hook_resid_post", ["blocks.0.hook_resid_pre", "blocks.0.attn.hook_z"]
    after = "blocks.1.hook_resid_pre"  # what resid_post flows into unchanged
    grads = mlp_model.gradients(tokens, targets, [point, after, *before], fwd_hooks=[(point, lambda a, hook: a + 1)])
    for name in before:
        assert np.all(grads[name] == 0), name
    # At the point itself: the gradient of what flows on from it.
    assert np.any(grads[point] != 0)
    np.testing.assert_array_equal(grads[point], grads[after])


def test_hooked_gradients_refuse_what_run_with_hooks_refuses(mlp_model):
    tokens, targets = loss_batch(mlp_model)
    bad = {
        "does not fit": lambda a, hook: a[:, :1],
        "NaN or infinite": lambda a, hook: a * np.nan,
        "dtype int": lambda a, hook: np.zeros(a.shape, dtype=int),
    }
    for message, fn in bad.items():
        for call in (lambda: mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_resid_mid", fn)]),
                     lambda: mlp_model.gradients(tokens, targets, ["hook_embed"],
                                                 fwd_hooks=[("blocks.0.hook_resid_mid", fn)])):
            with pytest.raises(ValueError, match=message):
                call()
    with pytest.raises(ValueError, match="got one pair"):
        mlp_model.gradients(tokens, targets, ["hook_embed"], fwd_hooks=("blocks.0.hook_resid_mid", zero_head))

    def raises(a, hook):
        raise RuntimeError("from the hook")

    with pytest.raises(RuntimeError, match="from the hook"):
        mlp_model.gradients(tokens, targets, ["hook_embed"], fwd_hooks=[("blocks.0.hook_resid_mid", raises)])
