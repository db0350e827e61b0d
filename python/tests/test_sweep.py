"""headlab.Sweep reads a `headlab sweep` folder; Run and Sweep each refuse the other's."""
import json
import os
import re

import pytest

import headlab
from conftest import cli


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """Two runs of 3 steps (well under a second), seeds 2 and 10: natural order."""
    out = tmp_path_factory.mktemp("sweeps") / "s"
    cli("sweep", "--seeds", "2,10", "--heads", "2", "--steps", "3", "--d-model", "16", "--batch", "8",
        "--eval-batch", "8", "--analyze-every", "0", "--log-every", "3", "--jobs", "1", "--out", out)
    return out


def test_sweep_reads_its_files_and_runs(sweep_dir):
    sweep = headlab.Sweep(sweep_dir)
    assert repr(sweep) == f"<headlab.Sweep {sweep_dir}>"
    # The settings every run shares: config.json less what the sweep varies (here heads and seed).
    on_file = json.loads((sweep_dir / "config.json").read_text())
    assert "seed" in on_file and "heads" in on_file
    assert sweep.config == {k: v for k, v in on_file.items() if k not in ("seed", "heads")}
    assert sweep.summary == json.loads((sweep_dir / "sweep.json").read_text())
    assert sweep.summary["format"] == "headlab-sweep/1"
    runs = sweep.runs
    assert list(runs) == ["h2-s2", "h2-s10"]
    assert [r["dir"] for r in sweep.summary["runs"]] == list(runs)
    for name, run in runs.items():
        assert isinstance(run, headlab.Run) and run.path == sweep_dir / name
        assert sweep.settings[name] == {"heads": 2, "seed": run.config["seed"]}
        assert run.heads["layers"] == 1


def test_run_of_a_sweep_folder_points_to_sweep(sweep_dir):
    with pytest.raises(ValueError, match=re.escape(
            f"{sweep_dir} is a sweep folder; its runs are {sweep_dir}/<name>/ (headlab.Sweep('{sweep_dir}'))")):
        headlab.Run(sweep_dir)


def test_sweep_refuses_what_is_no_sweep(sweep_dir, tmp_path):
    run = sweep_dir / "h2-s2"
    with pytest.raises(ValueError, match=re.escape(f"{run} is a run folder, not a sweep's (headlab.Run('{run}'))")):
        headlab.Sweep(run)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    (mine / "sweep.json").write_text('{"mine": 1}')  # not a sweep's: no format line, no lock, no marker
    with pytest.raises(ValueError, match="is not a sweep folder"):
        headlab.Sweep(mine)
    with pytest.raises(FileNotFoundError, match="no such sweep folder"):
        headlab.Sweep(tmp_path / "missing")


def test_a_sharded_sweep_has_no_summary_until_collected(sweep_dir, tmp_path):
    # As a shard leaves its folder before `sweep --collect`: the marker, no sweep.json.
    shard = tmp_path / "shard"
    shard.mkdir()
    (shard / ".headlab").write_bytes((sweep_dir / ".headlab").read_bytes())
    (shard / "config.json").write_bytes((sweep_dir / "config.json").read_bytes())
    sweep = headlab.Sweep(shard)
    assert sweep.runs == {}
    with pytest.raises(FileNotFoundError, match=re.escape(f"headlab sweep --collect {shard}")):
        sweep.summary


def test_is_sweep_folder_is_the_cli_s_own_rule(sweep_dir, tmp_path):
    # The binding of train::is_sweep_folder, which headlab.Sweep and headlab.Run call (no Python copy).
    from headlab import _core, _sweep

    mine = tmp_path / "mine"  # unmarked: the user's files, a sweep.json of their own
    mine.mkdir()
    (mine / "sweep.json").write_text('{"mine": 1}')
    older = tmp_path / "older"  # a sweep from before the marker and sweep.lock: its sweep.json alone
    older.mkdir()
    (older / "sweep.json").write_bytes((sweep_dir / "sweep.json").read_bytes())
    odd = tmp_path / os.fsdecode(b"sw\xe9ep")  # a name that is not UTF-8
    odd.mkdir()
    (odd / ".headlab").write_bytes((sweep_dir / ".headlab").read_bytes())
    cases = [(sweep_dir, True, "sweep"), (sweep_dir / "h2-s2", False, "run"), (mine, False, ""), (older, True, ""),
             (odd, True, "sweep"), (tmp_path / "missing", False, "")]
    for folder, sweep, marker in cases:
        assert _core.is_sweep_folder(os.fsencode(folder)) is sweep, folder
        assert _sweep.is_sweep_folder(folder) is sweep, folder
        assert _core.folder_marker(os.fsencode(folder)) == marker, folder
    assert headlab.Sweep(older).summary["format"] == "headlab-sweep/1"


def test_a_task_list_sweep_s_runs_are_read_by_their_config_not_their_names(tmp_path):
    # --task a,b names its folders taskA-h2-s0; first-prev-sum's own "-s" blurs the name's seed part.
    out = tmp_path / "tasks"
    cli("sweep", "--task", "first-prev-sum,previous", "--seeds", "0,1", "--heads", "2", "--steps", "2", "--d-model",
        "16", "--batch", "8", "--eval-batch", "8", "--analyze-every", "0", "--jobs", "1", "--out", out)
    sweep = headlab.Sweep(out)
    assert sweep.settings == {
        "taskfirst-prev-sum-h2-s0": {"task": "first-prev-sum", "heads": 2, "seed": 0},
        "taskfirst-prev-sum-h2-s1": {"task": "first-prev-sum", "heads": 2, "seed": 1},
        "taskprevious-h2-s0": {"task": "previous", "heads": 2, "seed": 0},
        "taskprevious-h2-s1": {"task": "previous", "heads": 2, "seed": 1},
    }
    for entry in sweep.summary["runs"]:  # what the C++ side planned for each folder
        assert sweep.settings[entry["dir"]] == {**entry["settings"], "heads": entry["heads"], "seed": entry["seed"]}
    # A sweep from before the grid (no "grid" in its sweep.json): heads and seed.
    summary = sweep.summary
    del summary["grid"]
    (out / "sweep.json").write_text(json.dumps(summary, indent=2))
    assert sweep.settings["taskprevious-h2-s1"] == {"heads": 2, "seed": 1}
