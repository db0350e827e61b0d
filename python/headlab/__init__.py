"""headlab from Python: load a checkpoint, run it with caches and hooks, analyze
its heads on your own sequences, train through the CLI's code path.

    import headlab
    model = headlab.load("runs/induction")           # a run folder or a checkpoint
    logits, cache = model.run_with_cache(tokens)     # TransformerLens names and layouts
    records = headlab.analyze(model, tokens)         # what heads.json holds
    run = headlab.train(out="runs/x", task="induction", layers=2, attn_only=True)

docs/python.md is the reference. torch, pandas and matplotlib are imported
only by the calls that need them, so importing headlab stays cheap.
"""
from ._model import Model, load
from ._run import Run, train
from ._analyze import analyze

__all__ = ["Model", "Run", "analyze", "load", "train"]
