"""model.QK and model.OV as TransformerLens's FactoredMatrix: the product of its
factors, kept factored through products, its SVD, eigenvalues and norm from
the small side, and its circuits equal to head_circuits' where nothing is folded."""
import numpy as np
import pytest

import headlab


def f64(m, name):
    return getattr(m, name).astype(np.float64)


def test_qk_and_ov_are_the_dense_products(mlp_model):
    assert isinstance(mlp_model.OV, headlab.FactoredMatrix) and mlp_model.OV.shape == mlp_model.W_OV.shape
    np.testing.assert_array_equal(np.asarray(mlp_model.OV), mlp_model.W_OV)
    np.testing.assert_array_equal(mlp_model.QK.AB, mlp_model.W_QK)
    np.testing.assert_array_equal(mlp_model.OV[1, 0].AB, mlp_model.W_OV[1, 0])
    assert mlp_model.QK.mdim == mlp_model.cfg.d_head
    with pytest.raises(ValueError, match="read-only"):
        mlp_model.OV[...] = 0


def test_a_heads_full_ov_circuit_is_head_circuits_without_layernorm(no_ln_model):
    m = no_ln_model
    for layer in range(m.cfg.n_layers):
        for head in range(m.cfg.n_heads):
            full = m.W_E @ m.OV[layer, head] @ m.W_U  # stays factored: [V, C] through d_k
            assert isinstance(full, headlab.FactoredMatrix) and full.mdim == m.cfg.d_head
            np.testing.assert_allclose(full.AB, m.head_circuits(layer, head)["ov"], rtol=1e-5, atol=1e-5)
            qk = (m.W_E @ m.QK[layer, head] @ m.W_E.T).AB / np.sqrt(m.cfg.d_head)
            np.testing.assert_allclose(qk, m.head_circuits(layer, head)["qk"], rtol=1e-5, atol=1e-5)


def test_svd_eigenvalues_and_norm_are_the_products(mlp_model):
    fm = headlab.FactoredMatrix(f64(mlp_model, "W_V"), f64(mlp_model, "W_O"))
    dense = fm.AB
    U, S, Vh = fm.svd()
    np.testing.assert_allclose(U @ (S[..., None] * Vh.swapaxes(-1, -2)), dense, atol=1e-10)  # TransformerLens's Vh is V
    np.testing.assert_allclose(S, np.linalg.svd(dense, compute_uv=False)[..., :fm.mdim], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fm.norm(), np.linalg.norm(dense, axis=(-2, -1)), rtol=1e-9)
    # The eigenvalues of AB's that are not zero (it has rank d_k), largest first on both sides.
    ours = np.sort_complex(fm[1, 1].eigenvalues)
    theirs = np.linalg.eigvals(dense[1, 1])
    theirs = np.sort_complex(theirs[np.argsort(-np.abs(theirs))][:fm.mdim])
    np.testing.assert_allclose(ours, theirs, atol=1e-8)
    np.testing.assert_allclose(fm.T.AB, dense.swapaxes(-1, -2), atol=1e-12)
    np.testing.assert_allclose((fm * 2).AB, 2 * dense, atol=1e-12)
    np.testing.assert_allclose(fm.get_corner(2), dense[..., :2, :2], atol=1e-12)
    np.testing.assert_allclose(fm[1, 0, 2:4, -1].AB, dense[1, 0, 2:4, -1:], atol=1e-12)
    x = np.arange(fm.rdim, dtype=np.float64)
    np.testing.assert_allclose(fm[0, 1] @ x, dense[0, 1] @ x, atol=1e-10)  # a vector: an array
    np.testing.assert_allclose((fm[0, 1] @ fm[1, 0]).AB, dense[0, 1] @ dense[1, 0], atol=1e-10)


def test_bad_factors_are_refused():
    with pytest.raises(ValueError, match=r"same mdim, got shapes \[4, 3\] and \[2, 5\]"):
        headlab.FactoredMatrix(np.zeros((4, 3)), np.zeros((2, 5)))
    with pytest.raises(ValueError, match="not square"):
        headlab.FactoredMatrix(np.zeros((4, 2)), np.zeros((2, 5))).BA
    with pytest.raises(IndexError, match="at most 2 entries"):
        headlab.FactoredMatrix(np.zeros((4, 2)), np.zeros((2, 5)))[0, 0, 0]
