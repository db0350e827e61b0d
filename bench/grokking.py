#!/usr/bin/env python3
"""Grokking over seeds: Nanda et al.'s (2023) modular-addition setting.

    bench/grokking.py --seeds 1,2,3,4,5 [--p 47] [--train-fraction 0.5] [--steps 4000]
                      [--weight-decay 1] [--root runs/grok]

Trains one run per seed, one after another, each in ROOT/p{P}-wd{WD}-seed{S}
(1 layer, d 128, 4 heads, d_mlp 512, ReLU, no LayerNorm, AdamW lr 1e-3,
betas 0.9,0.98, weight decay 1, full batch, --init-std nanda, --loss-dtype
f64, no clipping). The defaults (p = 47, half of the p^2 pairs trained on,
4000 steps) are the setting that groks within minutes on a CPU
(docs/reproductions.md); Nanda et al.'s own is --p 113 --train-fraction 0.3,
which grokked at step 5250-7550 in 4 of 4 seeds (docs/reproductions.md): --steps
9000, about half an hour per seed on one core. A folder that exists is resumed
(`headlab train --resume`), so an interrupted bench goes on where it stopped,
and a larger --steps extends finished runs. Then prints per seed the first
logged step at which training accuracy (over the whole training set) is 100%
and held-out accuracy (over every held-out pair) passes 50/90/99%, and the
training wall time the runs recorded. --report-only prints the table
without training. Not a test: at p = 113 a run takes half an hour on one core.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=int, default=47, help="the modulus (the vocabulary is p + 1)")
    ap.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated seeds (each sets the weights and the split)")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--weight-decay", type=float, default=1.0)
    ap.add_argument("--train-fraction", type=float, default=0.5, help="the share of the p^2 pairs trained on")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--analyze-every", type=int, default=500)
    ap.add_argument("--root", default="runs/grok", help="folder of the runs")
    ap.add_argument("--report-only", action="store_true", help="print the table of the runs as they are")
    ap.add_argument("extra", nargs="*", help="more flags for a new run (after --)")
    return ap.parse_args()


def headlab():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("HEADLAB", os.path.join(here, "..", "build", "headlab"))
    if not os.access(path, os.X_OK):
        sys.exit("grokking: no headlab at %s (build it, or set HEADLAB=path)" % path)
    return path


def train(exe, args, seed, folder):
    if os.path.exists(os.path.join(folder, "config.json")):
        cmd = [exe, "train", "--resume", folder, "--steps", str(args.steps)]
    else:
        cmd = [exe, "train", "--out", folder, "--task", "modular-addition", "--vocab", str(args.p + 1),
               "--train-fraction", str(args.train_fraction), "--batch", "0", "--eval-batch", str(args.p * args.p),
               "--layers", "1", "--d-model", "128", "--heads", "4", "--d-ff", "512", "--activation", "relu",
               "--no-layernorm", "--lr", "1e-3", "--weight-decay", str(args.weight_decay), "--betas", "0.9,0.98",
               "--clip", "0", "--init-std", "nanda", "--loss-dtype", "f64", "--seed", str(seed),
               "--steps", str(args.steps), "--threads", str(args.threads), "--log-every", str(args.log_every),
               "--analyze-every", str(args.analyze_every), "--checkpoint-every", "500"] + args.extra
    print("+ " + " ".join(cmd), flush=True)
    start = time.time()
    code = subprocess.call(cmd, stdout=subprocess.DEVNULL)
    # The wall time of every invocation, summed over resumes.
    with open(os.path.join(folder, "bench-wall-seconds.txt"), "a") as f:
        f.write("%.1f\n" % (time.time() - start))
    if code != 0:
        sys.exit("grokking: %s exited %d" % (" ".join(cmd), code))


def first_step(lines, key, at_least):
    for line in lines:
        if key in line and line[key] >= at_least:
            return line["step"]
    return None


def summary(folder):
    metrics = os.path.join(folder, "metrics.jsonl")
    if not os.path.exists(metrics):
        return None
    lines = [json.loads(l) for l in open(metrics) if l.strip()]
    lines = [l for l in lines if "eval_accuracy" in l]
    wall = os.path.join(folder, "bench-wall-seconds.txt")
    seconds = sum(float(x) for x in open(wall)) if os.path.exists(wall) else float("nan")
    last = lines[-1] if lines else {}
    return {"steps": last.get("step", 0), "train100": first_step(lines, "train_accuracy", 1.0),
            "h50": first_step(lines, "eval_accuracy", 0.5), "h90": first_step(lines, "eval_accuracy", 0.9),
            "h99": first_step(lines, "eval_accuracy", 0.99), "final": last.get("eval_accuracy", float("nan")),
            "minutes": seconds / 60}


def main():
    args = parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s]
    folders = {s: os.path.join(args.root, "p%d-wd%g-seed%d" % (args.p, args.weight_decay, s)) for s in seeds}
    if not args.report_only:
        exe = headlab()
        for s in seeds:
            train(exe, args, s, folders[s])
    show = lambda v: "-" if v is None else str(v)
    print("| seed | steps | train 100% | held-out 50% | held-out 90% | held-out 99% | final held-out | wall (min) |")
    print("|---|---|---|---|---|---|---|---|")
    grokked = 0
    for s in seeds:
        r = summary(folders[s])
        if r is None:
            print("| %d | not run |" % s)
            continue
        # Grokked: 90% held-out at a step at least twice the one training reached 100% at.
        grokked += r["train100"] is not None and r["h90"] is not None and r["h90"] >= 2 * r["train100"]
        print("| %d | %d | %s | %s | %s | %s | %.1f%% | %.1f |" % (s, r["steps"], show(r["train100"]), show(r["h50"]),
                                                                   show(r["h90"]), show(r["h99"]),
                                                                   100 * r["final"], r["minutes"]))
    print("grokked (90%% held-out at >= 2x the step of 100%% training): %d of %d" % (grokked, len(seeds)))


if __name__ == "__main__":
    main()
