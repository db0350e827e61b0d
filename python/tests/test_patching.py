"""headlab.patching's grids against the analysis's patching and hand-made hooks."""
import signal

import numpy as np
import pytest

import headlab
import headlab.patching as patching
from conftest import cross_entropy, random_tokens

FAST = dict(pruning=False, importance_examples=1)


def targets_for(model, tokens, seed=9):
    targets = random_tokens(model, batch=len(tokens), seq_len=tokens.shape[1], seed=seed) % model.spec["classes"]
    targets[:, 0] = -1
    return targets


def corrupt_first_half(model, tokens, seed=7):
    corrupted = tokens.copy()
    half = tokens.shape[1] // 2
    corrupted[:, :half] = random_tokens(model, batch=len(tokens), seq_len=half, seed=seed)
    return corrupted


def restored_by_hand(model, clean, corrupted, targets, name, hook):
    patched = model.run_with_hooks(corrupted, fwd_hooks=[(name, hook)])
    clean_loss, corrupted_loss = cross_entropy(model(clean), targets), cross_entropy(model(corrupted), targets)
    return (corrupted_loss - cross_entropy(patched, targets)) / (corrupted_loss - clean_loss)


@pytest.mark.filterwarnings("ignore:.*targets default to the next token")  # next-token targets on purpose
def test_head_out_grid_is_the_analysis_patch_restored(attn_model):
    tokens = random_tokens(attn_model, batch=8, seed=3)
    corrupted = corrupt_first_half(attn_model, tokens)
    grid = patching.head_out(attn_model, tokens, corrupted)
    records = headlab.analyze(attn_model, tokens, corrupted=corrupted, **FAST)
    H = attn_model.spec["heads"]
    assert grid.shape == (attn_model.spec["layers"], H)
    from_analysis = [h["patch_restored"] for h in records["heads"]]  # layer-major
    np.testing.assert_allclose(grid.ravel(), from_analysis, atol=1e-6, rtol=0)
    assert np.ptp(grid) > 1e-3  # the heads differ: a grid of one value would pass too easily


def test_ragged_rows_give_the_analysis_patch_restored(mlp_model):
    rng = np.random.default_rng(5)
    T, V = mlp_model.spec["max_seq_len"], mlp_model.spec["vocab"]
    rows = [rng.integers(0, V, size=n).tolist() for n in (T, 4, T - 2, 3)]
    bad = [rng.integers(0, V, size=len(r)).tolist() for r in rows]
    targets = [[-1] + rng.integers(0, mlp_model.spec["classes"], size=len(r) - 1).tolist() for r in rows]
    grid = patching.head_out(mlp_model, rows, bad, targets=targets)
    records = headlab.analyze(mlp_model, rows, targets, corrupted=bad, **FAST)
    np.testing.assert_allclose(grid.ravel(), [h["patch_restored"] for h in records["heads"]], atol=1e-6, rtol=0)
    # The cell of position 4 patches rows 0 and 2 only (rows 1 and 3 end before it).
    by_pos = patching.resid_pre(mlp_model, rows, bad, targets=targets)
    ids, lengths = mlp_model.padded(rows)
    ids_bad, _ = mlp_model.padded(bad)
    ys = np.full(ids.shape, -1)
    for row, y in enumerate(targets):
        ys[row, :len(y)] = y
    _, cache = mlp_model.run_with_cache(ids, names=["blocks.1.hook_resid_pre"], lengths=lengths)

    def patch(resid, name):
        resid[[0, 2], 4] = cache[name][[0, 2], 4]

    patched = mlp_model.run_with_hooks(ids_bad, [("blocks.1.hook_resid_pre", patch)], lengths=lengths)
    clean_loss = cross_entropy(mlp_model(ids, lengths), ys)
    bad_loss = cross_entropy(mlp_model(ids_bad, lengths), ys)
    expected = (bad_loss - cross_entropy(patched, ys)) / (bad_loss - clean_loss)
    assert by_pos[1, 4] == pytest.approx(expected, abs=1e-9)
    # A padded array whose last position no row has: that column is NaN.
    padded = np.zeros((2, T), dtype=np.int64)
    padded[:, :4] = [rows[1], rows[3] + [0]]
    short = patching.resid_pre(mlp_model, padded, corrupt_first_half(mlp_model, padded), lengths=[4, 3],
                               targets=targets_for(mlp_model, padded))
    assert np.isnan(short[:, 4:]).all() and not np.isnan(short[:, :4]).any()


def test_one_resid_pre_cell_by_hand_and_the_identities(mlp_model):
    tokens = random_tokens(mlp_model, batch=4, seed=1)
    targets = targets_for(mlp_model, tokens)
    corrupted = tokens.copy()
    corrupted[:, 0] = (tokens[:, 0] + 1) % mlp_model.spec["vocab"]  # only position 0 differs
    grid = patching.resid_pre(mlp_model, tokens, corrupted, targets=targets)
    assert grid.shape == (mlp_model.spec["layers"], tokens.shape[1])
    # Layer 0, position 0 is all that differs: patching it gives the clean run.
    assert grid[0, 0] == pytest.approx(1, abs=1e-6)
    # Elsewhere in layer 0 the clean residual is the corrupted one: nothing restored.
    np.testing.assert_array_equal(grid[0, 1:], 0)
    _, cache = mlp_model.run_with_cache(tokens, names=["blocks.1.hook_resid_pre"])

    def patch(resid, name):
        resid[:, 3] = cache[name][:, 3]

    expected = restored_by_hand(mlp_model, tokens, corrupted, targets, "blocks.1.hook_resid_pre", patch)
    assert grid[1, 3] == pytest.approx(expected, abs=1e-9)


@pytest.mark.filterwarnings("ignore:.*targets default to the next token")  # next-token targets on purpose
def test_a_corruption_that_changes_nothing_is_a_value_error(attn_model):
    tokens = random_tokens(attn_model, batch=2, seed=2)
    with pytest.raises(ValueError, match=r"does not change the loss \(clean [0-9.]+, corrupted [0-9.]+\)"):
        patching.resid_pre(attn_model, tokens, tokens.copy())
    # A metric of your own needs no gap.
    grid = patching.resid_pre(attn_model, tokens, tokens.copy(), lambda logits: logits[:, -1, 0].mean())
    np.testing.assert_allclose(grid, attn_model(tokens)[:, -1, 0].mean(), atol=1e-6)


def test_patching_a_position_changes_no_earlier_logit(mlp_model):
    tokens = random_tokens(mlp_model, batch=3, seed=4)
    corrupted = random_tokens(mlp_model, batch=3, seed=8)
    k = 3
    early = lambda logits: float(logits[:, :k].astype(np.float64).sum())  # noqa: E731
    for kind in ("resid_pre", "attn_out", "mlp_out"):
        grid = patching.grid(mlp_model, kind, tokens, corrupted, early)
        np.testing.assert_array_equal(grid[:, k:], early(mlp_model(corrupted)))
        assert (grid[:, :k] != early(mlp_model(corrupted))).any(), kind


def test_a_logit_difference_and_the_other_grids(attn_model):
    tokens = random_tokens(attn_model, batch=4, seed=6)
    corrupted = corrupt_first_half(attn_model, tokens)
    a, b = 1, 2
    diff = lambda logits: (logits[:, -1, a] - logits[:, -1, b]).mean()  # noqa: E731  (a numpy scalar)
    L, H, T = attn_model.spec["layers"], attn_model.spec["heads"], tokens.shape[1]
    by_pos = patching.head_out(attn_model, tokens, corrupted, diff, by_position=True)
    assert by_pos.shape == (L, T, H)
    pattern = patching.head_pattern(attn_model, tokens, corrupted, diff)
    assert pattern.shape == (L, H)
    _, cache = attn_model.run_with_cache(tokens, names=["blocks.1.attn.hook_z", "blocks.1.attn.hook_pattern"])

    def z_at(z, name):
        z[:, 5, 1] = cache[name][:, 5, 1]

    def pattern_of(p, name):
        p[:, 0] = cache[name][:, 0]

    assert by_pos[1, 5, 1] == pytest.approx(diff(attn_model.run_with_hooks(corrupted, [("blocks.1.attn.hook_z", z_at)])))
    assert pattern[1, 0] == pytest.approx(
        diff(attn_model.run_with_hooks(corrupted, [("blocks.1.attn.hook_pattern", pattern_of)])))
    # The metric reads the last position alone, and nothing after the last layer
    # reads another position's head output: patching it there changes nothing.
    np.testing.assert_array_equal(by_pos[-1, :-1, :], diff(attn_model(corrupted)))
    assert (by_pos[-1, -1, :] != diff(attn_model(corrupted))).all()


def test_query_key_and_value_grids_patch_one_heads_hook(attn_model):
    tokens = random_tokens(attn_model, batch=4, seed=6)
    corrupted = corrupt_first_half(attn_model, tokens)
    diff = lambda logits: (logits[:, -1, 1] - logits[:, -1, 2]).mean()  # noqa: E731
    L, H, T = attn_model.spec["layers"], attn_model.spec["heads"], tokens.shape[1]
    for part in "qkv":
        name = f"blocks.1.attn.hook_{part}"
        _, cache = attn_model.run_with_cache(tokens, names=[name])
        every = getattr(patching, f"head_{part}")(attn_model, tokens, corrupted, diff)
        by_pos = getattr(patching, f"head_{part}")(attn_model, tokens, corrupted, diff, by_position=True)
        assert every.shape == (L, H) and by_pos.shape == (L, T, H)

        def all_positions(x, name):
            x[:, :, 1] = cache[name][:, :, 1]

        def at_2(x, name):
            x[:, 2, 1] = cache[name][:, 2, 1]

        assert every[1, 1] == pytest.approx(diff(attn_model.run_with_hooks(corrupted, [(name, all_positions)])))
        assert by_pos[1, 2, 1] == pytest.approx(diff(attn_model.run_with_hooks(corrupted, [(name, at_2)])))
        assert every[1, 1] != pytest.approx(diff(attn_model(corrupted)))  # the patch changes something


def test_ctrl_c_stops_the_grid_at_once(attn_model):
    tokens = random_tokens(attn_model, batch=2, seed=2)
    calls = []

    def interrupted(logits):
        calls.append(1)
        signal.raise_signal(signal.SIGINT)
        return 0.0

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            patching.resid_pre(attn_model, tokens, tokens[::-1].copy(), interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(calls) == 1


def test_bad_input_names_the_value(attn_model):
    tokens = random_tokens(attn_model, batch=2, seed=2)
    bad = tokens[::-1].copy()
    with pytest.raises(ValueError, match=r"corrupted: expected shape \[2, \d+\] \(the tokens'\), got \[1, \d+\]"):
        patching.resid_pre(attn_model, tokens, bad[:1])
    with pytest.raises(ValueError, match=r"corrupted\[1\]: 3 tokens, but its clean sequence tokens\[1\] has 4"):
        patching.resid_pre(attn_model, [[1, 2, 3, 4, 5], [1, 2, 3, 4]], [[2, 2, 3, 4, 5], [1, 2, 3]])
    with pytest.raises(ValueError, match=r"one number, got an array of shape \[2\] \(patching blocks.0.hook_resid_pre "
                                         r"position 0\)"):
        patching.resid_pre(attn_model, tokens, bad, lambda logits: logits[:, -1, 0])
    with pytest.raises(TypeError, match=r"must return a number, got 'high'"):
        patching.head_out(attn_model, tokens, bad, lambda logits: "high")
    with pytest.raises(TypeError, match=r"metric must be a function logits -> number, got 3"):
        patching.head_out(attn_model, tokens, bad, 3)
    with pytest.raises(ValueError, match=r"targets are read by the default metric only"):
        patching.head_out(attn_model, tokens, bad, lambda logits: 0.0, targets=tokens)
    with pytest.raises(ValueError, match=r"unknown kind 'resid-pre'; one of 'resid_pre'"):
        patching.grid(attn_model, "resid-pre", tokens, bad)
    with pytest.raises(ValueError, match=r"unknown kind \['resid_pre'\]"):
        patching.grid(attn_model, ["resid_pre"], tokens, bad)
    with pytest.raises(ValueError, match=r"mlp_out needs hook point 'blocks.0.hook_mlp_out', which this model lacks"):
        patching.mlp_out(attn_model, tokens, bad)
    with pytest.raises(ValueError, match=r"attn_out grids are per position"):
        patching.grid(attn_model, "attn_out", tokens, bad, by_position=False)
    with pytest.raises(TypeError, match=r"by_position must be True or False, got 'yes'"):
        patching.head_out(attn_model, tokens, bad, by_position="yes")
    with pytest.raises(ValueError, match=r"clean: id 999 at \[0, 0\] is outside the vocabulary"):
        patching.resid_pre(attn_model, [[999, 1, 2]], [[1, 1, 2]])
    assert headlab.patching is patching


def test_a_metric_returning_no_number_is_refused_not_nan(attn_model):
    # None (a metric that forgot its `return`) and a string are no number:
    # np.asarray(None, float64) is NaN and "0.5" parses, so both once filled
    # the grid without a word.
    tokens = random_tokens(attn_model, batch=2, seq_len=4, seed=2)
    bad = tokens[::-1].copy()
    with pytest.raises(TypeError, match=r"must return a number, got None \(patching blocks.0.hook_resid_pre position 0\)"):
        patching.resid_pre(attn_model, tokens, bad, lambda logits: None)
    with pytest.raises(TypeError, match=r"must return a number, got '0.5'"):
        patching.resid_pre(attn_model, tokens, bad, lambda logits: "0.5")
    with pytest.raises(TypeError, match=r"progress must be True or False, got 'no'"):
        patching.resid_pre(attn_model, tokens, bad, lambda logits: 0.0, progress="no")
    grid = patching.resid_pre(attn_model, tokens, bad, lambda logits: np.float32(logits[0, -1, 0]) > 0, progress=False)
    assert grid.dtype == np.float64 and set(np.unique(grid)) <= {0.0, 1.0}


def test_a_metric_returning_nan_or_infinity_warns_naming_it_and_the_first_cell(attn_model):
    # A metric that is NaN for some cells (0/0 where a patch changed nothing,
    # say) once gave a grid with blank cells and no word; NaN there looks like
    # the NaN of a position no row has.
    tokens = random_tokens(attn_model, batch=2, seq_len=4, seed=2)
    bad = tokens[::-1].copy()
    calls = []

    def ratio(logits):  # the 3rd cell (layer 0, position 2) NaN, the 6th infinite
        calls.append(len(calls))
        return {2: np.nan, 5: np.inf}.get(calls[-1], float(logits[0, -1, 0]))

    with pytest.warns(RuntimeWarning, match=r"patching resid_pre: the metric ratio returned NaN or infinity in 2 of 8 "
                                            r"cells, the first nan \(patching blocks.0.hook_resid_pre position 2\)"
                      ) as caught:
        grid = patching.resid_pre(attn_model, tokens, bad, ratio, progress=False)
    assert len(caught) == 1 and caught[0].filename == __file__  # once, at the caller's line
    assert np.isnan(grid[0, 2]) and np.isposinf(grid[1, 1]) and np.isfinite(grid).sum() == 6  # kept as returned
    with pytest.warns(RuntimeWarning, match=r"the metric <lambda> returned NaN or infinity in 4 of 4 cells, the "
                                            r"first inf \(patching blocks.0.attn.hook_z head 0\)"):
        patching.path(attn_model, tokens, bad, "logits", lambda logits: np.inf, progress=False)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a finite grid warns of nothing
        patching.head_out(attn_model, tokens, bad, lambda logits: logits[0, -1, 0], progress=False)


def test_a_model_whose_loss_is_not_finite_is_refused_before_the_grid(attn_model):
    w = attn_model.params["head.weight"].copy()
    w[0, 0] = 3e38  # finite weights whose logits overflow to infinity
    broken = attn_model.with_params({"head.weight": w})
    tokens = random_tokens(attn_model, batch=2, seq_len=4, seed=2)
    targets = np.zeros_like(tokens)
    with np.errstate(all="ignore"):
        assert not np.isfinite(broken(tokens)).all()
        with pytest.raises(ValueError, match=r"patching: the loss is not finite \(clean .*, corrupted .*\)"):
            patching.head_out(broken, tokens, tokens[::-1].copy(), targets=targets, progress=False)


def test_progress_in_a_log_file_is_a_line_at_each_tenth_not_carriage_returns(attn_model, capsys, monkeypatch):
    # Into a file or a pipe, where "\r" redraws nothing, the redrawn line once
    # read "patching head_out: 72/96 cellspatching head_out: 89/96 cells".
    clock = iter(range(0, 10**6, 3))  # 3 s per reading: past the 2 s threshold at once
    monkeypatch.setattr(patching.time, "monotonic", lambda: next(clock))
    tokens = random_tokens(attn_model, batch=2, seq_len=10, seed=2)
    patching.resid_pre(attn_model, tokens, tokens[::-1].copy(), lambda logits: 0.0)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert lines[-1] == "patching resid_pre: 20/20 cells" and len(lines) == 10
    assert [int(line.split()[2].split("/")[0]) for line in lines] == list(range(2, 21, 2))


def test_a_metric_reading_padded_positions_warns(attn_model):
    # logits[:, -1] of a shorter row is padding: the grid once filled with
    # values read from there without a word.
    clean = [[1, 2, 3, 4, 5, 6], [3, 4, 5, 6], [2, 2, 3, 4, 5, 6]]
    bad = [[6, 5, 4, 3, 2, 1], [6, 5, 4, 3], [1, 5, 4, 3, 2, 1]]

    def last_logit(logits):
        return logits[:, -1, 3].mean()

    with pytest.warns(UserWarning, match=r"patching resid_pre: the metric last_logit reads padded positions \(of rows "
                                         r"1\): .*logits\[b, lengths\[b\] - 1\]"):
        patching.resid_pre(attn_model, clean, bad, last_logit, progress=False)
    with pytest.warns(UserWarning, match=r"patching path: the metric <lambda> reads padded positions"):
        patching.path(attn_model, clean, bad, "logits", lambda logits: logits[:, -1, 3].mean(), progress=False)
    ends = np.array([5, 3, 5])  # each row's last real position
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reading real positions only, or an unpadded batch: no warning
        patching.head_out(attn_model, clean, bad, lambda logits: logits[np.arange(3), ends, 3].mean(), progress=False)
        patching.head_out(attn_model, [c[:4] for c in clean], [b[:4] for b in bad], last_logit, progress=False)


def test_a_torch_metric_given_the_numpy_logits_gets_a_note_saying_so(attn_model):
    # TransformerLens's metrics (and model.gradients') compute in torch; the
    # grid hands numpy logits, and the error once said only "'numpy.ndarray'
    # object has no attribute 'log_softmax'".
    tokens = random_tokens(attn_model, batch=2, seq_len=4, seed=2)
    bad = tokens[::-1].copy()

    def log_prob(logits):
        return logits.log_softmax(-1)[:, -1, 3].mean()

    for call in (lambda: patching.resid_pre(attn_model, tokens, bad, log_prob, progress=False),
                 lambda: patching.path(attn_model, tokens, bad, "logits", log_prob, progress=False)):
        with pytest.raises(AttributeError, match="log_softmax") as caught:
            call()
        assert any("calls with the logits as a numpy array" in note and "torch.from_numpy(l)" in note
                   for note in caught.value.__notes__)

    class Mine(Exception):
        pass

    def fails(logits):
        raise Mine("from the metric")

    with pytest.raises(Mine) as caught:  # any other exception as it was raised
        patching.head_out(attn_model, tokens, bad, fails, progress=False)
    assert not getattr(caught.value, "__notes__", None)
