"""run_with_cache, run_with_hooks and gradients against the C++ analysis."""
import warnings

import numpy as np
import pytest

import headlab
from conftest import cross_entropy, every_point, random_tokens


def test_hook_names_follow_transformer_lens(mlp_model, attn_model):
    names = mlp_model.hook_names()
    assert names[:3] == ["hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre"]
    assert names[-1] == "ln_final.hook_normalized"
    for point in ("ln1.hook_normalized", "attn.hook_q", "attn.hook_z", "attn.hook_attn_scores", "attn.hook_pattern",
                  "hook_attn_out", "hook_resid_mid", "ln2.hook_normalized", "mlp.hook_pre", "mlp.hook_post",
                  "hook_mlp_out", "hook_resid_post"):
        assert f"blocks.1.{point}" in names
    attn_names = attn_model.hook_names()
    assert not any("mlp" in n or "resid_mid" in n for n in attn_names)


def test_cache_shapes(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    B, T = tokens.shape
    h, d = mlp_model.spec["heads"], mlp_model.spec["d_model"]
    logits, cache = mlp_model.run_with_cache(tokens)
    assert set(cache) == set(every_point(mlp_model))
    assert cache["hook_embed"].shape == (B, T, d)
    assert cache["hook_pos_embed"].shape == (B, T, d)
    assert cache["blocks.0.attn.hook_q"].shape == (B, T, h, d // h)
    assert cache["blocks.0.attn.hook_pattern"].shape == (B, h, T, T)
    assert cache["blocks.0.mlp.hook_post"].shape == (B, T, mlp_model.spec["d_ff"])
    np.testing.assert_array_equal(logits, mlp_model(tokens))
    # The scores are masked before the softmax: -inf above the diagonal.
    scores = cache["blocks.0.attn.hook_attn_scores"]
    assert np.isneginf(scores[0, 0, 0, 1]) and np.isfinite(scores[0, 0, 1, 0])
    # The residual stream adds up.
    np.testing.assert_allclose(cache["blocks.0.hook_resid_pre"], cache["hook_embed"] + cache["hook_pos_embed"], atol=1e-6)
    np.testing.assert_allclose(cache["blocks.1.hook_resid_pre"], cache["blocks.0.hook_resid_post"], atol=0)
    only, kept = mlp_model.run_with_cache(tokens, names=["blocks.1.attn.hook_pattern"])
    assert list(kept) == ["blocks.1.attn.hook_pattern"]
    np.testing.assert_array_equal(kept["blocks.1.attn.hook_pattern"], cache["blocks.1.attn.hook_pattern"])
    _, by_filter = mlp_model.run_with_cache(tokens, names=lambda n: n.endswith("hook_pattern"))
    assert sorted(by_filter) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]


def test_cached_patterns_equal_the_analysis_example(mlp_run, mlp_model):
    example = headlab.Run(mlp_run).heads["example"]
    _, cache = mlp_model.run_with_cache([example["tokens"]], names=lambda n: n.endswith("hook_pattern"))
    for layer, attention in enumerate(example["attention"]):
        np.testing.assert_allclose(cache[f"blocks.{layer}.attn.hook_pattern"][0], np.array(attention), atol=1e-6, rtol=0)


def test_identity_hooks_change_no_bit(mlp_model):
    tokens = random_tokens(mlp_model, batch=3)
    seen = []

    def keep(activation, name):
        seen.append(name)

    def same(activation, name):
        return activation.copy()

    plain = mlp_model(tokens)
    names = mlp_model.hook_names()
    for fn in (keep, same):
        hooked = mlp_model.run_with_hooks(tokens, fwd_hooks=[(n, fn) for n in names])
        assert hooked.tobytes() == plain.tobytes()
    assert seen == names  # called once per point, in forward order


def test_zeroing_a_heads_z_is_the_analysis_zero_ablation(attn_model):
    tokens = random_tokens(attn_model, batch=8, seed=5)
    # The induction task's targets: the analysis scores the repeated segment.
    targets = np.where(np.arange(tokens.shape[1]) % 2 == 1, np.roll(tokens, -1, axis=1), -1)
    targets[:, -1] = -1
    records = headlab.analyze(attn_model, tokens, targets, pruning=False, importance_examples=1)
    clean = cross_entropy(attn_model(tokens), targets)
    assert records["loss"] == pytest.approx(clean, abs=1e-5)
    for head in records["heads"]:
        layer, h = head["layer"], head["head"]

        def zero(z, name, h=h):
            z[:, :, h, :] = 0
            return z

        ablated = attn_model.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero)])
        assert cross_entropy(ablated, targets) - clean == pytest.approx(head["ablation_delta_loss"], abs=1e-5)


def test_in_place_edits_patch_too(attn_model):
    tokens = random_tokens(attn_model, batch=2)

    def zero_in_place(z, name):
        z[:] = 0

    edited = attn_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", zero_in_place)])
    returned = attn_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", lambda z, n: np.zeros_like(z))])
    np.testing.assert_array_equal(edited, returned)
    assert not np.array_equal(edited, attn_model(tokens))


def test_patching_the_residual_stream_at_one_position(attn_model):
    clean = random_tokens(attn_model, batch=1, seed=1)
    corrupted = random_tokens(attn_model, batch=1, seed=2)
    _, cache = attn_model.run_with_cache(clean, names=["blocks.1.hook_resid_pre"])
    name, pos = "blocks.1.hook_resid_pre", 7

    def patch(resid, hook_name):
        resid[:, pos] = cache[name][:, pos]
        return resid

    patched = attn_model.run_with_hooks(corrupted, fwd_hooks=[(name, patch)])
    base = attn_model(corrupted)
    # Causal: positions before the patch are untouched, the patched one changes.
    np.testing.assert_array_equal(patched[:, :pos], base[:, :pos])
    assert not np.allclose(patched[:, pos], base[:, pos])


def test_gradients_match_a_finite_difference(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seed=4)
    targets = random_tokens(mlp_model, batch=2, seed=6) % mlp_model.spec["classes"]
    targets[:, 0] = -1
    names = ["blocks.0.hook_resid_mid", "blocks.1.attn.hook_pattern"]
    grads = mlp_model.gradients(tokens, targets, names)
    _, cache = mlp_model.run_with_cache(tokens, names=names)
    rng = np.random.default_rng(0)
    for name in names:
        assert grads[name].shape == cache[name].shape
        direction = rng.standard_normal(cache[name].shape).astype(np.float32)
        if name.endswith("hook_pattern"):
            direction *= np.tril(np.ones(cache[name].shape[-2:], dtype=np.float32))
        eps = 3e-3

        def loss(sign):
            shifted = lambda a, n: a + sign * eps * direction  # noqa: E731
            return cross_entropy(mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, shifted)]), targets)

        numeric = (loss(1) - loss(-1)) / (2 * eps)
        analytic = float((grads[name].astype(np.float64) * direction).sum())
        assert analytic == pytest.approx(numeric, rel=5e-2, abs=1e-3)


def test_the_cache_never_shares_memory_with_the_weights(mlp_run):
    torch = pytest.importorskip("torch")
    model = headlab.load(mlp_run)  # its own: a failure must not spoil the session's model
    tokens = random_tokens(model, batch=1)  # one sequence: hook_pos_embed is pos_emb.weight[:T] as it is
    logits = model(tokens)
    weights = model._core.params()["pos_emb.weight"]
    _, cache = model.run_with_cache(tokens)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.from_numpy of a read-only array only warns, then writes
        for name, value in cache.items():
            torch.from_numpy(value).zero_()
            assert not value.any(), name
    np.testing.assert_array_equal(model(tokens), logits)
    np.testing.assert_array_equal(model._core.params()["pos_emb.weight"], weights)


def test_gradients_and_analyze_inside_a_hook_equal_those_outside(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seed=4)
    targets = random_tokens(mlp_model, batch=2, seed=6) % mlp_model.spec["classes"]
    names = ["blocks.0.hook_resid_post"]
    outside = mlp_model.gradients(tokens, targets, names)[names[0]]
    records = headlab.analyze(mlp_model, tokens, targets, pruning=False, importance_examples=2)
    inside = {}

    def hook(activation, name):
        inside["grads"] = mlp_model.gradients(tokens, targets, names)[names[0]]
        inside["records"] = headlab.analyze(mlp_model, tokens, targets, pruning=False, importance_examples=2)

    mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.hook_resid_pre", hook)])
    assert np.abs(outside).sum() > 0
    np.testing.assert_array_equal(inside["grads"], outside)
    assert inside["records"] == records


def test_a_second_hook_at_a_point_gets_a_writable_copy_of_the_firsts_return(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    name = "blocks.0.attn.hook_z"
    _, cache = mlp_model.run_with_cache(random_tokens(mlp_model, batch=2, seed=9), [name])

    def zero_head_1(z, hook_name):
        z[:, :, 1] = 0

    def patched(z, hook_name):
        z = cache[hook_name].copy()
        z[:, :, 1] = 0
        return z

    chained = mlp_model.run_with_hooks(tokens, [(name, lambda z, n: cache[n]), (name, zero_head_1)])
    np.testing.assert_array_equal(chained, mlp_model.run_with_hooks(tokens, [(name, patched)]))
    assert cache[name][:, :, 1].any()  # the cache itself is left as it was


@pytest.mark.parametrize("point", ["attn_scores", "pattern"])
def test_a_replaced_score_or_pattern_never_reads_the_padding(bidirectional_model, point):
    # Uniform attention written from scratch holds finite scores (and pattern mass) at the padded
    # keys too; a bidirectional model's real queries see every key the mask lets through, so the
    # padding mask must hide them again: each row's real positions get what the row alone gives.
    model, T = bidirectional_model, bidirectional_model.spec["max_seq_len"]
    uniform = (lambda a, hook: np.zeros_like(a)) if point == "attn_scores" else \
        (lambda a, hook: np.full_like(a, 1.0 / T))  # 1/T in the row alone too: the same real entries
    rows = [[1, 2, 3], [4, 5, 6, 7, 0, 1], [2, 2, 2, 2]]
    names = [("z", 0), ("pattern", 0)]
    logits, cache = model.run_with_cache(rows, names=names, fwd_hooks=[((point, 0), uniform)])
    for b, row in enumerate(rows):
        n = len(row)
        alone, alone_cache = model.run_with_cache([row], names=names, fwd_hooks=[((point, 0), uniform)])
        np.testing.assert_allclose(logits[b, :n], alone[0], atol=1e-6)
        np.testing.assert_allclose(cache["z", 0][b, :n], alone_cache["z", 0][0], atol=1e-6)
        if point == "attn_scores":  # the softmax of the scores as the pass masks them
            assert np.all(cache["pattern", 0][b, :, :n, n:] == 0)


def test_replaced_scores_must_leave_a_real_key_of_a_padded_row(bidirectional_model):
    def hide_the_real_keys(scores, hook):
        out = np.zeros_like(scores)  # the padded keys finite, as a replacement may hold them
        out[0, :, 1, :3] = -np.inf
        return out

    with pytest.raises(ValueError, match=r"hide every real key of query \[0, 0, 1\]"):
        bidirectional_model.run_with_hooks([[1, 2, 3], [4, 5, 6, 7, 0, 1]],
                                           fwd_hooks=[(("attn_scores", 0), hide_the_real_keys)])


@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply")  # -inf * 0, meant
def test_scores_times_zero_on_a_padded_batch_gives_each_row_its_own(bidirectional_model):
    # s * 0 is NaN at the padded keys (-inf * 0), which the pass hides again: never read, so taken.
    rows = [[1, 2, 3], [4, 5, 6, 7, 0, 1]]
    times_zero = [(("attn_scores", 0), lambda s, hook: s * 0)]
    logits = bidirectional_model.run_with_hooks(rows, fwd_hooks=times_zero)
    for b, row in enumerate(rows):
        alone = bidirectional_model.run_with_hooks([row], fwd_hooks=times_zero)
        np.testing.assert_allclose(logits[b, :len(row)], alone[0], atol=1e-6)

    def nan_at_a_real_key(scores, hook):
        out = scores * 0
        out[0, 0, 1, 2] = np.nan  # key 2 of row 0 is real
        return out

    with pytest.raises(ValueError, match=r"NaN or \+inf value .*\[0, 0, 1, 2\]"):
        bidirectional_model.run_with_hooks(rows, fwd_hooks=[(("attn_scores", 0), nan_at_a_real_key)])
