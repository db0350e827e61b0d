"""The threads the engine's calls run on (docs/python.md, "Threads"): by
default each model's calls run at the count `headlab analyze RUN` picks for
its run (1 thread for the toy models, whose parallel regions cost more than
they gain and wait for a descheduled thread whenever another process keeps
the cores busy; one per core from 10 GFLOP per training step);
set_num_threads(n) chooses one count for every call of the session."""
import numbers

from . import _core


def set_num_threads(n):
    """Every later call (forward, run_with_cache, run_with_hooks, gradients,
    analyze, patching) of every model runs on n threads; 0 gives each model
    its own count back (model.threads). n in [0, the cores]. torch's name;
    headlab.train and sweep take threads= as the CLI's --threads."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"set_num_threads: n is an int (0: each model's own count), got {n!r}")
    _core.set_num_threads(int(n))


def get_num_threads():
    """The count set_num_threads chose, 0 when each model runs at its own
    (model.threads says which count a model's calls use)."""
    return _core.get_num_threads()
