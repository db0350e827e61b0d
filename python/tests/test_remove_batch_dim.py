"""run_with_cache(remove_batch_dim=True): a cache of one sequence without its
batch axis, whose TransformerLens methods give what the batched cache gives
with the axis taken off."""
import pickle
import re

import numpy as np
import pytest

from conftest import random_tokens


@pytest.fixture(params=["mlp", "attn", "no_ln"])
def model(request, mlp_model, attn_model):
    return {"mlp": mlp_model, "attn": attn_model}.get(request.param) or request.getfixturevalue("no_ln_model")


def both_caches(model, seq_len=6):
    tokens = random_tokens(model, batch=1, seq_len=seq_len, seed=3)
    logits, batched = model.run_with_cache(tokens)
    single_logits, single = model.run_with_cache(tokens, remove_batch_dim=True)
    return tokens, logits, batched, single_logits, single


def test_every_value_loses_its_batch_axis_and_the_logits_keep_theirs(model):
    tokens, logits, batched, single_logits, single = both_caches(model)
    assert batched.has_batch_dim and not single.has_batch_dim
    assert single_logits.shape == logits.shape == (1, 6, model.spec["classes"])  # as TransformerLens's
    assert np.array_equal(single_logits, logits)
    assert list(single) == list(batched)
    for name in batched:
        assert single[name].shape == batched[name].shape[1:], name
        assert np.array_equal(single[name], batched[name][0]), name
        assert not single[name].flags.writeable, name
    assert np.array_equal(single["pattern", 0], batched["pattern", 0][0])
    assert np.array_equal(single["resid_post", -1], batched["resid_post", -1][0])
    assert "without the batch axis" in repr(single)
    # A 1-D sequence is a batch of one too.
    _, flat = model.run_with_cache(tokens[0], remove_batch_dim=True)
    assert np.array_equal(flat["blocks.0.hook_attn_out"], single["blocks.0.hook_attn_out"])


@pytest.mark.parametrize("pos_slice", [None, -1, slice(1, 4)])
def test_each_method_is_the_batched_one_without_the_axis(model, pos_slice):
    _, _, batched, _, single = both_caches(model)
    # The positions' axis of a batched stack is 2, of one without the batch axis 1.
    off = (lambda a: a[:, 0])

    for method, kwargs in [("stack_head_results", {}), ("stack_head_results", {"layer": 1}),
                           ("decompose_resid", {}), ("decompose_resid", {"layer": 1}),
                           ("accumulated_resid", {}), ("accumulated_resid", {"layer": 1})]:
        want, want_labels = getattr(batched, method)(pos_slice=pos_slice, **kwargs)
        got, labels = getattr(single, method)(pos_slice=pos_slice, **kwargs)
        assert labels == want_labels, method
        assert got.shape == want.shape[:1] + want.shape[2:], method
        assert np.array_equal(got, off(want)), method

    stack, _ = batched.decompose_resid(pos_slice=pos_slice)
    single_stack, _ = single.decompose_resid(pos_slice=pos_slice)
    for layer in (None, 1):
        normed = batched.apply_ln_to_stack(stack if layer is None else batched.decompose_resid(
            layer=layer, pos_slice=pos_slice)[0], layer=layer, pos_slice=pos_slice)
        single_normed = single.apply_ln_to_stack(single_stack if layer is None else single.decompose_resid(
            layer=layer, pos_slice=pos_slice)[0], layer=layer, pos_slice=pos_slice)
        assert np.array_equal(single_normed, off(normed)), layer

    # Class ids of the kept positions ([T'] or, for an int pos_slice, one), -1 (none) at one of them.
    classes = np.random.default_rng(2).integers(0, model.spec["classes"], size=single_stack.shape[1:-1])
    classes[...] = np.where(np.arange(classes.size).reshape(classes.shape) == 1, -1, classes)
    attrs = batched.logit_attrs(stack, classes[None], pos_slice=pos_slice, incorrect=0)
    single_attrs = single.logit_attrs(single_stack, classes, pos_slice=pos_slice, incorrect=0)
    assert single_attrs.shape == single_stack.shape[:-1]
    np.testing.assert_array_equal(single_attrs, off(attrs))


def test_mlp_input_and_incl_mid(mlp_model):
    _, _, batched, _, single = both_caches(mlp_model)
    for method, kwargs in [("decompose_resid", {"layer": 1, "mlp_input": True}),
                           ("accumulated_resid", {"incl_mid": True})]:
        want, _ = getattr(batched, method)(**kwargs)
        got, _ = getattr(single, method)(**kwargs)
        assert np.array_equal(got, want[:, 0]), method
    stack, _ = single.decompose_resid(layer=1, mlp_input=True)
    assert np.array_equal(single.apply_ln_to_stack(stack, layer=1, mlp_input=True),
                          batched.apply_ln_to_stack(stack[:, None], layer=1, mlp_input=True)[:, 0])
    # A stack with the batch axis does not fit a cache without it: named, not broadcast.
    with pytest.raises(ValueError, match=re.escape("does not fit the cache's [components, 6, 16]")):
        single.apply_ln_to_stack(batched.decompose_resid()[0])


def test_a_batch_of_more_than_one_is_refused_naming_its_size(mlp_model):
    tokens = random_tokens(mlp_model, batch=3, seq_len=5)
    with pytest.raises(ValueError, match=re.escape("remove_batch_dim=True takes a batch of one sequence, got a "
                                                   "batch of 3")):
        mlp_model.run_with_cache(tokens, remove_batch_dim=True)
    _, cache = mlp_model.run_with_cache(tokens)
    with pytest.raises(ValueError, match=re.escape("remove_batch_dim: the cache holds a batch of 3")):
        cache.remove_batch_dim()
    assert cache.has_batch_dim and cache["hook_embed"].shape == (3, 5, 16)  # left as it was


def test_remove_batch_dim_in_place_once_and_pickled(mlp_model):
    tokens = random_tokens(mlp_model, batch=1, seq_len=5)
    _, cache = mlp_model.run_with_cache(tokens)
    assert cache.remove_batch_dim() is cache and not cache.has_batch_dim
    assert cache["hook_embed"].shape == (5, 16)
    with pytest.warns(UserWarning, match="no batch axis already"):
        assert cache.remove_batch_dim() is cache
    assert cache["hook_embed"].shape == (5, 16)
    again = pickle.loads(pickle.dumps(cache))
    assert not again.has_batch_dim and np.array_equal(again.accumulated_resid()[0], cache.accumulated_resid()[0])
