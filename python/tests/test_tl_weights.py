"""TransformerLens's weight names (model.W_Q, model.W_OV, ...): each one
checked against the activations the forward pass caches, so a wrong layout
fails; no memory shared with model.params; the attn-only model's missing
MLP; and Model.with_tl_params, the way back."""
import json

import numpy as np
import pytest

from conftest import random_tokens

TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(params=["mlp", "attn", "no_ln"])
def model(request, mlp_model, attn_model):
    return {"mlp": mlp_model, "attn": attn_model}.get(request.param) or request.getfixturevalue("no_ln_model")


@pytest.fixture
def cached(model):
    tokens = random_tokens(model, batch=3, seed=7)
    logits, cache = model.run_with_cache(tokens)
    return tokens, logits, cache


def f64(a):
    return np.asarray(a, dtype=np.float64)


def attn_input(model, cache, l):
    """What layer l's attention reads: ln1's output, or the residual stream without LayerNorm."""
    return f64(cache[f"blocks.{l}.ln1.hook_normalized" if model.spec["layernorm"] else f"blocks.{l}.hook_resid_pre"])


def test_the_shapes_are_transformer_lens_s(mlp_model):
    s = mlp_model.spec
    V, T, C, d, L, h, f = s["vocab"], s["max_seq_len"], s["classes"], s["d_model"], s["layers"], s["heads"], s["d_ff"]
    k = d // h
    want = {"W_E": (V, d), "W_pos": (T, d), "W_E_pos": (V + T, d), "W_U": (d, C), "b_U": (C,),
            "W_Q": (L, h, d, k), "W_K": (L, h, d, k), "W_V": (L, h, d, k), "W_O": (L, h, k, d),
            "b_Q": (L, h, k), "b_K": (L, h, k), "b_V": (L, h, k), "b_O": (L, d),
            "W_in": (L, d, f), "b_in": (L, f), "W_out": (L, f, d), "b_out": (L, d),
            "W_QK": (L, h, d, d), "W_OV": (L, h, d, d), "QK": (L, h, d, d), "OV": (L, h, d, d)}
    assert {name: getattr(mlp_model, name).shape for name in want} == want
    assert mlp_model.W_Q.dtype == mlp_model.params["blocks.0.attn.q.weight"].dtype


def test_q_k_v_o_are_what_the_heads_compute(model, cached):
    _, _, cache = cached
    for l in range(model.spec["layers"]):
        x = attn_input(model, cache, l)
        for p in "qkv":
            W, b = getattr(model, f"W_{p.upper()}")[l], getattr(model, f"b_{p.upper()}")[l]
            np.testing.assert_allclose(cache[p, l], np.einsum("btd,hdk->bthk", x, f64(W)) + b, **TOL)
        result = np.einsum("bthk,hkd->bthd", f64(cache["z", l]), f64(model.W_O[l]))
        np.testing.assert_allclose(cache["result", l], result, **TOL)
        np.testing.assert_allclose(cache["attn_out", l], result.sum(axis=2) + model.b_O[l], **TOL)


def test_qk_gives_the_scores_and_ov_the_results(model, cached):
    _, _, cache = cached
    d_k = model.spec["d_model"] // model.spec["heads"]
    for l in range(model.spec["layers"]):
        x = attn_input(model, cache, l)
        W_Q, b_Q, W_K, b_K = (f64(a[l]) for a in (model.W_Q, model.b_Q, model.W_K, model.b_K))
        k = np.einsum("bsd,hdk->bhsk", x, W_K) + b_K[None, :, None]
        # (x_t W_Q + b_Q)(x_s W_K + b_K)^T = x_t W_QK x_s^T + x_t W_Q b_K^T + b_Q k_s^T
        scores = (np.einsum("btd,hde,bse->bhts", x, f64(model.W_QK[l]), x)
                  + np.einsum("btd,hdk,hk->bht", x, W_Q, b_K)[..., None]
                  + np.einsum("hk,bhsk->bhs", b_Q, k)[:, :, None]) / np.sqrt(d_k)
        seen = np.isfinite(cache["attn_scores", l])
        np.testing.assert_allclose(cache["attn_scores", l][seen], scores[seen], **TOL)
        # Each pattern row sums to 1, so b_V passes through as b_V W_O.
        ov = np.einsum("bhts,bsd,hde->bthe", f64(cache["pattern", l]), x, f64(model.W_OV[l]))
        ov += np.einsum("hk,hkd->hd", f64(model.b_V[l]), f64(model.W_O[l]))
        np.testing.assert_allclose(cache["result", l], ov, **TOL)
    np.testing.assert_array_equal(model.OV, model.W_V @ model.W_O)
    np.testing.assert_array_equal(model.QK, model.W_Q @ model.W_K.swapaxes(-1, -2))


def test_embed_unembed_and_mlp(model, cached):
    tokens, logits, cache = cached
    T = tokens.shape[1]
    np.testing.assert_array_equal(cache["embed"], model.W_E[tokens])
    np.testing.assert_array_equal(cache["pos_embed"][0], model.W_pos[:T])
    np.testing.assert_array_equal(model.W_E_pos, np.concatenate([model.W_E, model.W_pos]))
    final = f64(cache["ln_final.hook_normalized"] if model.spec["layernorm"] else cache["resid_post", -1])
    np.testing.assert_allclose(logits, final @ f64(model.W_U) + model.b_U, **TOL)
    if model.spec["attn_only"]:
        return
    for l in range(model.spec["layers"]):
        x = f64(cache[f"blocks.{l}.ln2.hook_normalized"] if model.spec["layernorm"] else cache["resid_mid", l])
        np.testing.assert_allclose(cache["pre", l], x @ f64(model.W_in[l]) + model.b_in[l], **TOL)
        np.testing.assert_allclose(cache["mlp_out", l], f64(cache["post", l]) @ f64(model.W_out[l]) + model.b_out[l],
                                   **TOL)


NAMES = ["W_E", "W_pos", "W_E_pos", "W_U", "b_U", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_in",
         "b_in", "W_out", "b_out", "W_QK", "W_OV", "QK", "OV"]


def test_no_memory_shared_with_the_params_and_read_only(mlp_model):
    for name in NAMES:
        array = getattr(mlp_model, name)
        assert not any(np.shares_memory(array, p) for p in mlp_model.params.values()), name
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0
    assert not np.shares_memory(mlp_model.W_E, mlp_model.W_E_pos)


def test_an_attn_only_model_has_no_mlp(attn_model):
    for name in ("W_in", "b_in", "W_out", "b_out"):
        with pytest.raises(AttributeError, match="attn-only, it has no MLP"):
            getattr(attn_model, name)
        assert not hasattr(attn_model, name)
        with pytest.raises(KeyError, match="attn-only, it has no MLP"):
            attn_model.with_tl_params({name: np.zeros(1, np.float32)})


def test_with_tl_params_gives_the_model_back_and_edits_a_head(mlp_model):
    same = mlp_model.with_tl_params({name: getattr(mlp_model, name) for name in NAMES[:2] + NAMES[3:17]})
    assert same.edited["replaced"] == []
    assert all(same.params[n].tobytes() == p.tobytes() for n, p in mlp_model.params.items())

    tokens = random_tokens(mlp_model, batch=4, seed=2)
    W_O = mlp_model.W_O.copy()
    W_O[1, 0] = 0
    edited = mlp_model.with_tl_params({"W_O": W_O})
    assert edited.edited["replaced"] == ["blocks.1.attn.o.weight"]
    np.testing.assert_array_equal(edited.W_O, W_O)

    def zero(z, name):
        z[:, :, 0, :] = 0

    hooked = mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", zero)])
    np.testing.assert_allclose(edited(tokens), hooked, atol=1e-6)
    # TransformerLens's names and headlab's in one dict; every family's inverse.
    rng = np.random.default_rng(0)
    new = {n: rng.normal(size=getattr(mlp_model, n).shape).astype(np.float32)
           for n in ("W_U", "W_K", "b_V", "W_in", "b_out")}
    g = np.full(mlp_model.spec["d_model"], 2.0, np.float32)
    both = mlp_model.with_tl_params({**new, "blocks.0.ln1.weight": g})
    for n, value in new.items():
        np.testing.assert_array_equal(getattr(both, n), value)
    np.testing.assert_array_equal(both.params["blocks.0.ln1.weight"], g)
    torch = pytest.importorskip("torch")
    from_torch = mlp_model.with_tl_params({"W_O": torch.from_numpy(W_O)})
    assert from_torch(tokens).tobytes() == edited(tokens).tobytes()


def test_with_tl_params_names_what_it_refuses(mlp_model):
    W_O = mlp_model.W_O
    with pytest.raises(KeyError, match=r"no parameter 'W_q' \(nearest: W_Q"):
        mlp_model.with_tl_params({"W_q": W_O})
    with pytest.raises(KeyError, match="'W_OV' is computed from W_V and W_O: give those instead"):
        mlp_model.with_tl_params({"W_OV": mlp_model.W_OV})
    with pytest.raises(ValueError, match=r"'W_O' has shape \[2, 8, 16\], the model's is \[2, 2, 8, 16\]"):
        mlp_model.with_tl_params({"W_O": W_O[0]})
    with pytest.raises(TypeError, match="'W_O' has dtype int64"):
        mlp_model.with_tl_params({"W_O": W_O.astype(np.int64)})
    bad = W_O.copy()
    bad[1, 0, 3, 2] = np.nan
    with pytest.raises(ValueError, match=r"'W_O' holds nan at \[1, 0, 3, 2\]"):
        mlp_model.with_tl_params({"W_O": bad})
    with pytest.raises(ValueError, match="'blocks.1.attn.o.weight' is given twice, by 'W_O' and by"):
        mlp_model.with_tl_params({"W_O": W_O, "blocks.1.attn.o.weight": mlp_model.params["blocks.1.attn.o.weight"]})
    with pytest.raises(TypeError, match="takes a dict"):
        mlp_model.with_tl_params([("W_O", W_O)])


def test_head_circuits_are_the_weights_products_and_heads_json_copying(no_ln_model, attn_model, attn_run):
    """Without LayerNorm nothing is folded: QK = W_E W_QK W_E^T / sqrt(d_k),
    OV = W_E W_OV W_U. The copying score is heads.json's."""
    m = no_ln_model
    d_k = m.spec["d_model"] // m.spec["heads"]
    c = m.head_circuits(1, 0)
    assert not c["layernorm_folded"] and c["mlp_ignored"]
    E, P = m.W_E.astype(np.float64), m.W_pos.astype(np.float64)
    QK, OV = m.W_QK[1, 0].astype(np.float64), m.W_OV[1, 0].astype(np.float64)
    np.testing.assert_allclose(c["qk"], E @ QK @ E.T / np.sqrt(d_k), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(c["qk_pos"], P @ QK @ P.T / np.sqrt(d_k), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(c["ov"], E @ OV @ m.W_U.astype(np.float64), rtol=1e-4, atol=1e-6)
    records = {(h["layer"], h["head"]): h for h in json.loads((attn_run / "heads.json").read_text())["heads"]}
    for (layer, head), record in records.items():
        got = attn_model.head_circuits(layer, head)
        assert got["layernorm_folded"] and not got["mlp_ignored"]
        assert got["copying"] == pytest.approx(record["copying"], abs=1e-4)
    with pytest.raises(ValueError, match=r"head \(2, 0\) is not in this model's 2 layers x 2 heads"):
        attn_model.head_circuits(2, 0)
    # Negative indices count from the end, as cache["pattern", -1] does; past the start, named as given.
    for got, want in ((attn_model.head_circuits(-1, -2), attn_model.head_circuits(1, 0)),
                      (attn_model.head_circuits(-2, 1), attn_model.head_circuits(0, 1))):
        np.testing.assert_array_equal(got["qk"], want["qk"])
        np.testing.assert_array_equal(got["ov"], want["ov"])
    with pytest.raises(ValueError, match=r"head \(-3, 0\) is not in this model's 2 layers x 2 heads"):
        attn_model.head_circuits(-3, 0)
