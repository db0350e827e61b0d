#!/usr/bin/env python3
"""What caching every activation costs: headlab's run_with_cache of every hook
point it caches by default (names=None: all but TransformerLens's copy points,
hook_attn_in, hook_q_input ..., which come only when named; docs/python.md
"Copy points") against a plain forward pass, on the medium preset's model and
batch (`headlab bench --preset medium`: V256 T128 B16 d256 h8 L4, MLP and LayerNorm).

    /usr/bin/python3 bench/python_hooks.py [--build build] [--threads 0] [--rounds 20]

Trains the preset's model one step into a temporary folder (its weights do not
matter for the timing), then times each call --rounds times after two warm-ups
and prints the medians and their ratio (docs/python.md: the target is <= 1.5x)."""
import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=str(Path(__file__).resolve().parents[1] / "build"))
    p.add_argument("--threads", type=int, default=0, help="0: all cores")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    import numpy as np

    import headlab

    # The run's summary to stderr: stdout holds the result alone (one JSON line with --json).
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(sys.stderr):
        run = headlab.train(out=Path(tmp) / "medium", task="previous", vocab=256, seq_len=128, batch=16, d_model=256,
                            heads=8, layers=4, steps=1, eval_batch=1, analyze_every=0, threads=a.threads, quiet=True)
        model = run.model()
    tokens = np.random.default_rng(0).integers(0, 256, size=(16, 128))

    def median_seconds(fn):
        for _ in range(2):
            fn()
        times = []
        for _ in range(a.rounds):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    plain = median_seconds(lambda: model(tokens))
    cached = median_seconds(lambda: model.run_with_cache(tokens))
    # What the timed call caches, counted from its own cache, and the copy points it leaves out.
    points = len(model.run_with_cache(tokens)[1])
    result = {"preset": "medium", "threads": a.threads, "hook_points": points,
              "copy_points_not_cached": len(model.hook_names()) - points,
              "forward_ms": plain * 1e3, "run_with_cache_ms": cached * 1e3, "ratio": cached / plain}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"medium preset, {points} hook points cached (not the {result['copy_points_not_cached']} copy points), "
              f"threads {a.threads}: forward {plain * 1e3:.2f} ms, run_with_cache {cached * 1e3:.2f} ms, "
              f"ratio {cached / plain:.2f}x")


if __name__ == "__main__":
    main()
