"""headlab.patching.path against the same paths computed from the cache and
the weights by hand: the sender's direct path changes the residual stream by
its own hook_result difference and nothing else."""
import numpy as np
import pytest

import headlab.patching as patching
from conftest import cross_entropy, random_tokens
from test_patching import corrupt_first_half, targets_for


def restored(model, clean, corrupted, targets, hooks):
    clean_loss, bad_loss = cross_entropy(model(clean), targets), cross_entropy(model(corrupted), targets)
    patched = cross_entropy(model.run_with_hooks(corrupted, fwd_hooks=hooks), targets)
    return (bad_loss - patched) / (bad_loss - clean_loss)


def results(model, tokens, layer):
    _, cache = model.run_with_cache(tokens, names=[f"blocks.{layer}.attn.hook_result"])
    return cache[f"blocks.{layer}.attn.hook_result"]


@pytest.mark.parametrize("which", ["mlp_model", "attn_model"])
def test_the_path_to_the_logits_adds_the_senders_own_result_and_nothing_else(which, request):
    model = request.getfixturevalue(which)
    clean = random_tokens(model, batch=6, seed=3)
    bad = corrupt_first_half(model, clean)
    targets = targets_for(model, clean)
    grid = patching.path(model, clean, bad, targets=targets, progress=False)
    L, H = model.spec["layers"], model.spec["heads"]
    assert grid.shape == (L, H) and np.isfinite(grid).all()
    final = f"blocks.{L - 1}.hook_resid_post"
    _, bad_cache = model.run_with_cache(bad, names=[final])
    for layer in range(L):
        delta = results(model, clean, layer) - results(model, bad, layer)
        for head in range(H):
            resid = bad_cache[final] + delta[:, :, head]
            want = restored(model, clean, bad, targets, [(final, lambda a, n, r=resid: r)])
            assert grid[layer, head] == pytest.approx(want, abs=1e-5), (layer, head)
    whole = patching.head_out(model, clean, bad, targets=targets, progress=False)
    if which == "attn_model":  # the last layer's heads have no other path: the plain head patch
        np.testing.assert_allclose(grid[L - 1], whole[L - 1], atol=1e-5)
    else:  # their block's MLP reads them too: the direct path is not the whole effect
        assert not np.allclose(grid[L - 1], whole[L - 1], atol=1e-3)


@pytest.mark.parametrize("what", ["k", "v"])
def test_the_path_into_a_later_heads_keys_is_its_keys_from_the_changed_residual(what, attn_model):
    model = attn_model
    clean = random_tokens(model, batch=6, seed=5)
    bad = corrupt_first_half(model, clean, seed=2)
    targets = targets_for(model, clean)
    receiver = (1, 1)
    grid = patching.path(model, clean, bad, receivers=[receiver], receiver_input=what, targets=targets,
                         progress=False)
    assert np.isnan(grid[1]).all() and np.isfinite(grid[0]).all()
    _, bad_cache = model.run_with_cache(bad, names=["blocks.1.hook_resid_pre"])
    p = model.params
    delta = results(model, clean, 0) - results(model, bad, 0)
    for head in range(model.spec["heads"]):
        x = (bad_cache["blocks.1.hook_resid_pre"] + delta[:, :, head]).astype(np.float64)
        centered = x - x.mean(-1, keepdims=True)
        normed = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-5)
        normed = normed * p["blocks.1.ln1.weight"] + p["blocks.1.ln1.bias"]
        W, b = (model.W_K, model.b_K) if what == "k" else (model.W_V, model.b_V)
        keys = normed @ W[1, receiver[1]] + b[1, receiver[1]]

        def patch(k, name, keys=keys):
            k[:, :, receiver[1]] = keys
            return k

        want = restored(model, clean, bad, targets, [(f"blocks.1.attn.hook_{what}", patch)])
        assert abs(want) > 1e-6
        # A share of a float32 loss gap: its rounding is about 1e-7 of the
        # losses, so a near-zero share (a few 1e-6) is compared to that.
        assert grid[0, head] == pytest.approx(want, rel=1e-3, abs=1e-7), head


def test_a_metric_of_your_own_and_bad_receivers(attn_model):
    clean = random_tokens(attn_model, batch=2, seed=1)
    bad = corrupt_first_half(attn_model, clean)
    grid = patching.path(attn_model, clean, bad, [(1, 0), (1, 1)], lambda l: float(l[:, -1, 0].mean()),
                         progress=False)
    assert np.isfinite(grid[0]).all() and np.isnan(grid[1]).all()
    for receivers, text in ((("logit"), "must be \"logits\" or a list"), ([], "non-empty list"),
                            ([(0, 1)], "every receiver is in layer 0"), ([(2, 0)], r"layer 2 is not in \[0, 2\)"),
                            ([(1, 2)], r"head 2 is not in \[0, 2\)"), ([(1,)], "list of \\(layer, head\\)")):
        with pytest.raises(ValueError, match=text):
            patching.path(attn_model, clean, bad, receivers, progress=False)
    with pytest.raises(ValueError, match="receiver_input must be made of"):
        patching.path(attn_model, clean, bad, [(1, 0)], receiver_input="x", progress=False)
    with pytest.raises(ValueError, match="receivers=\"logits\" is the direct path"):
        patching.path(attn_model, clean, bad, "logits", receiver_input="k", progress=False)
    with pytest.raises(ValueError, match="targets are read by the default metric only"):
        patching.path(attn_model, clean, bad, metric=lambda l: 0.0, targets=clean)
