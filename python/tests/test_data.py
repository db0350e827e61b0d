"""headlab.write_data, headlab.read_data and headlab.train(data=rows): data
files the CLI reads, written from arrays and read back."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import headlab
from conftest import HEADLAB, REPO, cli
from test_train import without_timing

# A tiny model: each run trains in a fraction of a second.
TINY = ["--layers", "1", "--heads", "2", "--d-model", "16", "--attn-only", "--steps", "2", "--batch", "4",
        "--eval-batch", "4", "--log-every", "1", "--analyze-every", "2", "--threads", "1"]


def keywords(flags):
    out, i = {}, 0
    while i < len(flags):
        takes_value = i + 1 < len(flags) and not flags[i + 1].startswith("--")
        out[flags[i][2:].replace("-", "_")] = flags[i + 1] if takes_value else True
        i += 2 if takes_value else 1
    return out


def ragged_rows(seed=0, lengths=(6, 3, 5, 6, 4, 6, 2, 5)):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 8, size=n).tolist() for n in lengths]


def previous(rows):
    """A data file's "attend" pattern: each query on the token before it."""
    return [[None] + list(range(len(r) - 1)) for r in rows]


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_written_file_trains_as_the_hand_written_one(tmp_path):
    rows = ragged_rows()
    targets = [[(t + 1) % 8 if i % 2 else -1 for i, t in enumerate(r)] for r in rows]
    for name, kwargs, lines in [
        ("targets", dict(targets=targets, attend={"one-back": previous(rows)}),
         [{"tokens": r, "targets": y, "attend": {"one-back": p}} for r, y, p in zip(rows, targets, previous(rows))]),
        ("next-token", {}, [{"tokens": r} for r in rows]),
    ]:
        written, by_hand = tmp_path / f"{name}.jsonl", tmp_path / f"{name}-hand.jsonl"
        assert headlab.write_data(written, rows, **kwargs) == written
        by_hand.write_text("".join(json.dumps(line) + "\n" for line in lines))
        cli("train", "--data", written, *TINY, "--out", tmp_path / name)
        cli("train", "--data", by_hand, *TINY, "--out", tmp_path / f"{name}-hand")
        ours, theirs = without_timing(tmp_path / name / "metrics.jsonl"), without_timing(
            tmp_path / f"{name}-hand" / "metrics.jsonl")
        assert ours == theirs and len(ours) == 2
    # The file's pattern was scored: a head record names it.
    records = without_timing(tmp_path / "targets" / "metrics.jsonl")
    assert "one-back" in json.dumps(records[-1]["heads"])


def test_arrays_with_lengths_write_the_ragged_rows(tmp_path):
    rows = ragged_rows(1)
    grid = np.full((len(rows), 6), 7)  # what the padding holds is not written
    for b, r in enumerate(rows):
        grid[b, :len(r)] = r
    headlab.write_data(tmp_path / "a.jsonl", grid, grid, lengths=[len(r) for r in rows])
    headlab.write_data(tmp_path / "b.jsonl", rows, [list(r) for r in rows])
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    # A mask [T, T], or [B, T, T] whatever its padding holds, is cut to each row
    # (row b of n tokens reads mask[b, :n, :n]): the same pattern as key lists.
    mask = np.eye(6, k=-1, dtype=bool)
    headlab.write_data(tmp_path / "l.jsonl", rows, attend={"one-back": previous(rows)})
    for i, form in enumerate((mask, mask[None] & _real(rows), mask[None] | ~_real(rows))):
        headlab.write_data(tmp_path / f"m{i}.jsonl", rows, attend={"one-back": form})
        assert (tmp_path / f"m{i}.jsonl").read_bytes() == (tmp_path / "l.jsonl").read_bytes(), i


def _real(rows):
    """[B, T, T]: True where both query and key are real tokens."""
    n = np.array([len(r) for r in rows])[:, None, None]
    positions = np.arange(6)
    return (positions[None, :, None] < n) & (positions[None, None, :] < n)


def test_train_on_rows_equals_train_on_the_file(tmp_path):
    rows, held_out = ragged_rows(2), ragged_rows(3, lengths=(5, 6, 4, 6))
    # Paths of one length, so that the checkpoints compare byte for byte once
    # the folder's name in them is swapped.
    (tmp_path / "hand").mkdir()
    headlab.write_data(tmp_path / "hand" / "data.jsonl", rows, attend={"one-back": previous(rows)})
    headlab.write_data(tmp_path / "hand" / "eval-data.jsonl", held_out)
    flags = keywords(TINY)
    headlab.train(out=tmp_path / "runh", data=tmp_path / "hand" / "data.jsonl",
                  eval_data=os.fspath(tmp_path / "hand" / "eval-data.jsonl"), **flags)
    run = headlab.train(out=tmp_path / "runa", data=dict(tokens=rows, attend={"one-back": previous(rows)}),
                        eval_data=held_out, **flags)
    a, h = tmp_path / "runa", tmp_path / "runh"
    assert (a / "data.jsonl").read_bytes() == (h.parent / "hand" / "data.jsonl").read_bytes()
    assert run.config["data"] == str(a / "data.jsonl") and run.config["eval-data"] == str(a / "eval-data.jsonl")

    def swapped(path):
        return path.read_bytes().replace(str(tmp_path / "hand").encode(), str(a).encode())
    assert (a / "checkpoint.safetensors").read_bytes() == swapped(h / "checkpoint.safetensors")
    assert (a / "config.json").read_bytes() == swapped(h / "config.json")
    assert without_timing(a / "metrics.jsonl") == without_timing(h / "metrics.jsonl")

    # The run is whole by itself: eval and analyze of it from another folder,
    # its own batch from Python, and a resume given the same rows.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in ("eval", "analyze"):
        done = subprocess.run([str(HEADLAB), command, str(a), "--threads", "1"], cwd=elsewhere, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
    batch = run.model().task_batch()
    assert batch["tokens"][0, :5].tolist() == held_out[0] and batch["lengths"].tolist() == [5, 6, 4, 6]
    resumed = headlab.train(resume=a, data=dict(tokens=rows, attend={"one-back": previous(rows)}), eval_data=held_out,
                            steps=3)
    assert [m["step"] for m in resumed.metrics] == [1, 2, 3]
    before = listing(a), (a / "checkpoint.safetensors").read_bytes()
    with pytest.raises(ValueError, match=r"data= differs from the rows the run in .*runa trained on \(its --data "):
        headlab.train(resume=a, data=rows[:4], steps=4)
    with pytest.raises(ValueError, match=r"already holds a run"):  # the same rows: the CLI's refusal
        headlab.train(out=a, data=dict(tokens=rows, attend={"one-back": previous(rows)}), **flags)
    with pytest.raises(ValueError, match=r"data= differs .* pass force=True to replace that run"):
        headlab.train(out=a, data=rows[:4], **flags)
    assert (listing(a), (a / "checkpoint.safetensors").read_bytes()) == before


def test_a_refused_train_leaves_no_folder_and_an_old_run_whole(tmp_path):
    rows = ragged_rows(4)
    with pytest.raises(ValueError, match=r"train: data=: tokens: row 1, position 0: -1 is out of range"):
        headlab.train(out=tmp_path / "new" / "x", data=[[1, 2], [-1, 2]], steps=1)
    with pytest.raises(ValueError, match="unknown flag --d-modle"):  # refused by the CLI, after the rows were written
        headlab.train(out=tmp_path / "new" / "x", data=rows, d_modle=16)
    with pytest.raises(ValueError, match=r"train: data= row 2: .*new/x/data.jsonl:3: token 7 \(tokens\[0\]\) is out of "):
        headlab.train(out=tmp_path / "new" / "x", data=[[1, 2], [3, 4], [7, 1]], vocab=5, steps=1)
    # Rows no step could learn from (every target -1) are named as rows, and as the file's lines.
    targets = [r[1:] + [-1] for r in rows]
    for i in (1, 6):
        targets[i] = [-1] * len(rows[i])
    with pytest.raises(ValueError, match=r"train: data= rows 1 and 6 \(counting from 0\): .*2 of its 8 sequences "
                                         r"have no target \(lines 2 and 7: "):
        headlab.train(out=tmp_path / "new" / "x", data=dict(tokens=rows, targets=targets), steps=1)
    assert listing(tmp_path) == []
    run = headlab.train(out=tmp_path / "run", data=rows, **keywords(TINY))
    before = {p: (run.path / p).read_bytes() for p in ("data.jsonl", "checkpoint.safetensors")}
    with pytest.raises(ValueError, match="unknown flag --d-modle"):
        headlab.train(out=run.path, data=rows[:5], force=True, d_modle=16)
    assert {p: (run.path / p).read_bytes() for p in before} == before  # the old rows are back
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds files that are not a headlab run"):
        headlab.train(out=tmp_path / "mine", data=rows, steps=1)
    assert listing(tmp_path / "mine") == ["notes.txt"]


def test_read_data_gives_the_arrays_back(tmp_path):
    rows = ragged_rows(5)
    targets = [[-1] * (len(r) - 1) + [r[0]] for r in rows]
    path = tmp_path / "rows.jsonl"
    headlab.write_data(path, rows, targets, attend={"one-back": previous(rows)})
    data = headlab.read_data(path)
    assert set(data) == {"tokens", "targets", "lengths", "patterns", "roles", "sources"}
    assert data["lengths"].tolist() == [len(r) for r in rows]
    assert [data["tokens"][b, :len(r)].tolist() for b, r in enumerate(rows)] == rows
    assert [data["targets"][b, :len(r)].tolist() for b, r in enumerate(rows)] == targets
    assert (data["targets"][np.arange(6) >= data["lengths"][:, None]] == -1).all()
    keys, definition = data["patterns"]["one-back"]
    assert keys == previous(rows) and definition == 'the data file\'s "attend" pattern "one-back".'
    assert data["roles"] == {"one-back": "one-back"}  # a data file's roles are its patterns, as the CLI's
    again = tmp_path / "again.jsonl"
    headlab.write_data(again, [r[:n] for r, n in zip(data["tokens"].tolist(), data["lengths"])],
                       [y[:n] for y, n in zip(data["targets"].tolist(), data["lengths"])], attend={"one-back": keys})
    assert again.read_bytes() == path.read_bytes()
    # Without "targets" the reader's next-token targets; blank lines and a byte order mark are skipped.
    path.write_bytes(b'\xef\xbb\xbf{"tokens": [3, 1, 4]}\n\n  \n{"tokens": [1, 5]}')
    data = headlab.read_data(path, seq_len=4)
    assert data["tokens"].tolist() == [[3, 1, 4, 0], [1, 5, 0, 0]]
    assert data["targets"].tolist() == [[1, 4, -1, -1], [5, -1, -1, -1]] and data["patterns"] == {}


@pytest.mark.parametrize("line, match, bidirectional", [
    ('{"tokens": [1, true]}', r":2: tokens\[1\]: true is not an integer", False),
    ('{"tokens": [1, 2], "target": [1, 2]}', r':2: unknown key "target"', False),
    ('{"tokens": [1, 2], "tokens": [1]}', r'invalid JSON: the key "tokens" appears twice', False),
    ('{"tokens": [1, 2, 3], "attend": {"p": [null, 2, null]}}',
     r":2: attend\['p'\]\[1\]: key 2 is not a key query 1 can see: keys are in \[0, 1\] under causal", False),
    ('{"tokens": [1, 2, 3], "attend": {"p": [null, 3, null]}}',
     r":2: attend\['p'\]\[1\]: key 3 is not a key query 1 can see: keys are in \[0, 2\]$", True),
    ('[1, 2]', r":2: expected a JSON object", False),
    ('{"tokens": [1, 2, 3, 4, 5]}', r":2: 5 tokens, longer than seq_len 4", False),
    # A pattern no line gives a key could never be scored (headlab.analyze refuses it too).
    ('{"tokens": [1, 2, 3], "attend": {"p": [null, null, null]}}',
     r':2: "attend" pattern "p" gives no query a key in this line nor in any other', False),
])
def test_read_data_refuses_what_the_cli_refuses(tmp_path, line, match, bidirectional):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"tokens": [1, 2, 3]}\n' + line + "\n")
    with pytest.raises(ValueError, match=match):
        headlab.read_data(path, seq_len=4, bidirectional=bidirectional)
    done = subprocess.run([str(HEADLAB), "train", "--data", str(path), "--seq-len", "4", *TINY,
                           *(["--bidirectional"] if bidirectional else []), "--out", str(tmp_path / "r")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "bad.jsonl:2:" in done.stderr, done.stderr


def test_analyze_of_read_data_equals_analyze_data(mlp_run, mlp_model, tmp_path):
    T = mlp_model.spec["max_seq_len"]
    rows = [r for r in ragged_rows(6, lengths=(T, 3, T - 1, 4, T, 5))]
    path = tmp_path / "rows.jsonl"
    headlab.write_data(path, rows, attend={"one-back": previous(rows)})
    cli("analyze", mlp_run, "--data", path, "--out", tmp_path / "out", "--threads", "1")
    theirs = json.loads((tmp_path / "out" / "heads.json").read_text())
    ours = headlab.analyze(mlp_model, **headlab.read_data(path, seq_len=T))
    # What the CLI read: a checkpoint's step and path, a file's name, size and rows.
    for key in ("analyzed", "data", "data_file", "step", "checkpoint"):
        theirs.pop(key)
        ours.pop(key, None)
    assert_close(ours, theirs)
    assert {"name": "one-back", "definition": 'the data file\'s "attend" pattern "one-back".',
            "nests_with": ["previous-token"]} in ours["patterns"]
    # The file's pattern is its expected role, in both: the verdict looks for it.
    assert theirs["expected_roles"] == [{"role": "one-back", "pattern": "one-back"}]
    assert [(r["role"], r["pattern"]) for r in theirs["verdict"]["roles"]] == [("one-back", "one-back")]
    assert ours["verdict"]["roles"] == theirs["verdict"]["roles"]
    assert theirs["verdict"]["reasons"][0].startswith("expected roles found: ")


def test_the_clis_roles_and_corruption_of_a_file_equal_pythons(mlp_run, mlp_model, tmp_path):
    """`analyze --data F --scored-only P --expect Q --corrupted C` (QA26) gives
    what analyze(**read_data(F)) gives with the roles changed alike and C's
    tokens as `corrupted`."""
    T = mlp_model.spec["max_seq_len"]
    rows = [r for r in ragged_rows(6, lengths=(T, 3, T - 1, 4, T, 5))]
    path, corrupted = tmp_path / "rows.jsonl", tmp_path / "corrupted.jsonl"
    headlab.write_data(path, rows, attend={"one-back": previous(rows)})
    flipped = [list(reversed(r)) for r in rows]  # each as long as its clean row
    headlab.write_data(corrupted, flipped)
    cli("analyze", mlp_run, "--data", path, "--out", tmp_path / "out", "--threads", "1", "--scored-only", "one-back",
        "--expect", "previous-token", "--corrupted", corrupted)
    theirs = json.loads((tmp_path / "out" / "heads.json").read_text())
    batch = headlab.read_data(path, seq_len=T)
    batch["roles"] = {"previous-token": "previous-token"}
    ours = headlab.analyze(mlp_model, **batch, corrupted=flipped)
    assert theirs["expected_roles"] == [{"role": "previous-token", "pattern": "previous-token"}]
    assert theirs["patching"]["corruption"].startswith("the user's corrupted sequences of --corrupted")
    for key in ("analyzed", "data", "data_file", "step", "checkpoint"):
        theirs.pop(key)
        ours.pop(key, None)
    theirs["patching"].pop("corruption")
    ours["patching"].pop("corruption")
    assert_close(ours, theirs)


def test_the_readme_walkthroughs_data_is_what_it_says(tmp_path):
    """examples/marker_recall.py (README.md, "Your own data, pattern and
    question"): each target is the token before the latest marker, where
    "latest-marker" looks, the probe's corrupted lines change that token only,
    and headlab reads every file."""
    subprocess.run([sys.executable, str(REPO / "examples" / "marker_recall.py"), str(tmp_path)], check=True)
    recall, probe = headlab.read_data(tmp_path / "recall.jsonl"), headlab.read_data(tmp_path / "probe.jsonl")
    corrupted = headlab.read_data(tmp_path / "probe-corrupted.jsonl")
    assert len(recall["tokens"]) == 400 and len(probe["tokens"]) == 200
    assert list(recall["patterns"]) == ["latest-marker", "marker-prev"]
    assert list(probe["patterns"]) == ["latest-marker", "marker-prev", "before-marker"]
    for batch in (recall, probe):
        latest = batch["patterns"]["latest-marker"][0]
        for tokens, targets, keys in zip(batch["tokens"], batch["targets"], latest):
            for q, key in enumerate(keys):
                assert (targets[q] == -1) == (key is None)
                if key is not None:
                    assert tokens[key] == 1 and 1 not in tokens[key + 1:q + 1] and targets[q] == tokens[key - 1]
    changed = probe["tokens"] != corrupted["tokens"]
    assert (changed.sum(axis=1) == 1).all()
    for row, tokens in zip(changed, probe["tokens"]):
        assert row.argmax() == max(i for i, t in enumerate(tokens) if t == 1) - 1


def assert_close(ours, theirs, where="records"):
    """Equal, numbers within 1e-6: the CLI analyzes a file a chunk at a time
    (docs/head-metrics.md, "Analysis in chunks")."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), where
        for key in theirs:
            assert_close(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_close(a, b, f"{where}[{i}]")
    elif isinstance(theirs, float) and not isinstance(ours, bool):
        assert ours == pytest.approx(theirs, abs=1e-6), where
    else:
        assert ours == theirs, where


BAD = [
    (dict(tokens=[[1, -2, 3]]), ValueError, r"tokens: row 0, position 1: -2 is out of range: token ids are >= 0"),
    (dict(tokens=[[1, 2**31, 3]]), ValueError, r"tokens: row 0, position 1: 2147483648 is out of range"),
    (dict(tokens=[[1, 2], [3, 4, 5]], targets=[[1, 2], [3, -3, 5]]), ValueError,
     r"targets: row 1, position 1: -3 is out of range: targets are -1 \(none\) or a class >= 0"),
    (dict(tokens=[[1, 2], [3, 4, 5]], targets=[[1], [3, 4, 5]]), ValueError,
     r"targets\[0\]: 1 targets for the 2 tokens of tokens\[0\]"),
    (dict(tokens=[[1, 2], [3, 4, 5]], targets=[[1, 2], [3, 5]]), ValueError,
     r"targets\[1\]: 2 targets for the 3 tokens of tokens\[1\]"),
    # Sequences of different lengths take their targets per sequence: rows of equal
    # length are no padded array whose padding (the 4) would be dropped unsaid.
    (dict(tokens=[[1, 2], [3]], targets=[[1, 2], [3, 4]]), ValueError,
     r"targets\[1\]: 2 targets for the 1 tokens of tokens\[1\]"),
    (dict(tokens=[[1, 2], [3]], targets=np.array([[1, 2], [3, -1]])), ValueError,
     r"targets\[1\]: 2 targets for the 1 tokens of tokens\[1\]"),
    (dict(tokens=[[1.5, 2]]), ValueError, "expected integer ids, got dtype float64"),
    (dict(tokens=[[1, 2, 3]], lengths=[0]), ValueError, r"lengths: row 0: 0 is not in \[1, 3\]"),
    (dict(tokens=[[5], [6]]), ValueError, "no position has a target"),
    (dict(tokens=[[1, 2, 3]], targets=[[-1, -1, -1]]), ValueError, "no position has a target"),
    (dict(tokens=[[1, 2, 3]], attend={"p": [[None, 2, 1]]}), ValueError,
     r"attend\['p'\]: row 0, position 1: key 2 is not a key query 1 can see: keys are in \[0, 1\] under causal"),
    (dict(tokens=[[1, 2, 3]], attend={"p": [[None, 0, 3]]}, bidirectional=True), ValueError,
     r"position 2: key 3 is not a key query 2 can see: keys are in \[0, 2\]$"),
    (dict(tokens=[[1, 2, 3]], attend={"p": [[None, [], 1]]}), ValueError, r"position 1: an empty list; use None"),
    (dict(tokens=[[1, 2, 3]], attend={"p": [[None, 0, [1, 1]]]}), ValueError, r"position 2: \[1, 1\] lists a key twice"),
    (dict(tokens=[[1, 2, 3]], attend={"p": [[None, 0]]}), ValueError, r"expected one entry per token \(3\)"),
    (dict(tokens=[[1, 2, 3]], attend={"previous-token": [[None, 0, 1]]}), ValueError, "is a built-in pattern"),
    (dict(tokens=[[1, 2, 3]], attend={"a b": [[None, 0, 1]]}), ValueError, "has the character ' '"),
    (dict(tokens=[[1, 2, 3]], attend={"p": np.ones((3, 3), bool)}), ValueError, r"key 1 is not a key query 0 can see"),
    (dict(tokens=[[1, 2, 3]], attend={"p": "offset:1"}), TypeError, "expected per-sequence key lists"),
    (dict(tokens=[[1, 2, 3]], overwrite="yes"), TypeError, "overwrite must be True or False"),
    # headlab.analyze refuses a pattern that scores no query: so does the file of it.
    (dict(tokens=[[1, 2, 3], [4, 5]], attend={"p": [[None, None, None], None]}), ValueError,
     r"attend\['p'\] gives no query a key in any row, so no head could be scored on it"),
    (dict(tokens=[[1, 2, 3]], attend={"p": np.zeros((3, 3), bool)}), ValueError, r"attend\['p'\] gives no query a key"),
    # A mask is cut to each row: True only in a row's padding is no key.
    (dict(tokens=[[1, 2, 3], [4, 5]], attend={"p": np.eye(3, k=-1, dtype=bool)[None] & (np.arange(2) == 1)[:, None, None]
                                                & (np.arange(3) == 2)[None, :, None]}), ValueError,
     r"attend\['p'\] gives no query a key"),
]


@pytest.mark.parametrize("kwargs, error, match", BAD)
def test_bad_rows_are_named_and_nothing_is_written(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        headlab.write_data(tmp_path / "rows.jsonl", **kwargs)
    assert listing(tmp_path) == []


def test_bad_paths_are_refused_and_nothing_is_written(tmp_path, attn_run):
    rows = [[1, 2, 3]]
    (tmp_path / "old.jsonl").write_text("mine\n")
    with pytest.raises(FileExistsError, match=r"old.jsonl exists; pass overwrite=True"):
        headlab.write_data(tmp_path / "old.jsonl", rows)
    assert (tmp_path / "old.jsonl").read_text() == "mine\n"
    headlab.write_data(tmp_path / "old.jsonl", rows, overwrite=True)
    assert (tmp_path / "old.jsonl").read_text() == '{"tokens":[1,2,3]}\n'
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match=r"fifo: it is a FIFO, not a regular file"):
        headlab.write_data(tmp_path / "fifo", rows, overwrite=True)
    os.symlink(tmp_path / "old.jsonl", tmp_path / "link")
    with pytest.raises(ValueError, match=r"link: it is a symbolic link"):
        headlab.write_data(tmp_path / "link", rows, overwrite=True)
    with pytest.raises(IsADirectoryError, match="is a folder"):
        headlab.write_data(tmp_path, rows, overwrite=True)
    with pytest.raises(FileNotFoundError, match="does not exist; create it first"):
        headlab.write_data(tmp_path / "nowhere" / "rows.jsonl", rows)
    with pytest.raises(ValueError, match=r"is inside the run folder .*attn, whose files are headlab's own"):
        headlab.write_data(attn_run / "rows.jsonl", rows)
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / ".headlab").write_text('{"headlab": "sweep"}')
    with pytest.raises(ValueError, match=r"is inside the sweep folder"):
        headlab.write_data(tmp_path / "sweep" / "rows.jsonl", rows)
    assert listing(tmp_path) == ["fifo", "link", "old.jsonl", "sweep", "sweep/.headlab"]
    assert not (attn_run / "rows.jsonl").exists()


def test_a_bytes_path_is_a_path(tmp_path):
    # os.fspath gives bytes back, which pathlib refused with its own TypeError.
    path = tmp_path / "rows.jsonl"
    assert headlab.write_data(os.fsencode(path), [[1, 2, 3]]) == path
    assert headlab.read_data(os.fsencode(path))["tokens"].tolist() == [[1, 2, 3]]
