"""What TransformerLens's exploratory workflow needed and did not find, from a
QA pass through it on a trained induction model: a normalized stack handed to
logit_attrs (the LayerNorm's scale applied twice, silently), the composition
scores of every head pair, the unembedding's directions; and the workflow
itself, examples/tl_workflow.py."""
import importlib.util
import json

import numpy as np
import pytest

from conftest import REPO, random_tokens


def test_logit_attrs_refuses_a_stack_the_layernorm_was_applied_to(mlp_model):
    tokens = random_tokens(mlp_model)
    classes = tokens[:, -1]
    _, cache = mlp_model.run_with_cache(tokens)
    raw, _ = cache.decompose_resid(pos_slice=-2)
    normed, _ = cache.decompose_resid(pos_slice=-2, apply_ln=True)
    for stack in (normed, normed[1:], cache.apply_ln_to_stack(raw, pos_slice=-2)):
        with pytest.raises(ValueError, match="been through ln_final already.*apply_ln=False"):
            cache.logit_attrs(stack, classes, pos_slice=-2)
        with pytest.raises(ValueError, match="been through ln_final already"):
            cache.apply_ln_to_stack(stack, pos_slice=-2)
    heads, _ = cache.stack_head_results(pos_slice=-2, apply_ln=True)
    with pytest.raises(ValueError, match="been through ln_final already"):
        cache.logit_attrs(heads, classes, pos_slice=-2)
    # The two right ways agree: the raw stack through logit_attrs, the normalized one onto the directions.
    attrs = cache.logit_attrs(raw, classes, pos_slice=-2)
    direct = (normed * mlp_model.tokens_to_residual_directions(classes)).sum(-1)
    np.testing.assert_allclose(attrs, direct, rtol=0, atol=1e-9)
    # ... and they are not what the double scale gives (what the refusal prevents).
    twice = cache.logit_attrs(np.array(normed), classes, pos_slice=-2)
    assert np.abs(twice - attrs).max() > 1e-3


def test_a_stack_of_a_model_without_layernorm_goes_through_as_it_is(no_ln_model):
    tokens = random_tokens(no_ln_model)
    _, cache = no_ln_model.run_with_cache(tokens)
    normed, _ = cache.accumulated_resid(pos_slice=-1, apply_ln=True)  # no LayerNorm: nothing applied
    raw, _ = cache.accumulated_resid(pos_slice=-1)
    np.testing.assert_array_equal(cache.logit_attrs(normed, tokens[:, 0], pos_slice=-1),
                                  cache.logit_attrs(raw, tokens[:, 0], pos_slice=-1))


def test_all_composition_scores_are_heads_json_s(attn_run, attn_model):
    records = json.loads((attn_run / "heads.json").read_text())["circuits"]
    L, h = attn_model.cfg.n_layers, attn_model.cfg.n_heads
    scores = {mode: attn_model.all_composition_scores(mode) for mode in "QKV"}
    assert all(s.shape == (L, h, L, h) and s.dtype == np.float64 for s in scores.values())
    seen = np.zeros((L, h, L, h), bool)
    for pair in records["composition"]:
        (wl, wh), (rl, rh) = ((int(n[1:n.index("H")]), int(n[n.index("H") + 1:])) for n in (pair["writer"],
                                                                                            pair["reader"]))
        for mode in "QKV":
            assert scores[mode][wl, wh, rl, rh] == pytest.approx(pair[mode.lower()], abs=1e-12)
        seen[wl, wh, rl, rh] = True
    assert seen.sum() == (L * (L - 1) // 2) * h * h
    for s in scores.values():
        assert (s[~seen] == 0).all() and (s[seen] > 0).all() and (s <= 1).all()
    assert attn_model.composition_baseline == pytest.approx(records["composition_baseline"], abs=1e-12)
    np.testing.assert_array_equal(attn_model.all_composition_scores("k"), scores["K"])
    scores["K"][:] = 5  # a copy: the next call is not changed
    assert (attn_model.all_composition_scores("K") <= 1).all()
    for bad in ("QK", "", None, 1):
        with pytest.raises(ValueError, match="mode is 'Q', 'K' or 'V'"):
            attn_model.all_composition_scores(bad)


def test_composition_without_layernorm_is_transformer_lens_formula(no_ln_model):
    m = no_ln_model
    f64 = {name: getattr(m, name).astype(np.float64) for name in ("W_Q", "W_K", "W_V", "W_O")}
    OV, QK = f64["W_V"] @ f64["W_O"], f64["W_Q"] @ f64["W_K"].swapaxes(-1, -2)  # model.W_OV, W_QK in float64

    def score(a, b):
        return np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))

    for mode, right in (("Q", lambda l, h: QK[l, h]), ("K", lambda l, h: QK[l, h].T), ("V", lambda l, h: OV[l, h])):
        got = no_ln_model.all_composition_scores(mode)
        for a in range(no_ln_model.cfg.n_heads):
            for b in range(no_ln_model.cfg.n_heads):
                assert got[0, a, 1, b] == pytest.approx(score(OV[0, a], right(1, b)), rel=1e-9)
    assert no_ln_model.composition_baseline > 0


def test_tokens_to_residual_directions_are_the_unembedding_s_columns(mlp_model):
    w_u = mlp_model.W_U.astype(np.float64)
    np.testing.assert_array_equal(mlp_model.tokens_to_residual_directions(3), w_u[:, 3])
    ids = np.array([[0, 2], [1, 1]])
    dirs = mlp_model.tokens_to_residual_directions(ids)
    assert dirs.shape == (2, 2, mlp_model.cfg.d_model)
    np.testing.assert_array_equal(dirs[0, 1], w_u[:, 2])
    classes = mlp_model.cfg.d_vocab_out
    with pytest.raises(ValueError, match=f"class {classes} is outside"):
        mlp_model.tokens_to_residual_directions([0, classes])
    with pytest.raises(ValueError, match="class ids"):
        mlp_model.tokens_to_residual_directions(np.array([0.5]))


def test_the_tl_workflow_example_runs_and_its_checks_hold(tmp_path):
    """examples/tl_workflow.py, on a model of 20 steps (its numbers need no trained circuit)."""
    spec = importlib.util.spec_from_file_location("tl_workflow", REPO / "examples" / "tl_workflow.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    lines = []
    got = example.main(tmp_path / "run", steps=20, show=lines.append)
    assert sorted({line[:2] for line in lines if line[0].isdigit()}) == [f"{i}." for i in range(1, 8)]
    np.testing.assert_allclose(got["dla"], got["dla_normed"], rtol=0, atol=1e-9)
    for mine, theirs in got["scores"]:
        assert mine == pytest.approx(theirs, abs=1e-9)  # numpy from the cache, the analysis's scores
    assert got["head_out"].shape == got["path_v"].shape == got["path_k"].shape == (2, 2)
    assert np.isnan(got["path_k"][1]).all()  # the last layer's heads have no later receiver
    assert ((0 <= got["k_composition"]) & (got["k_composition"] <= 1)).all()
    if "torch_gap" in got:
        assert got["torch_gap"] < 1e-4


def test_patching_lists_its_grids_not_its_imports():
    from headlab import patching
    listed = dir(patching)
    assert {"np", "sys", "time", "mean_loss", "warn_if_not_next_token"}.isdisjoint(listed)
    assert all(callable(getattr(patching, name)) for name in listed if name not in ("KINDS", "MIN_GAP"))
    assert {"resid_pre", "head_out", "head_q", "path", "grid"} <= set(listed)
    assert {kind for kind in patching.KINDS} <= set(listed) | {"resid_post"}  # resid_post: through grid only
