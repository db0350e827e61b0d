"""The threads a model's calls run on: by default the count `headlab analyze`
picks for its run (1 for these toy models), set for the calling thread only
and for the call only; headlab.set_num_threads(n) chooses one for the session."""
import threading

import numpy as np
import pytest

import headlab
from headlab import _core
from conftest import random_tokens


def threads_in_hooks(model, tokens):
    """The OpenMP thread count on the calling thread during a forward and a gradient pass."""
    seen = []

    def hook(x, hook):
        seen.append(_core.active_threads())

    model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", hook)])
    model.gradients(tokens, names=["hook_embed"], grad_logits=np.ones(model(tokens).shape, np.float32),
                    fwd_hooks=[("hook_embed", hook)])
    return seen


def test_a_toy_model_runs_on_one_thread_and_the_count_comes_back(attn_model):
    tokens = random_tokens(attn_model)
    assert headlab.get_num_threads() == 0 and attn_model.threads == 1  # far below 10 GFLOP per training step
    before = _core.active_threads()
    assert threads_in_hooks(attn_model, tokens) == [1, 1]
    assert _core.active_threads() == before


def test_set_num_threads_chooses_the_count_of_every_call(attn_model):
    tokens = random_tokens(attn_model)
    cores = _core.hardware_threads()
    one = attn_model(tokens)
    try:
        headlab.set_num_threads(cores)
        assert headlab.get_num_threads() == cores and attn_model.threads == cores
        assert threads_in_hooks(attn_model, tokens) == [cores, cores]
        np.testing.assert_allclose(attn_model(tokens), one, rtol=0, atol=1e-5)
    finally:
        headlab.set_num_threads(0)
    assert attn_model.threads == 1
    for bad in (-1, cores + 1):
        with pytest.raises(ValueError, match=rf"set_num_threads: {bad} is not in \[0, {cores}\]"):
            headlab.set_num_threads(bad)
    for bad in (1.5, True, "2", None):
        with pytest.raises(TypeError, match="set_num_threads: n is an int"):
            headlab.set_num_threads(bad)
    assert headlab.get_num_threads() == 0


def test_a_call_on_another_thread_leaves_this_thread_s_count(attn_model):
    tokens = random_tokens(attn_model)
    before = _core.active_threads()
    seen = []
    worker = threading.Thread(target=lambda: seen.extend(threads_in_hooks(attn_model, tokens)))
    worker.start()
    worker.join()
    assert seen == [1, 1] and _core.active_threads() == before
