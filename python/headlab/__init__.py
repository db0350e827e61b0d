"""headlab from Python: load a checkpoint, run it with caches and hooks, analyze
its heads on your own sequences, train through the CLI's code path.

    import headlab
    model = headlab.load("runs/induction")           # a run folder or a checkpoint
    logits, cache = model.run_with_cache(tokens)     # TransformerLens names and layouts
    records = headlab.analyze(model, tokens)         # what heads.json holds
    attrs, labels = headlab.logit_attribution(model, tokens)  # each component's direct logit
    grid = headlab.patching.resid_pre(model, clean, corrupted)  # [layers, T], as transformer_lens.patching
    run = headlab.train(out="runs/x", task="induction", layers=2, attn_only=True)
    headlab.write_data("rows.jsonl", tokens, targets)  # a data file the CLI reads
    run = headlab.train(out="runs/y", data=tokens)     # ... or written into the run
    sweep = headlab.sweep(out="runs/s", seeds="0-4", heads=[1, 2])   # `headlab sweep`: a Sweep
    sweep = headlab.Sweep("runs/s")                    # a `headlab sweep` folder: .summary, .runs

docs/python.md is the reference. torch, pandas and matplotlib are imported
only by the calls that need them, so importing headlab stays cheap.
"""
from ._model import Model, load
from ._run import Run, train
from ._sweep import Sweep, sweep
from ._analyze import analyze
from ._attribution import logit_attribution
from ._cache import ActivationCache
from ._names import get_act_name
from ._data import read_data, write_data
from ._factored import FactoredMatrix
from ._memory import release_memory
from ._threads import get_num_threads, set_num_threads
from . import _patching as patching

# `import headlab.patching as patching` too, as TransformerLens users write it.
import sys as _sys
_sys.modules[__name__ + ".patching"] = patching

__all__ = ["ActivationCache", "FactoredMatrix", "Model", "Run", "Sweep", "analyze", "get_act_name",
           "get_num_threads", "load", "logit_attribution", "patching", "read_data", "release_memory",
           "set_num_threads", "sweep", "train", "write_data"]
