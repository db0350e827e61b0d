"""headlab.sweep and headlab.Sweep: a folder `headlab sweep` writes, and its runs."""
import json
import os
import re
from pathlib import Path

from . import _core


def _marker(folder):
    """The kind a folder's marker (.headlab) names, "" without one: the C++
    side's own reading of it (train/run_folder.h)."""
    return _core.folder_marker(os.fsencode(folder))


def is_sweep_folder(folder):
    """Whether `folder` is a sweep's, by the C++ side's own rule
    (train/sweep_folder.h): a marker saying "sweep"; without a marker, a
    regular sweep.lock, or a sweep.json that starts as a sweep's (a sweep from
    before sweep.lock). A folder marked otherwise (a run's) is never one."""
    return _core.is_sweep_folder(os.fsencode(folder))


def sweep(out=None, **flags):
    """Trains a sweep as `headlab sweep --out OUT --flag value ...` does, and
    returns its headlab.Sweep. Flags are the CLI's, with _ for - and lists for
    a grid: sweep(out="runs/s", seeds="0-4", heads=[1, 2], lr=[1e-3, 3e-3],
    attn_only=[True, False]). sweep(resume="runs/s") continues a stopped one
    (`headlab sweep --resume`, no out=); force=True overwrites an earlier
    sweep's runs; help=True prints the flags. Unlike train, the sweep runs the
    headlab program as a child (each of its runs is a process of its own),
    its output through sys.stdout as it comes."""
    from ._program import run
    from ._run import _flag_args, _is_rows

    if flags.pop("help", False):
        run("sweep", "--help")
        return None
    for key in ("data", "eval_data"):
        if _is_rows(flags.get(key)):
            raise TypeError(f"sweep: {key}= takes a data file's path, got {type(flags[key]).__name__}: every run of "
                            f"a sweep reads the one file; write the rows with headlab.write_data(path, tokens, "
                            f"targets) and pass {key}=path")
    named = {"out": out, **{key: flags.get(key) for key in ("resume", "collect", "redraw")}}
    for name, path in named.items():
        if path is not None and not os.fspath(path):  # the CLI would choose a folder of its own for --out ""
            raise ValueError(f"sweep: {name}= is empty; give a sweep folder")
    folder = next((path for path in named.values() if path is not None), None)
    if folder is None:
        raise ValueError("sweep: give out=, the sweep folder to write (or resume=, a stopped sweep's folder to "
                         "continue)")
    run("sweep", *([] if out is None else [f"--out={os.fspath(out)}"]), *_flag_args(flags))
    return Sweep(folder)


def _natural(name):
    """h2-s2 before h2-s10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


class Sweep:
    """A sweep folder (`headlab sweep --out DIR`): config.json, sweep.json and
    one run folder per (configuration, seed)."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such sweep folder")
        if not is_sweep_folder(self.path):
            if _marker(self.path) == "run":
                raise ValueError(f"{self.path} is a run folder, not a sweep's (headlab.Run({str(self.path)!r}))")
            raise ValueError(f"{self.path} is not a sweep folder (no .headlab marker saying sweep, no sweep.lock, no "
                             "sweep.json of a sweep)")

    def __repr__(self):
        return f"<headlab.Sweep {self.path}>"

    @property
    def config(self):
        """config.json without the flags the sweep varies (its grid's, heads
        and seed: `settings` has each run's): the settings every run shares.
        config.json itself holds their base values too, which no run need
        have trained with."""
        config = json.loads((self.path / "config.json").read_text())
        for flag in [*self._grid_flags(), "heads", "seed"]:
            config.pop(flag, None)
        return config

    @property
    def summary(self):
        """sweep.json: the plan, every finished run's results, and the rates
        per configuration and per varied flag."""
        path = self.path / "sweep.json"
        if not path.exists():
            raise FileNotFoundError(f"{path}: no sweep.json yet (a sharded sweep gets it from `headlab sweep "
                                    f"--collect {self.path}`)")
        return json.loads(path.read_text())

    @property
    def runs(self):
        """{name: headlab.Run} of the sweep's run folders that hold a run
        (config.json or a checkpoint: finished, failed or still training), in
        natural order of their names (h2-s2 before h2-s10)."""
        from ._run import Run

        names = [p.name for p in self.path.iterdir()
                 if p.is_dir() and _marker(p) == "run"
                 and ((p / "config.json").exists() or (p / "checkpoint.safetensors").exists())]
        return {name: Run(self.path / name) for name in sorted(names, key=_natural)}

    @property
    def settings(self):
        """{name: {flag: value}} of each run in `runs`: the flags the sweep's
        grid varies, then heads and seed, as the run's own config.json holds
        them. Never read from the folder's name, whose parts a value may
        blur: `taskfirst-prev-sum-h2-s0` is task first-prev-sum, heads 2, seed 0."""
        flags = [*self._grid_flags(), "heads", "seed"]
        return {name: {flag: run.config.get(flag) for flag in flags} for name, run in self.runs.items()}

    def _grid_flags(self):
        """The flags of the sweep's grid, from sweep.json's plan or, before
        `--collect`, a shard's file (the same plan in each); none without one."""
        for path in [self.path / "sweep.json", *sorted(self.path.glob("shard-*-of-*.json"))]:
            if not path.is_file():  # nor a FIFO, whose read would wait
                continue
            try:
                grid = json.loads(path.read_text()).get("grid", {})
            except (OSError, ValueError, AttributeError):
                continue
            return list(grid) if isinstance(grid, dict) else []
        return []
