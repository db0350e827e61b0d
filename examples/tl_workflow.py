#!/usr/bin/env python3
"""TransformerLens's exploratory workflow on a headlab model, from training to
the weights (docs/python.md has each call): train the 2-layer induction model,
then on a clean/corrupted pair built here read the logit lens, the direct logit
attribution of each head, the attention scores from the cache against
headlab.analyze's, activation and path patching, zero and mean ablation, the
K-composition from the weights, and the PyTorch twin.

    PYTHONPATH=build/python /usr/bin/python3 examples/tl_workflow.py [RUN_FOLDER] [--steps N] [--seed S]

The corruption changes one token: the one after the segment's first copy of
the query's token, so that the induction heads copy another token (the logit
difference flips sign) while every earlier position is as it was."""
import argparse

import numpy as np

import headlab
from headlab import patching


def pair(model, rows=64, seed=123):
    """clean, corrupted [B, T] (the token after the earlier copy changed), moved [B, T] (the earlier copy
    of the query's token changed: nothing to find), the query position, each row's right and wrong answer."""
    rng = np.random.default_rng(seed)
    V, T = model.cfg.d_vocab, model.cfg.n_ctx
    span, first, second, i = T // 4, 2, T // 2 + 2, 3  # a segment of T/4 tokens, repeated; the query its token i
    clean = np.empty((rows, T), np.int64)
    right, wrong, gone = np.empty(rows, np.int64), np.empty(rows, np.int64), np.empty(rows, np.int64)
    for b in range(rows):
        segment = rng.choice(V, span, replace=False)
        filler = np.setdiff1d(np.arange(V), segment)
        clean[b] = rng.choice(filler, T)
        clean[b, first:first + span] = clean[b, second:second + span] = segment
        right[b], wrong[b], gone[b] = segment[i + 1], rng.choice(filler), rng.choice(filler)
    corrupted, moved = clean.copy(), clean.copy()
    corrupted[:, first + i + 1] = wrong
    moved[:, first + i] = gone
    return clean, corrupted, moved, second + i, right, wrong


def head_scores(pattern, tokens, targets):
    """docs/head-metrics.md's induction and previous-token scores of one head [B, T, T], in numpy."""
    ind, prev = [], []
    for a, x, y in zip(pattern, tokens, targets):
        queries = [q for q in range(len(x)) if y[q] >= 0]
        prev.append(np.mean([a[q, q - 1] for q in queries if q >= 2]))
        copies = [[j for j in range(q - 2) if x[j] == x[q]] for q in queries]
        row = [sum(a[q, j + 1] for j in js) for q, js in zip(queries, copies) if js]
        ind += [np.mean(row)] if row else []
    return float(np.mean(ind)), float(np.mean(prev))


def main(out, steps=1000, seed=0, show=print):
    """Runs the workflow on the run trained into `out`; returns what it measured."""
    run = headlab.train(out=out, force=True, task="induction", layers=2, heads=2, d_model=32, attn_only=True,
                        steps=steps, seed=seed, threads=1, quiet=True)
    model = run.model()
    L, H = model.cfg.n_layers, model.cfg.n_heads
    final = [m for m in run.metrics if "eval_accuracy" in m][-1]
    show(f"1. trained {steps} steps, seed {seed}: eval accuracy {final['eval_accuracy']:.3f}")
    got = {"accuracy": final["eval_accuracy"]}

    clean, corrupted, moved, q, right, wrong = pair(model)
    rows = np.arange(len(clean))

    def logit_diff(logits):
        return float((logits[rows, q, right] - logits[rows, q, wrong]).mean())

    logits, cache = model.run_with_cache(clean)
    got["logit_diff"] = (logit_diff(logits), logit_diff(model(corrupted)))
    show("2. logit difference clean %.2f, corrupted %.2f" % got["logit_diff"])
    lens, labels = cache.accumulated_resid(pos_slice=q)             # raw: logit_attrs applies ln_final itself
    show("   logit lens: " + ", ".join(f"{n} {v:.2f}" for n, v in
                                       zip(labels, cache.logit_attrs(lens, right, wrong, pos_slice=q).mean(1))))
    heads, labels = cache.stack_head_results(pos_slice=q)
    dla = cache.logit_attrs(heads, right, wrong, pos_slice=q).mean(1)
    normed, _ = cache.stack_head_results(pos_slice=q, apply_ln=True)  # TransformerLens's tutorials' way
    directions = model.tokens_to_residual_directions(right) - model.tokens_to_residual_directions(wrong)
    got["dla"], got["dla_normed"] = dla, (normed * directions).sum(-1).mean(1)
    show("   direct logit attribution: " + ", ".join(f"{n} {v:.2f}" for n, v in zip(labels, dla)))

    targets = np.full(clean.shape, -1)
    targets[:, q - 3:q + 2] = clean[:, q - 2:q + 3]
    records = headlab.analyze(model, clean, targets=targets, pruning=False)
    got["scores"] = []
    for record in records["heads"]:
        mine = head_scores(cache["pattern", record["layer"]][:, record["head"]], clean, targets)
        theirs = (record["scores"]["induction"], record["scores"]["previous_token"])
        got["scores"].append((mine, theirs))
        show(f"3. {record['name']} {record['label']:15s} induction {mine[0]:.3f} (analyze {theirs[0]:.3f}), "
             f"previous-token {mine[1]:.3f} (analyze {theirs[1]:.3f})")

    def restoring(bad):  # the metric: 1 at the clean logit difference, 0 at the one of the `bad` run
        low = logit_diff(model(bad))
        return lambda logits: (logit_diff(logits) - low) / (got["logit_diff"][0] - low)

    restored = restoring(corrupted)

    resid = patching.resid_pre(model, clean, corrupted, metric=restored, progress=False)
    got["head_out"] = patching.head_out(model, clean, corrupted, metric=restored, progress=False)
    got["head_v"] = patching.head_v(model, clean, corrupted, metric=restored, progress=False)
    got["path_v"] = patching.path(model, clean, corrupted, metric=restored, receivers=[(1, h) for h in range(H)],
                                  receiver_input="v", progress=False)
    got["path_k"] = patching.path(model, clean, moved, metric=restoring(moved), receivers=[(1, h) for h in range(H)],
                                  receiver_input="k", progress=False)
    show(f"4. resid_pre patching restores most at position {int(resid[0].argmax())} (the corrupted one: "
         f"{int(np.argmax(clean[0] != corrupted[0]))}); head_out {np.round(got['head_out'], 2).tolist()}, "
         f"head_v {np.round(got['head_v'], 2).tolist()}, layer 0 through layer 1's values "
         f"{np.round(got['path_v'][0], 2).tolist()}")
    show(f"   with the earlier copy of the query's token gone instead: layer 0 through layer 1's keys "
         f"{np.round(got['path_k'][0], 2).tolist()} (K-composition: the previous-token head tells where it was)")

    batch = model.task_batch()
    loss = model(batch["tokens"], return_type="loss", targets=batch["targets"])
    _, zs = model.run_with_cache(batch["tokens"], names=lambda name: name.endswith("hook_z"))
    got["ablation"] = {}
    for l in range(L):
        for h in range(H):
            def zero(z, hook, h=h):
                z[:, :, h] = 0
                return z

            def mean(z, hook, h=h):
                z[:, :, h] = zs[hook.name][:, :, h].mean(0)  # each position's mean over the batch
                return z

            name = f"blocks.{l}.attn.hook_z"
            got["ablation"][f"L{l}H{h}"] = [model.run_with_hooks(batch["tokens"], fwd_hooks=[(name, fn)],
                                                                 return_type="loss", targets=batch["targets"]) - loss
                                            for fn in (zero, mean)]
    show("5. loss change, zero / mean ablation: " + ", ".join(f"{n} {z:+.2f} / {m:+.2f}"
                                                              for n, (z, m) in got["ablation"].items()))

    got["k_composition"] = model.all_composition_scores("K")[0, :, 1, :]
    show(f"6. K-composition layer 0 -> 1 {np.round(got['k_composition'], 2).tolist()} (random matrices: "
         f"{model.composition_baseline:.2f}); copying scores "
         f"{[round(model.head_circuits(1, h)['copying'], 2) for h in range(H)]}")

    try:
        import torch
    except ImportError:
        show("7. PyTorch twin: skipped (no torch: apt-get install python3-torch)")
        return got
    with torch.no_grad():
        twin = model.to_torch()(torch.from_numpy(clean)).numpy()
    got["torch_gap"] = float(np.abs(twin - logits).max())
    show(f"7. PyTorch twin's logits within {got['torch_gap']:.1e} of headlab's")
    return got


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="runs/tl-workflow")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.out, args.steps, args.seed)
