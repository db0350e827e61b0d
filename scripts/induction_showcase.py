#!/usr/bin/env python3
"""Summarize induction-task runs (the README's showcase): per run and per group.

    scripts/induction_showcase.py RUN_DIR...
    scripts/induction_showcase.py RUN_DIR... --against REFERENCE_DIR...

With --against, each run is also compared with the reference run in the same
place (the same seed in another precision, say): whether the verdict and the
labels agree, and how far its training loss (the 50-step windows of
metrics.jsonl) strays from the reference's, in three phases: through the
plateau and the loss drop (steps 0-599, relative gap), the fall that follows
(600-999, absolute) and the rest (from 1000, absolute).

Reads each run folder's heads.json and metrics.jsonl, as headlab writes them:
  success        final eval accuracy >= 0.9 on the held-out batch
  prev L0        a layer-0 head whose previous-token score at the sources
                 (task_scores.previous_token, docs/head-metrics.md) is >= 0.5
  ind L1         a layer-1 head whose induction score at the targets is >= 0.5
  emerged        the step from which that score (the best head's) stays >= 0.5
  drop           the loss-drop step (eval loss halfway down from its first value)
  phase change   visible when the loss stays within 20% of its total fall for at
                 least 3 logged steps before the drop (a plateau) and the layer-1
                 induction head emerges within 2 analysis intervals of the drop
Runs are grouped by their number of layers."""
import argparse
import json
from pathlib import Path

THRESHOLD = 0.5


def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def emergence(history, key, heads):
    """First analysis step from which max over `heads` of key stays >= THRESHOLD."""
    since = None
    for line in history:
        if "heads" not in line:
            continue
        vals = [line["heads"][h].get(key) for h in heads if h in line["heads"]]
        vals = [v for v in vals if v is not None]
        if not vals:
            continue
        if max(vals) >= THRESHOLD:
            since = line["step"] if since is None else since
        else:
            since = None
    return since


def loss_drop(history):
    pts = [(l["step"], l["eval_loss"]) for l in history if "eval_loss" in l]
    if not pts:
        return None, False
    first, low = pts[0][1], min(p[1] for p in pts)
    if first - low < 0.05:
        return None, False
    drop = next(s for s, v in pts if v <= first - (first - low) / 2)
    before = [v for s, v in pts if s < drop]
    plateau = len(before) >= 3 and all(first - v <= 0.2 * (first - low) for v in before[:3])
    return drop, plateau


def summarize(run):
    heads = json.load(open(run / "heads.json"))
    history = lines(run / "metrics.jsonl")
    config = json.load(open(run / "config.json"))
    by_layer = {}
    for h in heads["heads"]:
        by_layer.setdefault(h["layer"], []).append(h)
    task = lambda h, k: (h.get("task_scores") or {}).get(k)
    l0 = by_layer.get(0, [])
    l1 = by_layer.get(1, [])
    best_prev = max((task(h, "previous_token") or 0 for h in l0), default=0)
    best_ind1 = max((task(h, "induction") or 0 for h in l1), default=None)
    best_ind0 = max((task(h, "induction") or 0 for h in l0), default=0)
    drop, plateau = loss_drop(history)
    ind_emerged = emergence(history, "task_induction", [h["name"] for h in l1]) if l1 else None
    prev_emerged = emergence(history, "task_previous_token", [h["name"] for h in l0])
    every = config.get("analyze-every", 100)
    visible = bool(drop is not None and plateau and ind_emerged is not None and abs(ind_emerged - drop) <= 2 * every)
    return {
        "run": str(run), "layers": heads["layers"], "accuracy": heads["accuracy"], "loss": heads["loss"],
        "success": heads["accuracy"] is not None and heads["accuracy"] >= 0.9,
        "prev_L0": best_prev, "ind_L1": best_ind1, "ind_L0": best_ind0,
        "has_prev_L0": best_prev >= THRESHOLD, "has_ind_L1": best_ind1 is not None and best_ind1 >= THRESHOLD,
        "prev_emerged": prev_emerged, "ind_emerged": ind_emerged, "drop": drop, "phase_change": visible,
        "labels": " ".join(h["name"] + ":" + h["label"] for h in heads["heads"]),
        "verdict": (heads["verdict"]["success"], heads["verdict"]["specialized"], heads["verdict"]["distinct_labels"]),
        "windows": {l["step"]: l["loss"] for l in history if "loss" in l},
    }


def compare(run, ref):
    """One line: run against its reference run."""
    a, b = ref["windows"], run["windows"]
    steps = sorted(set(a) & set(b))
    phase = lambda lo, hi, rel: max((abs(b[s] - a[s]) / (a[s] if rel else 1) for s in steps if lo < s <= hi), default=0)
    same = lambda k: "same" if run[k] == ref[k] else f"{ref[k]} -> {run[k]}"
    score = lambda k: " -> ".join("-" if r[k] is None else f"{r[k]:.2f}" for r in (ref, run))
    return (f"{Path(run['run']).name} vs {Path(ref['run']).name}: verdict {same('verdict')}, labels {same('labels')}, "
            f"accuracy {ref['accuracy']:.4f} -> {run['accuracy']:.4f}, prev L0 {score('prev_L0')}, "
            f"ind L1 {score('ind_L1')}, emerged {same('ind_emerged')}, "
            f"drop {same('drop')}; loss windows: steps 0-599 {100 * phase(0, 600, True):.1f}%, "
            f"600-999 {phase(600, 1000, False):.3f}, 1000- {phase(1000, float('inf'), False):.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a run folder of headlab train")
    parser.add_argument("--against", nargs="+", metavar="REFERENCE_DIR", default=[],
                        help="compare each run with the reference run in the same place")
    args = parser.parse_args()
    if args.against and len(args.against) != len(args.runs):
        parser.error(f"--against takes one reference run per run: {len(args.runs)} runs, {len(args.against)} references")
    for p in args.runs + args.against:
        for name in ("heads.json", "metrics.jsonl"):
            if not (Path(p) / name).is_file():
                parser.exit(2, f"{parser.prog}: error: {p} has no {name} (not a finished headlab run folder)\n")
    runs = [summarize(Path(p)) for p in args.runs]
    fmt = lambda v: "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
    print("run                              acc   prevL0@src indL1@tgt indL0@tgt prev-emerged ind-emerged drop  phase  labels")
    for r in runs:
        print(f"{Path(r['run']).name:32} {fmt(r['accuracy']):5} {fmt(r['prev_L0']):10} {fmt(r['ind_L1']):9} "
              f"{fmt(r['ind_L0']):9} {fmt(r['prev_emerged']):12} {fmt(r['ind_emerged']):11} {fmt(r['drop']):5} "
              f"{'yes' if r['phase_change'] else 'no':6} {r['labels']}")
    for layers in sorted({r["layers"] for r in runs}):
        g = [r for r in runs if r["layers"] == layers]
        n = len(g)
        count = lambda k: sum(1 for r in g if r[k])
        print(f"\n{layers} layer(s), {n} runs: success {count('success')}/{n}, previous-token head in layer 0 "
              f"{count('has_prev_L0')}/{n}, induction head in layer 1 {count('has_ind_L1')}/{n}, "
              f"phase change visible {count('phase_change')}/{n}")
        acc = sorted(r["accuracy"] for r in g)
        print(f"  accuracy: min {acc[0]:.3f} median {acc[n // 2]:.3f} max {acc[-1]:.3f}")
        em = sorted(r["ind_emerged"] for r in g if r["ind_emerged"] is not None)
        dr = sorted(r["drop"] for r in g if r["drop"] is not None)
        if em:
            print(f"  induction emergence steps: {em}")
        if dr:
            print(f"  loss-drop steps: {dr}")
    if args.against:
        print()
        for run, ref in zip(runs, [summarize(Path(p)) for p in args.against]):
            print(compare(run, ref))


if __name__ == "__main__":
    main()
