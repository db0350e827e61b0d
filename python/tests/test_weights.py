"""Weights from Python: Model.with_params (edit, import from torch),
Model.save and what reads it back (headlab.load, `headlab analyze`,
`headlab eval`), and the inputs they refuse."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import headlab
from conftest import HEADLAB, cli, cross_entropy, random_tokens

FAST = dict(pruning=False, importance_examples=1)
O = "blocks.1.attn.o.weight"


def zero_head_columns(model, layer, h):
    """attn.o.weight with head h's columns (its d_k inputs) zeroed: docs/model.md's layout."""
    d_k = model.spec["d_model"] // model.spec["heads"]
    w = model.params[f"blocks.{layer}.attn.o.weight"].copy()
    w[:, h * d_k:(h + 1) * d_k] = 0
    return w


def fnv1a(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_identity_changes_no_bit(mlp_model):
    same = mlp_model.with_params(mlp_model.params)
    tokens = random_tokens(mlp_model, batch=4)
    assert same(tokens).tobytes() == mlp_model(tokens).tobytes()
    assert same.edited["replaced"] == []
    assert same.path is None and mlp_model.path is not None


def test_zeroing_a_heads_columns_of_o_is_zeroing_its_z(mlp_model):
    tokens = random_tokens(mlp_model, batch=4, seed=2)
    for h in range(mlp_model.spec["heads"]):
        edited = mlp_model.with_params({O: zero_head_columns(mlp_model, 1, h)})

        def zero(z, name, h=h):
            z[:, :, h, :] = 0

        hooked = mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", zero)])
        np.testing.assert_allclose(edited(tokens), hooked, atol=1e-6)
        assert not np.allclose(edited(tokens), mlp_model(tokens), atol=1e-4)  # the edit did something
        assert edited.edited["replaced"] == [O]


def test_zeroing_a_heads_columns_is_the_analysis_zero_ablation(attn_model):
    tokens = random_tokens(attn_model, batch=8, seed=5)
    targets = np.where(np.arange(tokens.shape[1]) % 2 == 1, np.roll(tokens, -1, axis=1), -1)
    targets[:, -1] = -1
    records = headlab.analyze(attn_model, tokens, targets, **FAST)
    clean = cross_entropy(attn_model(tokens), targets)
    for head in records["heads"]:
        layer, h = head["layer"], head["head"]
        edited = attn_model.with_params({f"blocks.{layer}.attn.o.weight": zero_head_columns(attn_model, layer, h)})
        assert cross_entropy(edited(tokens), targets) - clean == pytest.approx(head["ablation_delta_loss"], abs=1e-5)


def test_the_original_is_unchanged_and_the_callers_array_is_copied(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    before = mlp_model(tokens).copy()
    w = zero_head_columns(mlp_model, 1, 0)
    edited = mlp_model.with_params({O: w})
    after_edit = edited(tokens).copy()
    np.testing.assert_array_equal(mlp_model(tokens), before)
    assert not np.array_equal(mlp_model.params[O], w)
    w[:] = 1.0  # the caller's array, changed afterwards
    np.testing.assert_array_equal(edited(tokens), after_edit)
    np.testing.assert_array_equal(edited.params[O], zero_head_columns(mlp_model, 1, 0))
    assert not np.shares_memory(edited.params[O], w)


def test_float64_is_rounded_to_float32(mlp_model):
    w = np.random.default_rng(0).normal(0, 0.02, mlp_model.params[O].shape)  # float64, most not float32 values
    assert (w.astype(np.float32).astype(np.float64) != w).all()
    edited = mlp_model.with_params({O: w})
    assert edited.params[O].dtype == np.float32
    np.testing.assert_array_equal(edited.params[O], w.astype(np.float32))  # to nearest, as numpy rounds
    f16 = mlp_model.with_params({O: w.astype(np.float16)})
    np.testing.assert_array_equal(f16.params[O], w.astype(np.float16).astype(np.float32))


def test_everything_runs_on_an_edited_model(mlp_model):
    edited = mlp_model.with_params({O: zero_head_columns(mlp_model, 1, 1)})
    tokens = random_tokens(mlp_model, batch=2)
    logits, cache = edited.run_with_cache(tokens, names=["blocks.1.hook_attn_out"])
    np.testing.assert_array_equal(logits, edited(tokens))
    batch = edited.task_batch()  # the source run's batch: the edit changes no task
    grads = edited.gradients(batch["tokens"], batch["targets"], ["blocks.1.hook_resid_post"])
    assert np.isfinite(grads["blocks.1.hook_resid_post"]).all()
    records = headlab.analyze(edited, **batch, **FAST)
    assert records["loss"] == pytest.approx(cross_entropy(edited(batch["tokens"]), batch["targets"]), abs=1e-5)
    def zero(z, name):
        z[:, :, 0, :] = 0

    both = edited.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", zero)])  # head 0 too, by a hook
    np.testing.assert_allclose(both, mlp_model.with_params({O: np.zeros_like(mlp_model.params[O])})(tokens), atol=1e-6)
    assert "edited from" in repr(edited)
    try:
        import torch
    except ImportError:
        return
    with torch.no_grad():
        np.testing.assert_allclose(edited.to_torch()(torch.as_tensor(tokens)).numpy(), edited(tokens), atol=1e-5)


def test_torch_round_trip(mlp_model):
    torch = pytest.importorskip("torch")
    module = mlp_model.to_torch()
    back = mlp_model.with_params(module.state_dict())
    tokens = random_tokens(mlp_model, batch=3)
    assert back(tokens).tobytes() == mlp_model(tokens).tobytes()  # bitwise, float32
    with torch.no_grad():
        module.blocks[0].attn.q.weight.mul_(0.5)
        module.head.bias.add_(0.25)
    edited = mlp_model.with_params(module.state_dict())
    assert edited.edited["replaced"] == ["blocks.0.attn.q.weight", "head.bias"]
    with torch.no_grad():
        expected = module(torch.as_tensor(tokens)).numpy()
    np.testing.assert_allclose(edited(tokens), expected, atol=1e-5)
    with pytest.raises(TypeError, match=r"'head.bias' is a torch tensor of dtype torch.bfloat16.*\.float\(\)"):
        mlp_model.with_params({"head.bias": module.head.bias.detach().to(torch.bfloat16)})


def test_save_and_load_give_the_same_model_and_its_provenance(attn_model, attn_run, tmp_path):
    edited = attn_model.with_params({O: zero_head_columns(attn_model, 1, 0)})
    path = tmp_path / "edited.safetensors"
    edited.save(path)
    loaded = headlab.load(path)
    assert loaded.path == str(path)
    for name, value in edited.params.items():
        assert loaded.params[name].tobytes() == value.tobytes(), name
    tokens = random_tokens(attn_model, batch=3)
    assert loaded(tokens).tobytes() == edited(tokens).tobytes()
    source = os.fspath(attn_run / "checkpoint.safetensors")
    record = loaded.edited
    assert record == edited.edited
    assert record["replaced"] == [O]
    assert record["source"]["path"] == source and record["source"]["step"] == attn_model.step
    assert record["source"]["size"] == os.path.getsize(source)
    assert record["source"]["hash"] == fnv1a(open(source, "rb").read())  # as --init records
    assert (loaded.step, loaded.task, loaded.config) == (attn_model.step, attn_model.task, attn_model.config)
    # An edit of the saved edit keeps the chain.
    again = loaded.with_params({"head.bias": np.zeros_like(loaded.params["head.bias"])})
    assert again.edited["source"]["path"] == str(path)
    assert again.edited["source"]["edited"] == record


def test_the_cli_reads_a_saved_edit(attn_model, tmp_path):
    # A bias towards class 0 too: this short run's heads move its loss by little.
    bias = attn_model.params["head.bias"].copy()
    bias[0] += 3
    edited = attn_model.with_params({O: zero_head_columns(attn_model, 1, 1), "head.bias": bias})
    path = tmp_path / "edit" / "edited.safetensors"
    path.parent.mkdir()
    edited.save(path)
    batch = edited.task_batch()
    records = headlab.analyze(edited, **batch)
    heads = json.loads(cli("analyze", path, "--json", "--threads", "1"))
    assert heads["loss"] == pytest.approx(records["loss"], abs=1e-5)
    for mine, theirs in zip(records["heads"], heads["heads"]):
        assert theirs["ablation_delta_loss"] == pytest.approx(mine["ablation_delta_loss"], abs=1e-5)
        assert theirs["scores"]["previous_token"] == pytest.approx(mine["scores"]["previous_token"], abs=1e-6)
    # Beside the checkpoint, in a folder named after it, and saying it is an edit of which file.
    saved = json.loads((path.parent / "edited" / "heads.json").read_text())
    assert saved["edited"] == heads["edited"] == records["edited"] == edited.edited
    assert saved["checkpoint"] == heads["checkpoint"] == str(path)
    report = (path.parent / "edited" / "report.html").read_text()
    assert f"{O}, head.bias replaced from Python" in report
    assert "<title>edit/edited.safetensors · induction · headlab</title>" in report
    scored = json.loads(cli("eval", path, "--json", "--threads", "1"))
    assert scored["loss"] == pytest.approx(cross_entropy(edited(batch["tokens"]), batch["targets"]), abs=1e-5)
    # ... and they are not the source's numbers.
    assert scored["loss"] != pytest.approx(cross_entropy(attn_model(batch["tokens"]), batch["targets"]), abs=1e-2)


def test_a_saved_edit_copied_over_a_runs_checkpoint_is_not_taken_for_the_runs(attn_model, attn_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(attn_run, run)
    edited = attn_model.with_params({O: zero_head_columns(attn_model, 1, 1)})
    edited.save(tmp_path / "edited.safetensors")
    shutil.copyfile(tmp_path / "edited.safetensors", run / "checkpoint.safetensors")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    for args in (["eval", run], ["analyze", run], ["train", "--resume", run, "--steps", "9"]):
        done = subprocess.run([str(HEADLAB), *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 2, (args, done.stderr)
        assert "edited from Python (blocks.1.attn.o.weight replaced)" in done.stderr, done.stderr
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_bad_params_are_refused_naming_the_parameter(mlp_model):
    w = mlp_model.params[O]
    with pytest.raises(KeyError, match=r"no parameter \"blocks.1.attn.o.weigth\" \(nearest: blocks.1.attn.o.weight"):
        mlp_model.with_params({"blocks.1.attn.o.weigth": w})
    with pytest.raises(KeyError, match=r"with_tl_params.*W_O\[h\] is columns h\*d_k"):
        mlp_model.with_params({"blocks.1.attn.W_O": w})
    with pytest.raises(ValueError, match=rf"\"{O}\" has shape \[16, 8\], the model's is \[16, 16\]"):
        mlp_model.with_params({O: w[:, :8]})
    for bad in (w.astype(np.int64), w > 0, w.astype(np.complex64), np.array([["x"] * 16] * 16)):
        with pytest.raises(TypeError, match=rf"\"{O}\" has dtype {bad.dtype}.*float32 or float64"):
            mlp_model.with_params({O: bad})
    for value, text in ((np.nan, "NaN"), (np.inf, r"\+inf"), (1e39, r"1e\+39, beyond float32's range")):
        nan = w.astype(np.float64)
        nan[3, 5] = value
        with pytest.raises(ValueError, match=rf"\"{O}\" holds {text}.* at \[3, 5\]"):
            mlp_model.with_params({O: nan})
    with pytest.raises(TypeError, match="dict name -> array"):
        mlp_model.with_params([(O, w)])
    with pytest.raises(TypeError, match="parameter names are strings"):
        mlp_model.with_params({3: w})


def test_a_masked_or_wider_array_is_refused_naming_the_parameter(mlp_model):
    w = mlp_model.params[O]
    masked = np.ma.masked_array(w, mask=w > 0)
    with pytest.raises(TypeError, match=rf"\"{O}\" is a numpy masked array.*\.filled\(x\).*\.data"):
        mlp_model.with_params({O: masked})
    np.testing.assert_array_equal(mlp_model.with_params({O: masked.filled(0)}).params[O], np.where(w > 0, 0, w))
    if np.dtype(np.longdouble).itemsize > 8:  # else longdouble is float64 itself
        with pytest.raises(TypeError, match=rf"\"{O}\" has dtype {np.dtype(np.longdouble)}, wider than float64"):
            mlp_model.with_params({O: w.astype(np.longdouble)})
    half = (w / 4).astype(np.float16)  # float16 converts exactly
    np.testing.assert_array_equal(mlp_model.with_params({O: half}).params[O], half.astype(np.float32))


def test_a_meta_or_int_torch_tensor_is_refused_in_torchs_terms(mlp_model):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=rf"'{O}' is a torch meta tensor, which holds no data"):
        mlp_model.with_params({O: torch.empty(tuple(mlp_model.params[O].shape), device="meta")})
    with pytest.raises(TypeError, match=rf"'{O}' is a torch tensor of dtype torch.int64.*convert it with \.float\(\)"):
        mlp_model.with_params({O: torch.zeros(tuple(mlp_model.params[O].shape), dtype=torch.int64)})


def test_save_refuses_what_it_must_not_replace(attn_model, attn_run, tmp_path):
    edited = attn_model.with_params({O: zero_head_columns(attn_model, 1, 0)})
    source = attn_run / "checkpoint.safetensors"
    source_bytes = source.read_bytes()
    run_files = listing(attn_run)
    for model in (edited, attn_model):
        with pytest.raises(ValueError, match="is the checkpoint this model was read from"):
            model.save(source, overwrite=True)
    with pytest.raises(ValueError, match=rf"inside the run folder {attn_run}, whose files are its own run's"):
        edited.save(attn_run / "edited.safetensors")
    assert source.read_bytes() == source_bytes and listing(attn_run) == run_files

    existing = tmp_path / "existing.safetensors"
    existing.write_bytes(b"mine")
    with pytest.raises(FileExistsError, match=r"existing.safetensors exists; pass overwrite=True"):
        edited.save(existing)
    assert existing.read_bytes() == b"mine"
    edited.save(existing, overwrite=True)
    assert headlab.load(existing).edited["replaced"] == [O]

    with pytest.raises(IsADirectoryError, match="is a folder; give a file name"):
        edited.save(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="fifo.*not a regular file"):
        edited.save(fifo, overwrite=True)
    with pytest.raises(FileNotFoundError, match="does not exist; create it first"):
        edited.save(tmp_path / "missing" / "x.safetensors")
    link = tmp_path / "link.safetensors"
    link.symlink_to(existing)
    with pytest.raises(ValueError, match="link.safetensors.*a symbolic link"):
        edited.save(link, overwrite=True)
    assert listing(tmp_path) == ["existing.safetensors", "fifo", "link.safetensors"]


def test_save_refuses_a_runs_snapshots_and_a_sweeps_folder(attn_model, attn_run, tmp_path):
    edited = attn_model.with_params({O: zero_head_columns(attn_model, 1, 0)})
    run = tmp_path / "run"
    (run / "snapshots").mkdir(parents=True)
    (run / "checkpoint.safetensors").write_bytes((attn_run / "checkpoint.safetensors").read_bytes())
    with pytest.raises(ValueError, match=rf"inside the run folder {run}, whose files"):
        edited.save(run / "snapshots" / "step-000003.safetensors")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    with pytest.raises(ValueError, match=rf"inside the sweep folder {sweep}"):
        edited.save(sweep / "edited.safetensors")
    assert listing(run / "snapshots") == [] and listing(sweep) == ["sweep.json"]


def test_save_takes_overwrite_as_a_bool_only(attn_model, tmp_path):
    # overwrite="no" is truthy: it once replaced the file it was told not to.
    existing = tmp_path / "existing.safetensors"
    existing.write_bytes(b"mine")
    for value in ("no", 0, None):
        with pytest.raises(TypeError, match=rf"save: overwrite must be True or False, got {value!r}"):
            attn_model.save(existing, overwrite=value)
    assert existing.read_bytes() == b"mine"


def test_replaced_names_what_differs_from_the_source(attn_model):
    # An edit of an edit that gives a parameter back its source value replaces
    # it no longer: `replaced` lists what differs from the source checkpoint.
    original = attn_model.params[O]
    edited = attn_model.with_params({O: zero_head_columns(attn_model, 1, 0)})
    both = edited.with_params({"blocks.0.attn.o.weight": np.zeros_like(attn_model.params["blocks.0.attn.o.weight"])})
    assert both.edited["replaced"] == [O, "blocks.0.attn.o.weight"]
    back = both.with_params({O: original})
    assert back.edited["replaced"] == ["blocks.0.attn.o.weight"]
    assert edited.with_params({O: original}).edited["replaced"] == []
