"""Loading, parameters, the forward pass and to_torch."""
import json

import numpy as np
import pytest

import headlab
from conftest import random_tokens


def test_load_takes_a_run_folder_or_its_checkpoint(mlp_run, mlp_model):
    from_file = headlab.load(mlp_run / "checkpoint.safetensors")
    assert from_file.spec == mlp_model.spec
    assert list(from_file.params) == list(mlp_model.params)
    for name, value in mlp_model.params.items():
        np.testing.assert_array_equal(from_file.params[name], value)


def test_spec_and_config_are_the_checkpoints(mlp_run, mlp_model):
    spec = mlp_model.spec
    assert (spec["layers"], spec["heads"], spec["d_model"], spec["d_ff"]) == (2, 2, 16, 64)
    assert spec["attn_only"] is False and spec["layernorm"] is True
    config = json.loads((mlp_run / "config.json").read_text())
    assert mlp_model.config["seed"] == config["seed"] == 3
    assert mlp_model.step == 6


def test_an_attention_only_spec_shows_no_mlp(attn_run, attn_model, mlp_model):
    # The checkpoint keeps d_ff and activation for its readers; the model has no MLP to use them.
    assert attn_model.spec["attn_only"] is True
    assert attn_model.spec["d_ff"] is None and attn_model.spec["activation"] is None
    assert mlp_model.spec["d_ff"] == 64 and mlp_model.spec["activation"] == "gelu"
    assert attn_model.config["d-ff"] == json.loads((attn_run / "config.json").read_text())["d-ff"] == 0
    assert "d_ff" not in repr(attn_model) and "attn-only" in repr(attn_model)


def test_params_have_the_documented_names_and_shapes(mlp_model):
    d, V, C, T = 16, mlp_model.spec["vocab"], mlp_model.spec["classes"], mlp_model.spec["max_seq_len"]
    params = mlp_model.params
    assert list(params)[:4] == ["tok_emb.weight", "pos_emb.weight", "blocks.0.ln1.weight", "blocks.0.ln1.bias"]
    assert params["tok_emb.weight"].shape == (V, d)
    assert params["pos_emb.weight"].shape == (T, d)
    assert params["blocks.1.mlp.fc1.weight"].shape == (64, d)
    assert params["head.weight"].shape == (C, d)
    assert params["head.weight"].dtype == np.float32
    with pytest.raises(ValueError):
        params["head.bias"][0] = 1.0  # read-only: the model's weights never change


def test_forward_takes_arrays_and_lists_alike(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    logits = mlp_model(tokens)
    assert logits.shape == (2, tokens.shape[1], mlp_model.spec["classes"])
    np.testing.assert_array_equal(mlp_model(tokens.tolist()), logits)
    np.testing.assert_array_equal(mlp_model(tokens.astype(np.uint8)), logits)
    # One sequence is a batch of one; rows are independent of each other.
    np.testing.assert_allclose(mlp_model(tokens[1]), logits[1:2], atol=1e-6)


def test_sequences_of_different_lengths_run_padded_and_masked(mlp_model, tmp_path):
    from conftest import cli

    cli("train", "--task", "first-prev-pair", "--bidirectional", "--d-model", "16", "--steps", "2", "--batch", "8",
        "--threads", "1", "--out", tmp_path / "bi")
    for model in (mlp_model, headlab.load(tmp_path / "bi")):
        rows = [[1, 2, 3], [4, 5, 6, 7, 0, 1], [2, 2, 2, 2]]
        logits = model(rows)
        _, cache = model.run_with_cache(rows, ["blocks.0.attn.hook_pattern"])
        pattern = cache["blocks.0.attn.hook_pattern"]
        for b, row in enumerate(rows):
            n = len(row)
            alone = model([row])
            # Each row's real positions are what the row alone gives: no query attends to padding,
            # whether the model is causal or not.
            np.testing.assert_allclose(logits[b, :n], alone[0], atol=1e-6)
            assert np.all(pattern[b, :, :n, n:] == 0)
        # What the padding holds changes nothing; `lengths` marks the real tokens of an array.
        grid = np.array([[1, 2, 3, 7, 7, 7], [4, 5, 6, 7, 0, 1], [2, 2, 2, 2, 5, 5]])
        np.testing.assert_array_equal(model(grid, lengths=[3, 6, 4])[0, :3], logits[0, :3])
        try:  # the PyTorch twin takes the same lengths
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            with torch.no_grad():
                twin = model.to_torch()(torch.from_numpy(grid), lengths=[3, 6, 4]).numpy()
            for b, n in enumerate([3, 6, 4]):
                np.testing.assert_allclose(twin[b, :n], logits[b, :n], atol=1e-5)
        targets = [[1, 0, 1], [0, 1, 0, 1, 0, 1], [1, 1, 1, 1]]
        grads = model.gradients(rows, targets, ["hook_embed"])["hook_embed"]
        assert np.all(grads[0, 3:] == 0) and np.any(grads[0, :3] != 0)  # padding is no input to the loss
    # Unmasked, the bidirectional model's first row reads its padding: the mask is what differs.
    assert not np.allclose(model(grid)[0, :3], logits[0, :3], atol=1e-6)


def test_to_torch_reproduces_the_logits(mlp_model, attn_model):
    torch = pytest.importorskip("torch")
    for model in (mlp_model, attn_model):
        module = model.to_torch()
        assert isinstance(module, torch.nn.Module)
        assert set(module.state_dict()) == set(model.params)
        tokens = random_tokens(model, batch=4)
        with torch.no_grad():
            ours = module(torch.from_numpy(tokens)).numpy()
        np.testing.assert_allclose(ours, model(tokens), atol=1e-5, rtol=0)


def test_the_torch_module_takes_what_the_model_takes(mlp_model):
    torch = pytest.importorskip("torch")
    module = mlp_model.to_torch()
    sequence = random_tokens(mlp_model, batch=1)[0]
    with torch.no_grad():
        np.testing.assert_allclose(module(torch.from_numpy(sequence)).numpy(), mlp_model(sequence), atol=1e-5)
    vocab, T = mlp_model.spec["vocab"], mlp_model.spec["max_seq_len"]
    with pytest.raises(ValueError, match=rf"{T + 1} positions, but the model reads at most {T}"):
        module(torch.zeros(1, T + 1, dtype=torch.long))
    with pytest.raises(ValueError, match=rf"id {vocab} at \[0, 1\] is outside the vocabulary \[0, {vocab}\)"):
        module(torch.tensor([[0, vocab]]))
    with pytest.raises(ValueError, match=r"expected shape \[batch, seq_len\], got \[1, 2, 3\]"):
        module(torch.zeros(1, 2, 3, dtype=torch.long))
