"""Bad input raises the right Python exception, with a message that says what fits."""
import os
import resource
import subprocess
import sys

import numpy as np
import pytest

import headlab
from conftest import BUILD, random_tokens


def test_unknown_hook_names_are_key_errors_naming_the_nearest(mlp_model):
    tokens = random_tokens(mlp_model, batch=1)
    with pytest.raises(KeyError, match="blocks.0.attn.hook_pattern"):
        mlp_model.run_with_cache(tokens, names=["blocks.0.attn.hook_patern"])
    with pytest.raises(KeyError, match="blocks.1.hook_resid_post"):
        mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.hook_resid_pots", lambda a, n: None)])
    with pytest.raises(KeyError, match="hook_names"):
        mlp_model.gradients(tokens, tokens % 8, ["nothing.like.it"])


def test_tokens_out_of_range_name_the_value_and_the_vocabulary(mlp_model):
    vocab = mlp_model.spec["vocab"]
    tokens = random_tokens(mlp_model, batch=2)
    tokens[1, 3] = vocab + 5
    with pytest.raises(ValueError, match=rf"id {vocab + 5} at \[1, 3\] is outside the vocabulary \[0, {vocab}\)"):
        mlp_model(tokens)
    with pytest.raises(ValueError, match=r"id -1 at \[0, 0\]"):
        mlp_model([[-1, 0, 1]])
    with pytest.raises(ValueError, match="at most"):
        mlp_model(np.zeros((1, mlp_model.spec["max_seq_len"] + 1), dtype=int))


def test_tokens_of_the_wrong_shape_or_dtype(mlp_model):
    with pytest.raises(ValueError, match="integer ids, got dtype float64"):
        mlp_model(np.zeros((1, 4)))
    with pytest.raises(ValueError, match=r"shape \[batch, seq_len\], got \[1, 2, 3\]"):
        mlp_model(np.zeros((1, 2, 3), dtype=int))
    with pytest.raises(ValueError, match=r"tokens\[1\]: None at \[0\] is not an integer id"):
        mlp_model([[1, 2], [None]])  # rows of different lengths are padded, each checked
    with pytest.raises(ValueError, match=r"lengths: 7 at \[0\] is not in \[1, 6\]"):
        mlp_model(np.zeros((1, 6), dtype=int), lengths=[7])
    with pytest.raises(ValueError, match="at least one"):
        mlp_model(np.zeros((0, 4), dtype=int))


def test_targets_checked(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    with pytest.raises(ValueError, match=r"expected shape \[2, 6\]"):
        mlp_model.gradients(tokens, tokens[:1], ["hook_embed"])
    bad = tokens.copy()
    bad[0, 0] = 1000
    with pytest.raises(ValueError, match="class 1000"):
        headlab.analyze(mlp_model, tokens, bad)
    with pytest.raises(ValueError, match="give targets"):
        headlab.analyze(mlp_model, tokens)  # its classes are not its tokens


def test_a_hook_returning_the_wrong_shape_names_the_expected_one(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    expected = r"\[2, 6, 2, 8\]"
    with pytest.raises(ValueError, match=expected):
        mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", lambda z, n: z[:, :, :1])])
    with pytest.raises(ValueError, match=expected):
        mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", lambda z, n: "zero")])
    with pytest.raises(ValueError, match="float array"):
        mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", lambda z, n: z.astype(str))])


def test_a_hook_returning_whole_numbers_is_refused_naming_the_point_and_dtype(mlp_model):
    # An int or bool array in place of an activation is almost surely a bug: refused, never cast.
    tokens = random_tokens(mlp_model, batch=2)
    name = "blocks.0.attn.hook_z"
    for dtype in (np.int64, np.int32, np.uint8, np.bool_):
        with pytest.raises(ValueError, match=rf"the hook at {name} returned values of dtype "
                                             rf"{np.dtype(dtype)}; .*\.astype\(np\.float32\).*\.float\(\)"):
            mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, lambda z, n: np.ones(z.shape, dtype=dtype))])
    # Also first of several hooks at one point: the next one never receives whole numbers.
    seen = []
    with pytest.raises(ValueError, match="dtype int64"):
        mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, lambda z, n: np.zeros(z.shape, dtype=np.int64)),
                                                    (name, lambda z, n: seen.append(z.dtype))])
    assert seen == []
    # Floats of another width are the model's dtype once cast: the same logits.
    as_f64 = mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, lambda z, n: np.ones(z.shape, dtype=np.float64))])
    as_f32 = mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, lambda z, n: np.ones(z.shape, dtype=np.float32))])
    np.testing.assert_array_equal(as_f64, as_f32)


def test_a_hook_returning_nan_or_infinity_is_refused_naming_the_point(mlp_model):
    # QA20 F13.8: NaN handed on poisons every later activation, the logits and the loss, silently.
    tokens = random_tokens(mlp_model, batch=2)
    name = "blocks.0.hook_resid_mid"

    def poison(value):
        def hook(x, n):
            x[1, 2, 3] = value
            return x
        return hook

    for value in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match=rf"hook '{name}' returned 1 NaN or infinite value of 192 "
                                             r"\(the first at \[1, 2, 3\]\).*return finite values"):
            mlp_model.run_with_hooks(tokens, fwd_hooks=[(name, poison(value))])
    # -inf at the attention scores hides a key, as the causal mask does: taken, and the pattern gives it nothing.
    scores = "blocks.1.attn.hook_attn_scores"

    def hide(x, n):
        x[:, :, 3, 1] = -np.inf
        return x

    logits, cache = mlp_model.run_with_cache(tokens, names=["blocks.1.attn.hook_pattern"], fwd_hooks=[(scores, hide)])
    assert np.isfinite(logits).all() and (cache["blocks.1.attn.hook_pattern"][:, :, 3, 1] == 0).all()
    def hide_all(x, n):
        x[1, 0, 2, :] = -np.inf
        return x

    with pytest.raises(ValueError, match=r"hide every key of query \[1, 0, 2\]"):
        mlp_model.run_with_hooks(tokens, fwd_hooks=[(scores, hide_all)])
    # The model still works afterwards.
    assert np.isfinite(mlp_model(tokens)).all()


def test_an_exception_in_a_hook_reaches_the_caller(mlp_model):
    class Mine(Exception):
        pass

    def fails(activation, name):
        raise Mine("from the hook")

    with pytest.raises(Mine, match="from the hook"):
        mlp_model.run_with_hooks(random_tokens(mlp_model, batch=1), fwd_hooks=[("blocks.1.hook_mlp_out", fails)])
    # The model still works afterwards.
    assert mlp_model(random_tokens(mlp_model, batch=1)).shape[0] == 1


def test_bad_paths_and_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run folder or checkpoint"):
        headlab.load(tmp_path / "missing.safetensors")
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        headlab.load(tmp_path)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError):
        headlab.load(junk)


def test_a_run_still_training_before_its_first_checkpoint_is_said_to_be_one(tmp_path):
    # QA19 F7: not "a folder without checkpoint.safetensors (not a run folder)".
    import subprocess
    import time

    from conftest import HEADLAB, MLP_FLAGS

    live = tmp_path / "live"
    flags = [f for f in MLP_FLAGS]
    flags[flags.index("--steps") + 1] = "100000"
    child = subprocess.Popen([str(HEADLAB), "train", *flags, "--out", str(live)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (live / "metrics.jsonl").exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.poll() is None
        said = rf"{live} is a run still training \(PID {child.pid} holds its train.lock\).*until its last step, 100000"
        with pytest.raises(FileNotFoundError, match=said):
            headlab.load(live)
        with pytest.raises(FileNotFoundError, match=said):
            headlab.Run(live).model()
    finally:
        child.kill()
        child.wait()
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        headlab.load(live)


def test_analyze_options_are_checked_not_coerced(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    targets = tokens % mlp_model.spec["classes"]
    for bad in (0, -1):
        with pytest.raises(ValueError, match=rf"importance_examples must be >= 1 .*got {bad}"):
            headlab.analyze(mlp_model, tokens, targets, importance_examples=bad)
    with pytest.raises(TypeError, match="importance_examples must be an int .*'4'"):
        headlab.analyze(mlp_model, tokens, targets, importance_examples="4")
    with pytest.raises(TypeError, match=r"example must be an int .*1\.7"):
        headlab.analyze(mlp_model, tokens, targets, example=1.7)
    with pytest.raises(ValueError, match=r"example must be in \[0, 1\] .*got 2"):
        headlab.analyze(mlp_model, tokens, targets, example=2)
    with pytest.raises(TypeError, match="pruning must be True or False, got 'no'"):
        headlab.analyze(mlp_model, tokens, targets, pruning="no")
    with pytest.raises(ValueError, match="analyze needs seq_len >= 3.*got 2"):
        headlab.analyze(mlp_model, tokens[:, :2], targets[:, :2])
    corrupted = tokens.copy()
    corrupted[1, 2] = 1000
    with pytest.raises(ValueError, match=r"^corrupted: id 1000 at \[1, 2\]"):
        headlab.analyze(mlp_model, tokens, targets, corrupted=corrupted)


def test_no_target_at_all_is_an_error_not_zeros(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    none = np.full_like(tokens, -1)
    with pytest.raises(ValueError, match="every entry is -1"):
        mlp_model.gradients(tokens, none, ["hook_embed"])
    with pytest.raises(ValueError, match="every entry is -1"):
        headlab.analyze(mlp_model, tokens, none)
    with pytest.raises(ValueError, match="give targets="):
        mlp_model.gradients(tokens, None, ["hook_embed"])


def test_token_entries_that_are_not_ids_are_named(mlp_model):
    with pytest.raises(ValueError, match=r"None at \[0, 0\] is not an integer id"):
        mlp_model([[None, 1]])
    with pytest.raises(ValueError, match=rf"{2**70} at \[0, 1\] does not fit in an int64"):
        mlp_model([[1, 2**70]])
    with pytest.raises(ValueError, match="or a list of lists, got dict"):
        mlp_model({1: 2})


def test_gradients_take_a_predicate_as_run_with_cache_does(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    targets = tokens % mlp_model.spec["classes"]
    by_predicate = mlp_model.gradients(tokens, targets, lambda n: n.endswith("hook_resid_post"))
    assert sorted(by_predicate) == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    by_name = mlp_model.gradients(tokens, targets, ["blocks.1.hook_resid_post"])
    np.testing.assert_array_equal(by_predicate["blocks.1.hook_resid_post"], by_name["blocks.1.hook_resid_post"])


def test_model_of_something_else_points_to_load():
    with pytest.raises(TypeError, match=r"headlab.load\(path\)"):
        headlab.Model(None)


def test_a_float_torch_tensor_as_tokens_is_refused_by_headlab_not_by_torch(mlp_model):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="tokens: expected integer ids, got dtype float32"):
        mlp_model(torch.ones((1, 3), requires_grad=True))  # np.asarray of it raises torch's RuntimeError
    np.testing.assert_array_equal(mlp_model(torch.tensor([[1, 2, 3]])), mlp_model([[1, 2, 3]]))
    with pytest.raises(ValueError, match="lengths: expected integer lengths, got dtype float64"):
        mlp_model(np.zeros((2, 3), dtype=int), lengths=[3.0, 2.0])


def test_a_hook_returning_a_masked_array_is_refused(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)

    def masked(z, hook):
        return np.ma.masked_array(np.zeros_like(z), mask=np.ones(z.shape, dtype=bool))

    with pytest.raises(TypeError, match=r"the hook at blocks.0.attn.hook_z returned a masked array.*\.filled"):
        mlp_model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", masked)])


def test_loading_a_device_or_a_fifo_is_refused_before_any_read(tmp_path):
    # A link to /dev/zero was read without end (4 GB in 4 s) and a FIFO waited on; the CLI's
    # loader refuses both. In a child process with bounded memory and time, so that a
    # regression fails the test rather than the machine.
    os.symlink("/dev/zero", tmp_path / "zero.safetensors")
    os.mkfifo(tmp_path / "fifo.safetensors")
    script = ("import headlab\n"
              "for p in ('zero.safetensors', 'fifo.safetensors'):\n"
              "    try:\n"
              "        headlab.load(p)\n"
              "    except ValueError as e:\n"
              "        print(e)\n")

    def bounded():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          preexec_fn=bounded, env={**os.environ, "PYTHONPATH": str(BUILD / "python")})
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    for line, name in zip(lines, ("zero", "fifo")):
        assert f"checkpoint {name}.safetensors is not a regular file (a pipe or a device)" in line


@pytest.mark.filterwarnings("ignore:.*targets default to the next token")  # next-token targets on purpose
def test_a_mask_of_numbers_says_to_make_it_boolean(attn_model):
    tokens = random_tokens(attn_model)
    T = tokens.shape[1]
    # np.tril(np.ones(...)) is float64: the first mask most people write.
    for mask, dtype in ((np.tril(np.ones((T, T))), "float64"), (np.eye(T, dtype=int), "int64")):
        with pytest.raises(TypeError, match=rf"patterns\['x'\]: a mask of dtype {dtype}.*\.astype\(bool\)"):
            headlab.analyze(attn_model, tokens, patterns={"x": mask}, pruning=False)
    torch = pytest.importorskip("torch")
    # A torch mask is read as its numpy array, as tokens are.
    mask = np.zeros((T, T), dtype=bool)
    mask[np.arange(1, T), np.arange(T - 1)] = True
    ours = headlab.analyze(attn_model, tokens, patterns={"x": torch.from_numpy(mask)}, pruning=False)
    numpy = headlab.analyze(attn_model, tokens, patterns={"x": mask}, pruning=False)
    assert [h["scores"]["user"] for h in ours["heads"]] == [h["scores"]["user"] for h in numpy["heads"]]


def test_lengths_that_are_no_list_of_lengths_say_so(mlp_model):
    tokens = random_tokens(mlp_model, batch=2)
    for lengths in (3, [[3, 6]]):
        with pytest.raises(ValueError, match=r"lengths: expected one length per sequence \(2\)"):
            mlp_model(tokens, lengths=lengths)


def test_an_input_without_a_token_says_what_was_passed(mlp_model):
    # model([]) once said "got shape [1, 0]": the empty list, made a batch of
    # one, was reported as a shape the user never passed.
    for empty in ([], (), np.array([], dtype=np.int64)):
        with pytest.raises(ValueError, match=r"tokens: got an empty (list|tuple|sequence) \(shape \[0\]\): no "
                                             r"sequence, no token; pass at least one sequence"):
            mlp_model(empty)
    with pytest.raises(ValueError, match=r"tokens: got 1 sequence of no token \(shape \[1, 0\]\)"):
        mlp_model([[]])
    with pytest.raises(ValueError, match=r"tokens: got 3 sequences of no token \(shape \[3, 0\]\)"):
        mlp_model.run_with_cache(np.zeros((3, 0), dtype=int))
    with pytest.raises(ValueError, match=r"tokens: got no sequence \(shape \[0, 4\]\)"):
        mlp_model(np.zeros((0, 4), dtype=int))
    with pytest.raises(ValueError, match=r"tokens\[1\]: an empty sequence; every sequence needs at least one token"):
        mlp_model([[1, 2], []])
