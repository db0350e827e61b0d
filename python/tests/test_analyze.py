"""headlab.analyze with the caller's own patterns, roles and sequences of
different lengths, and Model.task_batch (the run's own analysis batch)."""
import json
import os
import signal
import threading
import time

import numpy as np
import pytest

import headlab
from headlab import _patterns, patching
from conftest import cli, random_tokens

FAST = dict(pruning=False, importance_examples=1)


def previous_token_scores(pattern, targets):
    """The user-pattern score of attention on q - 1 (docs/head-metrics.md),
    recomputed in numpy from the cached attention [B, h, T, T]: per example,
    the mean over its scored queries (q >= 1 with a target) of the mass on
    q - 1; then the mean over the examples that have one."""
    B, H, T, _ = pattern.shape
    q = np.arange(1, T)
    scored = targets[:, 1:] >= 0  # [B, T-1]
    mass = pattern[:, :, q, q - 1].astype(np.float64)  # [B, H, T-1]
    has = scored.any(axis=1)
    per_example = (mass * scored[:, None, :]).sum(axis=2)[has] / scored.sum(axis=1)[has][:, None]
    return per_example.mean(axis=0)


def test_task_batch_gives_the_runs_own_heads_json(mlp_run, mlp_model):
    batch = mlp_model.task_batch()
    assert set(batch) == {"tokens", "targets", "lengths", "patterns", "roles", "sources"}
    assert batch["tokens"].shape == (8, mlp_model.spec["max_seq_len"])  # the run's --eval-batch 8
    assert batch["roles"] == {"previous token": "previous-token", "first token": "first-token"}
    records = headlab.analyze(mlp_model, **batch)
    saved = json.loads((mlp_run / "heads.json").read_text())
    assert [h["scores"] for h in records["heads"]] == [h["scores"] for h in saved["heads"]]
    assert records["verdict"] == saved["verdict"]


def test_a_task_batch_with_its_corruption_gives_analyze_patchs_records(mlp_run, mlp_model, tmp_path):
    batch = mlp_model.task_batch(corrupted=True)
    plain = mlp_model.task_batch()
    assert "corrupted" not in plain and all((batch[k] == plain[k]).all() for k in ("tokens", "targets"))
    corrupted = batch["corrupted"]
    assert corrupted.dtype == np.int64 and corrupted.shape == batch["tokens"].shape
    assert (corrupted != batch["tokens"]).any()
    assert (mlp_model.task_batch(corrupted=True)["corrupted"] == corrupted).all()  # drawn the same each time
    cli("analyze", mlp_run, "--patch", "--out", tmp_path / "patched")
    saved = json.loads((tmp_path / "patched" / "heads.json").read_text())["heads"]
    records = headlab.analyze(mlp_model, **batch)["heads"]
    keys = ("patch_restored", "mean_ablation_delta_loss", "resample_ablation_delta_loss")
    assert all(saved[0][key] is not None for key in keys)
    assert [[h[key] for key in keys] for h in records] == [[h[key] for key in keys] for h in saved]
    # The patching grid patches into the same corrupted run: each head's cell is its patch_restored.
    grid = patching.head_out(mlp_model, batch["tokens"], corrupted, targets=batch["targets"], lengths=batch["lengths"],
                             progress=False)
    restored = {(h["layer"], h["head"]): h["patch_restored"] for h in saved}
    for (layer, head), value in restored.items():
        assert grid[layer, head] == pytest.approx(value, abs=1e-5)
    with pytest.raises(TypeError, match="corrupted is True or False"):
        mlp_model.task_batch(corrupted="yes")


def test_a_task_batch_carries_the_tasks_own_patterns_and_sources(attn_model, tmp_path):
    # sort's role is a pattern of its own: the list positions holding the next token.
    cli("train", "--task", "sort", "--d-model", "16", "--steps", "2", "--batch", "8", "--eval-batch", "8",
        "--threads", "1", "--out", tmp_path / "sort")
    model = headlab.load(tmp_path / "sort")
    batch = model.task_batch()
    assert batch["roles"] == {"the list token to output next": "next-sorted"}
    mask, definition = batch["patterns"]["next-sorted"]
    assert mask.dtype == np.bool_ and mask.shape == batch["tokens"].shape + batch["tokens"].shape[1:]
    assert mask.any() and definition.startswith("attention of a sorted position")
    saved = json.loads((tmp_path / "sort" / "heads.json").read_text())
    records = headlab.analyze(model, **batch)
    assert [h["scores"]["user"] for h in records["heads"]] == [h["scores"]["user"] for h in saved["heads"]]
    assert records["verdict"] == saved["verdict"]
    # induction defines sources: its task-position scores are there, and only with them.
    batch = attn_model.task_batch()
    assert batch["sources"] is True and list(batch["roles"].values()) == ["induction"]
    with_sources = headlab.analyze(attn_model, **batch, **FAST)
    without = headlab.analyze(attn_model, **{**batch, "sources": False}, **FAST)
    assert all(v is not None for h in with_sources["heads"] for v in h["task_scores"].values())
    assert all(v is None for h in without["heads"] for v in h["task_scores"].values())


def test_a_pattern_in_every_form_scores_what_numpy_computes(mlp_model):
    batch = mlp_model.task_batch()
    tokens, targets = batch["tokens"], batch["targets"]
    B, T = tokens.shape
    previous = np.eye(T, k=-1, dtype=bool)  # [query, key]: key q - 1
    at_targets = previous[None] & (targets >= 0)[:, :, None]
    # A key, a list of keys or an array of them per token, None where no key counts.
    key = [lambda k: k, lambda k: [k], lambda k: np.array([k])]
    lists = [[key[b % 3](q - 1) if q >= 1 and targets[b, q] >= 0 else None for q in range(T)] for b in range(B)]
    records = headlab.analyze(mlp_model, tokens, targets, patterns={
        "as-mask": at_targets, "as-lists": lists, "as-text": "offset:1"}, **FAST)
    _, cache = mlp_model.run_with_cache(tokens, lambda n: n.endswith("hook_pattern"))
    for layer in range(mlp_model.spec["layers"]):
        expected = previous_token_scores(cache[f"blocks.{layer}.attn.hook_pattern"], targets)
        for h, want in enumerate(expected):
            user = records["heads"][layer * mlp_model.spec["heads"] + h]["scores"]["user"]
            assert set(user) == {"as-mask", "as-lists", "as-text"}
            for name, score in user.items():
                assert score == pytest.approx(want, abs=1e-6), (layer, h, name)
    assert [p["name"] for p in records["patterns"]] == ["as-mask", "as-lists", "as-text"]


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory):
    """The default demo's task trained long enough (200 steps, under a second)
    that its heads take their roles: first-token and previous-token."""
    out = tmp_path_factory.mktemp("runs") / "demo"
    cli("train", "--task", "first-prev-pair", "--steps", "200", "--threads", "1", "--analyze-every", "0",
        "--eval-batch", "64", "--out", out)
    return headlab.load(out)


def test_a_role_of_your_own_is_found_by_the_head_that_carries_it(demo_model):
    batch = demo_model.task_batch()
    built_in = headlab.analyze(demo_model, batch["tokens"], batch["targets"], **FAST)
    first = [h["name"] for h in built_in["heads"] if h["label"] == "first-token"]
    assert len(first) == 1  # the demo's first-token head (measured: L0H0 at seed 0)
    # The first-token pattern itself (queries q >= 2 with a target, key 0) under a
    # name of yours: a tie with the built-in goes to yours, so that head carries it.
    T = batch["tokens"].shape[1]
    start = np.zeros((T, T), dtype=bool)
    start[2:, 0] = True
    records = headlab.analyze(demo_model, batch["tokens"], batch["targets"],
                              patterns={"start": (start[None] & (batch["targets"] >= 0)[:, :, None], "key 0")},
                              roles={"looks at the start": "start"}, **FAST)
    assert records["expected_roles"] == [{"role": "looks at the start", "pattern": "start"}]
    # It coincides with first-token on the batch: nested both ways.
    assert {"definition": "key 0", "name": "start", "nests_with": ["first-token"]} in records["patterns"]
    assert [h["name"] for h in records["heads"] if h["label"] == "start"] == first
    assert records["verdict"]["roles"] == [{"role": "looks at the start", "pattern": "start", "heads": first}]
    assert records["verdict"]["reasons"][0] == f"expected roles found: 1 of 1 (looks at the start [start]: {first[0]})"
    # "position:0" also scores queries 0 and 1, which always attend to position 0:
    # it beats first-token by less than the label margin, but the two read the
    # same key wherever both score (nested), so the head carries it all the same
    # (docs/head-metrics.md, "Nested patterns").
    near = dict(patterns={"start": "position:0"}, roles={"looks at the start": "start"}, **FAST)
    nested = headlab.analyze(demo_model, batch["tokens"], batch["targets"], **near)
    assert nested["patterns"][0]["nests_with"] == ["first-token"]
    head = next(h for h in nested["heads"] if h["name"] == first[0])
    assert 0 < head["scores"]["user"]["start"] - head["scores"]["first_token"] < 0.15
    assert head["label"] == "start"
    assert nested["verdict"]["roles"][0]["heads"] == first


def test_sequences_of_different_lengths_are_padded_and_masked_as_a_data_files(mlp_model, tmp_path):
    rng = np.random.default_rng(7)
    T, V = mlp_model.spec["max_seq_len"], mlp_model.spec["vocab"]
    rows = [rng.integers(0, V, size=n).tolist() for n in (T, 3, T - 1, 4, T, 5)]
    targets = [rng.integers(0, mlp_model.spec["classes"], size=len(r)).tolist() for r in rows]
    records = headlab.analyze(mlp_model, rows, targets, **FAST)
    # The same rows through the CLI's analyze --data, which pads and masks them.
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"tokens": r, "targets": y}) + "\n" for r, y in zip(rows, targets)))
    cli("analyze", mlp_model.path, "--data", data, "--out", tmp_path / "out", "--threads", "1")
    from_cli = json.loads((tmp_path / "out" / "heads.json").read_text())
    for ours, theirs in zip(records["heads"], from_cli["heads"]):
        for key in ("previous_token", "first_token", "self", "entropy"):
            assert ours["scores"][key] == pytest.approx(theirs["scores"][key], abs=1e-6), key
    # What the padding holds changes nothing: a rectangular array with lengths.
    lengths = [len(r) for r in rows]
    garbage = rng.integers(0, V, size=(len(rows), T))
    grid_targets = rng.integers(0, mlp_model.spec["classes"], size=(len(rows), T))
    for b, (r, y) in enumerate(zip(rows, targets)):
        garbage[b, :len(r)] = r
        grid_targets[b, :len(y)] = y
    again = headlab.analyze(mlp_model, garbage, grid_targets, lengths=lengths, **FAST)
    assert [h["scores"] for h in again["heads"]] == [h["scores"] for h in records["heads"]]
    assert again["loss"] == records["loss"]


def next_row_corruption(rows):
    """The CLI's corruption of a data file (Task::corrupt): each row takes the
    first tokens of the next row (cyclically) at least as long; the longest
    row, with none, keeps its own."""
    out = []
    for b, row in enumerate(rows):
        later = [rows[(b + k) % len(rows)] for k in range(1, len(rows))]
        donor = next((r for r in later if len(r) >= len(row)), row)
        out.append(list(donor[:len(row)]))
    return out


def test_ragged_corrupted_rows_give_the_clis_patching_of_the_same_data_file(mlp_model, tmp_path):
    rng = np.random.default_rng(11)
    T, V = mlp_model.spec["max_seq_len"], mlp_model.spec["vocab"]
    rows = [rng.integers(0, V, size=n).tolist() for n in (4, T, 3, T - 1, 5, 3, T - 1)]  # one longest
    targets = [rng.integers(0, mlp_model.spec["classes"], size=len(r)).tolist() for r in rows]
    corrupted = next_row_corruption(rows)
    records = headlab.analyze(mlp_model, rows, targets, corrupted=corrupted, **FAST)
    # The same rows through analyze --data --patch, 3 at a time: donors across chunks.
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"tokens": r, "targets": y}) + "\n" for r, y in zip(rows, targets)))
    cli("analyze", mlp_model.path, "--data", data, "--out", tmp_path / "out", "--patch", "--batch", "3",
        "--threads", "1")
    from_cli = json.loads((tmp_path / "out" / "heads.json").read_text())
    assert records["resample"] == from_cli["resample"] == {"rows": 7, "with_donor": 6}
    assert records["patching"]["corrupted_rows"] == from_cli["patching"]["corrupted_rows"] == 6
    for key in ("clean_loss", "corrupted_loss"):
        assert records["patching"][key] == pytest.approx(from_cli["patching"][key], abs=1e-6), key
    for ours, theirs in zip(records["heads"], from_cli["heads"]):
        for key in ("resample_ablation_delta_loss", "mean_ablation_delta_loss", "patch_restored"):
            assert ours[key] is not None
            assert ours[key] == pytest.approx(theirs[key], abs=1e-6), (ours["name"], key)
    # A padded array gives the same: what its padding holds changes nothing.
    grid = rng.integers(0, V, size=(len(rows), T))
    for b, row in enumerate(corrupted):
        grid[b, :len(row)] = row
    again = headlab.analyze(mlp_model, rows, targets, corrupted=grid, **FAST)
    assert [h["patch_restored"] for h in again["heads"]] == [h["patch_restored"] for h in records["heads"]]
    assert again["patching"] == records["patching"]


def test_a_corrupted_row_must_be_as_long_as_its_clean_row(mlp_model):
    rows = [[1, 2, 3], [1, 2, 3, 4, 5, 6], [2, 3, 4, 5]]
    targets = [[1] * len(r) for r in rows]
    with pytest.raises(ValueError, match=r"corrupted\[2\]: 3 tokens, but its clean sequence tokens\[2\] has 4"):
        headlab.analyze(mlp_model, rows, targets, corrupted=[[3, 2, 1], [6, 5, 4, 3, 2, 1], [5, 4, 3]], **FAST)
    with pytest.raises(ValueError, match=r"corrupted: 2 sequences for 3 clean ones"):
        headlab.analyze(mlp_model, rows, targets, corrupted=[[3, 2, 1], [6, 5, 4, 3, 2, 1]], **FAST)
    with pytest.raises(ValueError, match=r"corrupted\[0\]: 5 tokens, but its clean sequence tokens\[0\] has 6"):
        headlab.analyze(mlp_model, [[1] * 6, [2] * 6], [[1] * 6] * 2, corrupted=[[1] * 5, [2] * 6], **FAST)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(patterns={"p": np.ones((2, 2), bool)}), ValueError, r"a mask has shape \[B, T, T\]"),
    (dict(patterns={"p": "offset:99"}), ValueError, r"patterns\['p'\]: 'offset:99': offset 99 is beyond"),
    (dict(patterns={"p": np.zeros((6, 6), bool)}), ValueError, r"patterns\['p'\] gives no query a key"),
    (dict(patterns={"previous-token": "offset:1"}), ValueError, "is a built-in pattern"),
    (dict(patterns={"prev": "offset:1"}), ValueError, "pattern name 'prev' reads as the built-in pattern previous-token"),
    (dict(patterns={"p": np.triu(np.ones((6, 6), bool), 1)}), ValueError,
     r"key 1 of query 0 of sequence 0 is not a key it can see \(0 \.\. 0\): the model is causal"),
    (dict(patterns={"p": [[None] * 6]}), ValueError, r"expected one list per sequence \(2\)"),
    (dict(patterns={"p": (np.ones((6, 6), bool), 5)}), TypeError,
     r"patterns\['p'\]: a \(pattern, definition\) pair's definition is a string, got int 5"),
    (dict(patterns={"p": ("offset:1", None)}), TypeError, r"definition is a string, got NoneType"),
    (dict(patterns=["offset:-1"]), ValueError, r"'offset:-1': K must be >= 0"),
    (dict(patterns={"p": [[None, 0.5, None, None, None, None]] * 2}), ValueError, r"patterns\['p'\]\[0\]\[1\]"),
    (dict(patterns="offset:1"), TypeError, "expected a dict name -> pattern"),
    (dict(roles={"r": "nothing"}), ValueError, r"roles\['r'\]: 'nothing' is no pattern; expected one of previous-token"),
    (dict(roles=["r"]), TypeError, "roles: expected a dict"),
    (dict(threshold=1.5), ValueError, "threshold must be between 0 and 1, got 1.5"),
    (dict(margin="0.1"), TypeError, "margin must be a number"),
    (dict(sink_delta_loss=float("nan")), ValueError, "sink_delta_loss must be a finite number"),
    (dict(lengths=[6]), ValueError, r"lengths: expected one length per sequence \(2\)"),
    (dict(lengths=[6, 0]), ValueError, r"lengths: 0 at \[1\] is not in \[1, 6\]"),
    (dict(sources="yes"), TypeError, "sources must be True or False"),
])
def test_bad_patterns_roles_and_options_are_named(mlp_model, kwargs, error, match):
    tokens = np.tile(np.arange(6) % mlp_model.spec["vocab"], (2, 1))
    targets = np.tile(np.arange(6) % mlp_model.spec["classes"], (2, 1))
    with pytest.raises(error, match=match):
        headlab.analyze(mlp_model, tokens, targets, **kwargs, **FAST)


def test_a_mask_is_cut_to_each_sequences_length(mlp_model):
    rows = [[1, 2, 3], [1, 2, 3, 4, 5, 6]]
    targets = [[1, 1, 1], [1, 1, 1, 1, 1, 1]]
    # Per-sequence lists follow each sequence's own length; a mask [T, T], or
    # [B, T, T] whatever a short row's padding holds (here keys past a real
    # query's sequence too), gives a row of L tokens mask[:L, :L]: the same keys.
    lists = headlab.analyze(mlp_model, rows, targets, patterns={"p": [[None, 0, 1], [None, 0, 1, 2, 3, 4]]}, **FAST)
    expected = [h["scores"]["user"]["p"] for h in lists["heads"]]
    assert None not in expected
    prev = np.eye(6, k=-1, dtype=bool)
    padding = np.ones((6, 6), bool)
    padding[:3, :3] = False
    for mask in (prev, np.stack([prev | padding, prev])):
        records = headlab.analyze(mlp_model, rows, targets, patterns={"p": mask}, **FAST)
        assert [h["scores"]["user"]["p"] for h in records["heads"]] == expected


def test_a_bidirectional_mask_gives_a_short_sequence_only_its_own_keys():
    lengths, T = np.array([2, 4]), 4
    [(_, _, _, offsets, keys)] = _patterns.patterns({"p": np.ones((T, T), bool)}, 2, T, lengths)
    got = [keys[offsets[i]:offsets[i + 1]].tolist() for i in range(2 * T)]
    assert got == [list(range(n)) if q < n else [] for n in lengths for q in range(T)]


def test_ragged_sequences_take_their_targets_per_sequence(mlp_model):
    # Rows of equal length are no padded array: the 1 past the short row would be dropped unsaid.
    rows, targets = [[1, 2, 3, 4], [1, 2, 3]], [[1, 1, 1, 1], [1, 1, 1, 1]]
    for call in (lambda: headlab.analyze(mlp_model, rows, targets, **FAST),
                 lambda: mlp_model.gradients(rows, targets, ["hook_embed"]),
                 lambda: patching.head_out(mlp_model, rows, rows, targets=targets, progress=False)):
        with pytest.raises(ValueError, match=r"targets\[1\]: 4 targets for the 3 tokens of tokens\[1\]"):
            call()


@pytest.mark.filterwarnings("ignore:.*targets default to the next token")  # next-token targets on purpose
def test_ctrl_c_stops_an_analysis_at_once(attn_model):
    # The C++ analysis runs with the GIL released; Ctrl-C must not wait for its
    # end (several seconds here). Python's own handler first: a suite started in
    # the background (`cmd &` without job control) inherits SIGINT ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    tokens = random_tokens(attn_model, batch=1024)
    ctrl_c = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    try:
        start = time.monotonic()
        ctrl_c.start()
        with pytest.raises(KeyboardInterrupt):
            headlab.analyze(attn_model, tokens, corrupted=tokens[::-1].copy())
        assert time.monotonic() - start < 1.5
    finally:
        ctrl_c.cancel()
        ctrl_c.join()
        signal.signal(signal.SIGINT, previous)
    # Nothing of the stop is left behind: the next analysis runs to its end.
    assert len(headlab.analyze(attn_model, tokens[:4], **FAST)["heads"]) == 4


def test_analyze_in_chunks_matches_one_chunk_and_memory_is_released(mlp_model):
    """chunk_rows bounds what analyze holds at once without changing its numbers
    (but for float rounding); release_memory returns the engine's kept buffers."""
    import headlab
    batch = mlp_model.task_batch()
    whole = headlab.analyze(mlp_model, **batch, pruning=False, chunk_rows=len(batch["tokens"]))
    chunked = headlab.analyze(mlp_model, **batch, pruning=False, chunk_rows=7)
    for a, b in zip(whole["heads"], chunked["heads"]):
        assert a["label"] == b["label"]
        assert abs(a["scores"]["previous_token"] - b["scores"]["previous_token"]) < 1e-6
    with pytest.raises(ValueError, match="chunk_rows"):
        headlab.analyze(mlp_model, **batch, chunk_rows=0)
    logits, cache = mlp_model.run_with_cache(batch["tokens"])
    del logits, cache
    assert headlab._core.cached_bytes() <= headlab._core.cache_limit_bytes
    headlab.release_memory()
    assert headlab._core.cached_bytes() == 0


def test_the_records_name_the_label_options_they_were_made_with(mlp_run, mlp_model):
    # As heads.json does, so that a sweep can tell a run re-labelled with other thresholds.
    records = headlab.analyze(mlp_model, **mlp_model.task_batch(), threshold=0.6, margin=0.1, **FAST)
    assert records["label_options"] == {"threshold": 0.6, "margin": 0.1, "diffuse_entropy": 0.8,
                                        "sink_delta_loss": 0.02}
    # analyze's defaults are the CLI's.
    saved = json.loads((mlp_run / "heads.json").read_text())
    assert headlab.analyze(mlp_model, **mlp_model.task_batch(), **FAST)["label_options"] == saved["label_options"]
