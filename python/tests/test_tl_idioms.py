"""What a TransformerLens user types first works the same way: names_filter=,
cache["pattern", 0], hook predicates in fwd_hooks, return_type="loss"; and
next-token defaults warn on a model trained for other targets."""
import warnings

import numpy as np
import pytest

import headlab
from conftest import cli, cross_entropy


@pytest.fixture(scope="module")
def previous_model(tmp_path_factory):
    """A model of the `previous` task: its targets are the token before, not the next one."""
    out = tmp_path_factory.mktemp("runs") / "previous"
    cli("train", "--task", "previous", "--layers", "1", "--heads", "2", "--d-model", "16", "--steps", "6",
        "--batch", "8", "--eval-batch", "8", "--threads", "1", "--out", out)
    return headlab.load(out)


def tokens_of(model, rows=4):
    return np.random.default_rng(0).integers(0, model.spec["vocab"], size=(rows, model.spec["max_seq_len"]))


def test_names_filter_is_names(attn_model):
    tokens = tokens_of(attn_model)
    wanted = lambda name: name.endswith("hook_pattern")  # noqa: E731
    _, ours = attn_model.run_with_cache(tokens, names=wanted)
    _, theirs = attn_model.run_with_cache(tokens, names_filter=wanted)
    assert list(ours) == list(theirs) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    with pytest.raises(TypeError, match="names or names_filter"):
        attn_model.run_with_cache(tokens, names=wanted, names_filter=wanted)


def test_short_names_read_the_cache(mlp_model):
    _, cache = mlp_model.run_with_cache(tokens_of(mlp_model))
    assert cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
    assert cache["resid_post", -1] is cache["blocks.1.hook_resid_post"]
    assert cache["attn", 1] is cache["blocks.1.attn.hook_pattern"]  # TransformerLens's alias
    assert cache["scale"] is cache["ln_final.hook_scale"]
    assert cache["scale", 1, "ln2"] is cache["blocks.1.ln2.hook_scale"]
    assert cache["post", 0] is cache["blocks.0.mlp.hook_post"]
    assert cache["embed",] is cache["embed"] is cache["hook_embed"]
    assert headlab.get_act_name("z", 1) == "blocks.1.attn.hook_z"
    assert headlab.get_act_name("blocks.0.hook_resid_pre") == "blocks.0.hook_resid_pre"
    with pytest.raises(KeyError, match="resid_post"):
        cache["resid_pots", 0]
    with pytest.raises(ValueError, match=r"layer 2 is not in \[-2, 2\)"):
        cache["pattern", 2]
    with pytest.raises(ValueError, match="layer_type 'ln1' or 'ln2'"):
        cache["scale", 0]
    with pytest.raises(ValueError, match="give its layer"):
        cache["pattern",]
    with pytest.raises(ValueError, match="counts from the end"):
        headlab.get_act_name("q", -1)


def test_a_missing_point_says_how_to_cache_it(mlp_model):
    _, cache = mlp_model.run_with_cache(tokens_of(mlp_model), names=["hook_embed"])
    with pytest.raises(KeyError, match="names=None"):
        cache["pattern", 0]


def test_a_predicate_in_fwd_hooks_hooks_every_point_it_accepts(attn_model):
    tokens = tokens_of(attn_model)
    zero = lambda z, name: np.zeros_like(z)  # noqa: E731
    by_name = attn_model.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{l}.attn.hook_z", zero) for l in range(2)])
    by_predicate = attn_model.run_with_hooks(tokens, fwd_hooks=[(lambda name: name.endswith("attn.hook_z"), zero)])
    np.testing.assert_array_equal(by_predicate, by_name)
    assert not np.array_equal(by_name, attn_model(tokens))
    with pytest.raises(ValueError, match="accepts no hook point"):
        attn_model.run_with_hooks(tokens, fwd_hooks=[(lambda name: False, zero)])
    with pytest.raises(TypeError, match="hook names are strings"):
        attn_model.run_with_hooks(tokens, fwd_hooks=[(3, zero)])


def test_return_type_loss_is_the_analysis_loss(previous_model):
    batch = previous_model.task_batch()
    tokens, targets = batch["tokens"], batch["targets"]
    records = headlab.analyze(previous_model, tokens, targets, pruning=False)
    loss = previous_model(tokens, return_type="loss", targets=targets)
    assert isinstance(loss, float) and abs(loss - records["loss"]) < 1e-6
    logits, both = previous_model(tokens, return_type="both", targets=targets)
    np.testing.assert_array_equal(logits, previous_model(tokens))
    assert both == loss
    assert previous_model(tokens, return_type=None) is None
    hooked = previous_model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", lambda z, n: None)],
                                           return_type="loss", targets=targets)
    cached, _ = previous_model.run_with_cache(tokens, names=["hook_embed"], return_type="loss", targets=targets)
    assert hooked == cached == loss
    with pytest.raises(ValueError, match="return_type must be"):
        previous_model(tokens, return_type="logit")


@pytest.mark.filterwarnings("ignore:.*targets default to the next token")  # next-token targets on purpose
def test_ragged_rows_take_their_own_targets_in_the_loss(attn_model):
    rows = [[1, 2, 3, 4, 5], [3, 1, 2]]
    whole = [attn_model(row, return_type="loss") for row in rows]
    counts = [len(row) - 1 for row in rows]  # next-token targets: all but each row's last
    mixed = attn_model(rows, return_type="loss")
    assert abs(mixed - np.average(whole, weights=counts)) < 1e-5


def test_next_token_defaults_warn_on_a_model_trained_for_other_targets(previous_model, attn_model):
    tokens = previous_model.task_batch()["tokens"]
    with pytest.warns(UserWarning, match=r"not the next token.*task_batch\(\)\['targets'\]") as caught:
        previous_model(tokens, return_type="loss")
    assert caught[0].filename == __file__  # the warning names the caller's line
    with pytest.warns(UserWarning, match="analyze: targets default to the next token"):
        headlab.analyze(previous_model, tokens, pruning=False)
    with pytest.warns(UserWarning, match="patching: targets default"):
        headlab.patching.head_out(previous_model, tokens, tokens[::-1].copy(), progress=False)
    with pytest.warns(UserWarning, match="logit_attribution: targets default"):
        headlab.logit_attribution(previous_model, tokens)
    # Induction's targets are next tokens, but only at the repeated segment: the
    # default would score every position, most of them filler it never learned.
    with pytest.warns(UserWarning, match=r"\(induction\) scores \d+ of the \d+ positions the default scores"):
        attn_model(tokens_of(attn_model), return_type="loss")
    # Given targets: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        previous_model(tokens, return_type="loss", targets=previous_model.task_batch()["targets"])
        batch = attn_model.task_batch()
        attn_model(batch["tokens"], return_type="loss", targets=batch["targets"])


def test_ids_are_int64_and_roles_a_dict(previous_model, tmp_path):
    batch = previous_model.task_batch()
    assert batch["tokens"].dtype == batch["targets"].dtype == np.int64
    assert batch["roles"] == {"previous token": "previous-token"}
    path = tmp_path / "rows.jsonl"
    headlab.write_data(path, [[1, 2, 3], [3, 2]], attend={"back": [[None, 0, 1], [None, 0]]})
    data = headlab.read_data(path)
    assert data["tokens"].dtype == data["targets"].dtype == np.int64
    assert data["roles"] == {"back": "back"}


def test_lengths_with_sequences_of_different_lengths_says_what_to_do(attn_model):
    with pytest.raises(ValueError, match="drop lengths="):
        attn_model([[1, 2, 3], [1, 2]], lengths=[3, 2])


def test_hooks_get_transformerlens_hook_attributes_and_may_return_torch(attn_model):
    tokens = tokens_of(attn_model)
    seen = []

    def hook(z, hook):
        seen.append((hook.name, hook.layer(), hook == "blocks.1.attn.hook_z"))
        z[:, :, 0] = 0

    zeroed = attn_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", hook)])
    assert seen == [("blocks.1.attn.hook_z", 1, True)]

    def keyword_hook(z, *, hook):  # TransformerLens passes hook= by keyword
        seen.append(hook.name)
        z[:, :, 0] = 0

    np.testing.assert_array_equal(
        attn_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", keyword_hook)]), zeroed)
    assert seen[-1] == "blocks.1.attn.hook_z"
    with pytest.raises(ValueError, match="hook_embed is not a block's hook point"):
        attn_model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", lambda a, hook: hook.layer())])
    torch = pytest.importorskip("torch")

    def torch_hook(z, hook):
        z = torch.from_numpy(z).clone()
        z[:, :, 0] = 0
        return z

    np.testing.assert_array_equal(attn_model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", torch_hook)]),
                                  zeroed)


def test_run_with_cache_takes_fwd_hooks_and_caches_what_flows_on(attn_model):
    tokens = tokens_of(attn_model)

    def zero(z, hook):
        z[:, :, 1] = 0

    patched = attn_model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", zero)])
    logits, cache = attn_model.run_with_cache(tokens, names=[("z", 0), ("pattern", 1)],
                                              fwd_hooks=[("blocks.0.attn.hook_z", zero)])
    assert ("z", 0) in cache and ("pattern", 0) not in cache
    # A tuple of full names is a list of names, not a short name.
    _, both = attn_model.run_with_cache(tokens, names=("blocks.0.attn.hook_z", "hook_embed"))
    assert set(both) == {"blocks.0.attn.hook_z", "hook_embed"}
    np.testing.assert_array_equal(logits, patched)
    assert not cache["z", 0][:, :, 1].any() and cache["z", 0][:, :, 0].any()
    _, plain = attn_model.run_with_cache(tokens, names=[("pattern", 1)])
    assert not np.allclose(cache["pattern", 1], plain["pattern", 1])  # layer 1 saw the ablation
    with pytest.raises(ValueError, match=r"got one pair: write fwd_hooks=\[\('blocks.0.attn.hook_z', fn\)\]"):
        attn_model.run_with_hooks(tokens, fwd_hooks=("blocks.0.attn.hook_z", zero))


def test_the_cache_shows_names_and_shapes_and_names_the_nearest_hook_points(attn_model):
    _, cache = attn_model.run_with_cache(tokens_of(attn_model))
    text = repr(cache)
    assert len(text) < 600 and "hook_embed [4, " in text and f"{len(cache)} hook points" in text
    with pytest.raises(KeyError, match="nearest: blocks.0.attn.hook_pattern"):
        cache["blocks.0.attn.hook_patern"]
    with pytest.raises(TypeError, match="the first argument is the headlab.Model"):
        headlab.ActivationCache(dict(cache), attn_model)


def test_save_gives_the_edit_its_path_and_an_empty_edit_says_so(attn_model, tmp_path):
    same = attn_model.with_params({})
    assert "nothing replaced" in repr(same)
    with pytest.raises(ValueError, match="does not end in .safetensors"):
        same.save(tmp_path / "same.bin")
    path = same.save(tmp_path / "same.safetensors")
    assert path == str(tmp_path / "same.safetensors") == same.path
    assert str(tmp_path / "same.safetensors") in repr(same)


def test_models_and_caches_pickle_and_deep_copy(attn_model, attn_run, tmp_path):
    import copy
    import pickle

    tokens = tokens_of(attn_model)
    again = pickle.loads(pickle.dumps(attn_model))
    np.testing.assert_array_equal(again(tokens), attn_model(tokens))
    w = attn_model.params["blocks.1.attn.o.weight"].copy()
    w[:, :4] = 0
    edited = attn_model.with_params({"blocks.1.attn.o.weight": w})
    for twin in (pickle.loads(pickle.dumps(edited)), copy.deepcopy(edited)):
        np.testing.assert_array_equal(twin(tokens), edited(tokens))
        assert twin.edited["replaced"] == ["blocks.1.attn.o.weight"]
    # A checkpoint rewritten since: refused, not other weights without a word.
    import shutil
    own = tmp_path / "own"
    shutil.copytree(attn_run, own)
    kept = pickle.dumps(headlab.load(own))
    data = bytearray((own / "checkpoint.safetensors").read_bytes())
    data[-1] ^= 1  # the last byte of the last tensor: still a checkpoint, another weight
    (own / "checkpoint.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="has changed since it was read"):
        pickle.loads(kept)
    _, cache = attn_model.run_with_cache(tokens, names=[("pattern", 0)])
    back = pickle.loads(pickle.dumps(cache))
    np.testing.assert_array_equal(back["pattern", 0], cache["pattern", 0])
    # Object arrays of integers (pandas' .values) are ids too; a Run stands for its model.
    np.testing.assert_array_equal(attn_model(tokens.astype(object)), attn_model(tokens))
    ys = tokens[:1] % attn_model.spec["classes"]
    np.testing.assert_array_equal(headlab.logit_attribution(headlab.Run(attn_run), tokens[:1], ys)[0],
                                  headlab.logit_attribution(attn_model, tokens[:1], ys)[0])


def test_compact_and_layerless_short_names_read_as_transformer_lens_reads_them(mlp_model):
    # TransformerLens's get_act_name("k6"), cache["pattern0"]; and the names needing no layer,
    # which cache["embed"] reads, in names= too.
    assert headlab.get_act_name("k6") == "blocks.6.attn.hook_k"
    assert headlab.get_act_name("pattern0") == "blocks.0.attn.hook_pattern"
    assert headlab.get_act_name("scale1ln2") == "blocks.1.ln2.hook_scale"
    assert headlab.get_act_name("pre1") == "blocks.1.mlp.hook_pre"
    with pytest.raises(KeyError, match="unknown activation name 'k6x'"):
        headlab.get_act_name("k6x")
    _, cache = mlp_model.run_with_cache(tokens_of(mlp_model), names=["embed", "scale", "pattern1", "z0"])
    assert sorted(cache) == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_pattern", "hook_embed", "ln_final.hook_scale"]
    assert cache["pattern1"] is cache["blocks.1.attn.hook_pattern"]
    with pytest.raises(ValueError, match="give its layer"):
        mlp_model.run_with_cache(tokens_of(mlp_model), names=["pattern"])
    with pytest.raises(KeyError, match="unknown hook name 'patern1'"):
        mlp_model.run_with_cache(tokens_of(mlp_model), names=["patern1"])


def _compact_of(full):
    """blocks.1.ln2.hook_scale -> scale1ln2, built from the name's parts (not by the rule under test)."""
    point = full[full.rindex("hook_") + 5:]
    if not full.startswith("blocks."):
        return point  # hook_embed, ln_final.hook_scale: no block
    layer = full.split(".")[1]
    return point + layer + next((ln for ln in ("ln1", "ln2") if f".{ln}." in full), "")


def test_compact_names_are_the_engine_s_rule_for_every_hook_name(mlp_model):
    # Every point of a 2-layer model by its compact name, as the CLI's --hooks reads it (the same
    # C++ function), through get_act_name, names= and the cache.
    assert mlp_model.spec["layers"] == 2
    names = mlp_model.hook_names()
    compact = [_compact_of(n) for n in names]
    assert [headlab.get_act_name(c) for c in compact] == names
    assert [headlab._core.full_hook_name(c) for c in compact] == names
    _, cache = mlp_model.run_with_cache(tokens_of(mlp_model), names=compact)
    assert sorted(cache) == sorted(names)
    assert headlab.get_act_name("resid_pre1") == "blocks.1.hook_resid_pre"  # a short name with an underscore
    with pytest.raises(ValueError, match=r"layer 2 is not in \[-2, 2\)"):
        headlab.get_act_name("pattern2", layers=2)
    with pytest.raises(KeyError, match="unknown hook name 'patern1'.*nearest: pattern1"):
        mlp_model.run_with_cache(tokens_of(mlp_model), names=["patern1"])


def test_transformer_lens_positional_return_type_and_dropped_targets_are_refused(previous_model):
    tokens = previous_model.task_batch()["tokens"][:4]
    targets = previous_model.task_batch()["targets"][:4]
    # TransformerLens's model(tokens, "loss"): here the second argument is lengths.
    with pytest.raises(TypeError, match="write return_type='loss'"):
        previous_model(tokens, "loss")
    # targets with a return_type that computes no loss would be dropped without a word.
    for call in (lambda: previous_model(tokens, targets=targets),
                 lambda: previous_model.run_with_cache(tokens, names=["hook_embed"], targets=targets),
                 lambda: previous_model.run_with_hooks(tokens, targets=targets, return_type=None)):
        with pytest.raises(ValueError, match="only a loss reads targets="):
            call()


def test_loss_per_token_is_each_targets_cross_entropy(previous_model):
    batch = previous_model.task_batch()
    tokens, targets = batch["tokens"][:8], batch["targets"][:8]
    per = previous_model(tokens, return_type="loss", targets=targets, loss_per_token=True)
    logits = previous_model(tokens)
    assert per.shape == tokens.shape and per.dtype == np.float64
    assert np.array_equal(np.isnan(per), targets == -1)
    b, t = np.argwhere(targets >= 0)[0]
    np.testing.assert_allclose(per[b, t], cross_entropy(logits[b:b + 1, t:t + 1], targets[b:b + 1, t:t + 1]),
                               rtol=1e-12)
    assert abs(np.nanmean(per) - previous_model(tokens, return_type="loss", targets=targets)) < 1e-12
    both = previous_model.run_with_hooks(tokens, return_type="both", targets=targets, loss_per_token=True)
    np.testing.assert_array_equal(both[1], per)
    with pytest.raises(ValueError, match="only a loss reads loss_per_token=True"):
        previous_model(tokens, loss_per_token=True)
    with pytest.raises(TypeError, match="loss_per_token must be True or False"):
        previous_model(tokens, return_type="loss", targets=targets, loss_per_token="yes")
