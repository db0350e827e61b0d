"""model.gradients of a metric of the caller's (attribution patching's
logit difference): given by its gradient at the logits (grad_logits=, no
torch) or as a function differentiated by torch (metric=)."""
import numpy as np
import pytest

from conftest import cross_entropy, every_point, random_tokens

NAMES = ["blocks.0.hook_resid_mid", "blocks.1.attn.hook_z", "blocks.1.mlp.hook_pre"]


def logit_diff_seed(logits_shape, good, bad):
    """dMetric/dlogits of mean over rows of logits[b, -1, good] - logits[b, -1, bad]."""
    g = np.zeros(logits_shape, dtype=np.float32)
    g[:, -1, good] = 1.0 / logits_shape[0]
    g[:, -1, bad] -= 1.0 / logits_shape[0]
    return g


def test_grad_logits_of_a_logit_difference_match_a_finite_difference(mlp_model):
    tokens = random_tokens(mlp_model, batch=2, seed=4)
    good, bad = 3, 5
    seed = logit_diff_seed(mlp_model(tokens).shape, good, bad)
    grads = mlp_model.gradients(tokens, names=NAMES, grad_logits=seed)
    _, cache = mlp_model.run_with_cache(tokens, names=NAMES)
    rng = np.random.default_rng(0)
    for name in NAMES:
        assert grads[name].shape == cache[name].shape
        direction = rng.standard_normal(cache[name].shape).astype(np.float32)
        eps = 3e-3

        def metric(sign):
            shifted = lambda a, n: a + sign * eps * direction  # noqa: E731
            logits = mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, shifted)]).astype(np.float64)
            return float((logits[:, -1, good] - logits[:, -1, bad]).mean())

        numeric = (metric(1) - metric(-1)) / (2 * eps)
        analytic = float((grads[name].astype(np.float64) * direction).sum())
        assert abs(analytic) > 1e-4, name
        assert analytic == pytest.approx(numeric, rel=5e-2, abs=1e-3), name
    # The short names of the cache work on gradients too.
    np.testing.assert_array_equal(grads["z", 1], grads["blocks.1.attn.hook_z"])


def test_the_loss_as_a_torch_metric_gives_the_loss_gradients(mlp_model):
    torch = pytest.importorskip("torch")
    tokens = random_tokens(mlp_model, batch=2, seed=4)
    targets = random_tokens(mlp_model, batch=2, seed=6) % mlp_model.spec["classes"]
    targets[:, 0] = -1
    want = mlp_model.gradients(tokens, targets, NAMES)
    ys = torch.from_numpy(targets.astype(np.int64))

    def loss(logits):
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ys.reshape(-1),
                                                 ignore_index=-1)

    got = mlp_model.gradients(tokens, names=NAMES, metric=loss)
    for name in NAMES:
        assert np.abs(want[name]).sum() > 0
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-7, err_msg=name)


def test_a_torch_metric_equals_its_gradient_given_by_hand(mlp_model):
    pytest.importorskip("torch")
    tokens = random_tokens(mlp_model, batch=3, seed=2)
    seed = logit_diff_seed(mlp_model(tokens).shape, 1, 2)
    by_hand = mlp_model.gradients(tokens, names=None, grad_logits=seed)
    by_torch = mlp_model.gradients(tokens, metric=lambda l: (l[:, -1, 1] - l[:, -1, 2]).mean())
    assert set(by_torch) == set(every_point(mlp_model)) == set(by_hand)
    for name in by_hand:
        np.testing.assert_allclose(by_torch[name], by_hand[name], rtol=1e-5, atol=1e-7, err_msg=name)


def test_padded_positions_logits_reach_no_gradient(mlp_model):
    """A metric over every logit: each row's gradients are those of the row alone."""
    rows = [list(random_tokens(mlp_model, batch=1, seed=7)[0]), list(random_tokens(mlp_model, batch=1, seed=8)[0, :5])]
    ids, _ = mlp_model.padded(rows)
    seed = np.ones(mlp_model(rows).shape, dtype=np.float32)
    with pytest.warns(UserWarning, match="reads padded positions of rows 1 "):
        batch = mlp_model.gradients(rows, names=NAMES, grad_logits=seed)
    for i, row in enumerate(rows):
        alone = mlp_model.gradients([row], names=NAMES, grad_logits=np.ones((1, len(row), seed.shape[-1]), np.float32))
        for name in NAMES:
            np.testing.assert_allclose(batch[name][i, :len(row)], alone[name][0], rtol=1e-4, atol=1e-6,
                                       err_msg=f"row {i} {name}")
    assert ids.shape == (2, len(rows[0]))


def test_a_metric_of_padded_positions_only_is_an_error(mlp_model):
    rows = [list(random_tokens(mlp_model, batch=1, seed=7)[0]), list(random_tokens(mlp_model, batch=1, seed=8)[0, :5])]
    seed = np.zeros(mlp_model(rows).shape, dtype=np.float32)
    seed[1, -1, 0] = 1.0  # logits[:, -1] of the short row: padding
    with pytest.raises(ValueError, match=r"reads only padded positions \(of rows 1\)"):
        mlp_model.gradients(rows, names=NAMES, grad_logits=seed)


def test_bad_metrics_and_seeds_are_named(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    shape = mlp_model(tokens).shape
    with pytest.raises(ValueError, match="not both"):
        mlp_model.gradients(tokens, names=NAMES, metric=lambda l: l.sum(), grad_logits=np.zeros(shape))
    with pytest.raises(ValueError, match="leave targets out"):
        mlp_model.gradients(tokens, tokens % 8, NAMES, grad_logits=np.zeros(shape))
    with pytest.raises(ValueError, match=r"grad_logits has shape \[2, 3\]"):
        mlp_model.gradients(tokens, names=NAMES, grad_logits=np.zeros((2, 3)))
    nan = np.zeros(shape, dtype=np.float32)
    nan[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match=r"grad_logits is nan at \[1, 2, 3\]"):
        mlp_model.gradients(tokens, names=NAMES, grad_logits=nan)
    with pytest.raises(TypeError, match="float array"):
        mlp_model.gradients(tokens, names=NAMES, grad_logits="ones")
    with pytest.raises(TypeError, match="metric must be a function"):
        mlp_model.gradients(tokens, names=NAMES, metric=3)


def test_bad_torch_metrics_are_named_and_its_exceptions_reach_the_caller(mlp_model):
    torch = pytest.importorskip("torch")
    tokens = random_tokens(mlp_model, batch=2)
    with pytest.raises(ValueError, match=r"one number, got a tensor of shape \[2\]"):
        mlp_model.gradients(tokens, names=NAMES, metric=lambda l: l[:, -1, 0])
    with pytest.raises(ValueError, match="does not depend on the logits"):
        mlp_model.gradients(tokens, names=NAMES, metric=lambda l: torch.tensor(float(l.detach().numpy().mean())))
    # Requiring a gradient through a tensor of the caller's only (detached logits times a
    # parameter) is no dependence on the logits either: every gradient would be 0.
    weight = torch.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="does not depend on the logits it is given"):
        mlp_model.gradients(tokens, names=NAMES, metric=lambda l: l.detach()[:, -1, 0].mean() * weight.sum())
    with pytest.raises(TypeError, match="must return a torch tensor"):
        mlp_model.gradients(tokens, names=NAMES, metric=lambda l: 1.5)
    with pytest.raises(TypeError, match="must return a real number"):
        mlp_model.gradients(tokens, names=NAMES, metric=lambda l: (l[:, -1, 0] * 1j).mean())

    class Mine(Exception):
        pass

    def fails(logits):
        raise Mine("from the metric")

    with pytest.raises(Mine, match="from the metric"):
        mlp_model.gradients(tokens, names=NAMES, metric=fails)
    # The model still works afterwards.
    assert np.isfinite(mlp_model(tokens)).all()


def test_a_numpy_metric_given_the_torch_logits_gets_a_note_saying_so(mlp_model):
    # A metric written for headlab.patching (numpy logits) and reused for
    # attribution patching once failed with torch's own words only
    # ("mean() received an invalid combination of arguments").
    pytest.importorskip("torch")
    tokens = random_tokens(mlp_model, batch=2)
    for metric, kind in ((lambda l: np.mean(l[:, -1, 0]), TypeError), (lambda l: np.log(l).mean(), RuntimeError)):
        with pytest.raises(kind) as caught:
            mlp_model.gradients(tokens, names=NAMES, metric=metric)
        assert any("numpy's functions (np.mean(l)" in note and "l.mean()" in note
                   for note in getattr(caught.value, "__notes__", []))
    mlp_model.gradients(tokens, names=NAMES, metric=lambda l: l[:, -1, 0].mean())  # the tensor's own operations
