"""A run trained from Python rows keeps its data in its folder: moved with
`mv`, the folder reads its own data.jsonl (the recorded hash) from Python and
from train(resume=...); an edited one is refused."""
import shutil

import numpy as np
import pytest

import headlab

FLAGS = dict(layers=1, heads=2, d_model=16, attn_only=True, steps=2, batch=4, eval_batch=4, analyze_every=0,
             threads=1)


def test_a_moved_run_folder_reads_its_own_data(tmp_path, capfd):
    rows = np.random.default_rng(0).integers(0, 8, size=(8, 6))
    headlab.train(out=tmp_path / "run", data=rows, **FLAGS)
    shutil.move(tmp_path / "run", tmp_path / "moved")
    moved = headlab.Run(tmp_path / "moved")
    # The model's config names the file it reads now (the checkpoint still records the old path).
    assert moved.model().config["data"] == str(tmp_path / "moved" / "data.jsonl")
    capfd.readouterr()
    batch = moved.model().task_batch()
    np.testing.assert_array_equal(batch["tokens"], rows[:4])
    note = capfd.readouterr().err
    assert f"is {tmp_path / 'moved' / 'data.jsonl'}, in place of {tmp_path / 'run' / 'data.jsonl'} (missing)" in note

    # The same rows resume it (they are the folder's own file), recorded where it now is.
    resumed = headlab.train(resume=tmp_path / "moved", data=rows, steps=3)
    assert [m["step"] for m in resumed.metrics][-1] == 3
    assert resumed.config["data"] == str(tmp_path / "moved" / "data.jsonl")
    with pytest.raises(ValueError, match=r"data= differs from the rows the run in .*moved trained on"):
        headlab.train(resume=tmp_path / "moved", data=rows[:6], steps=4)

    # A copy whose data was edited, the original gone: refused, naming both.
    shutil.copytree(tmp_path / "moved", tmp_path / "copy")
    with open(tmp_path / "copy" / "data.jsonl", "a") as f:
        f.write('{"tokens": [1, 2, 3]}\n')
    shutil.rmtree(tmp_path / "moved")
    with pytest.raises(ValueError, match=r"it is missing, and the run folder's own .*copy/data.jsonl is another file"):
        headlab.Run(tmp_path / "copy").model().task_batch()
