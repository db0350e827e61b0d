#!/usr/bin/env python3
"""The data of README.md's "Your own data, pattern and question": 16 tokens from
2..11 with one or two markers (token 1); every position after the latest marker m
has the target x[m-1], the token before that marker. Each line names where the
heads one expects should look ("attend"): "latest-marker" (m, from every position
after it) and "marker-prev" (m - 1, at the marker itself).

    examples/marker_recall.py [FOLDER]

writes into FOLDER (default: the current one) recall.jsonl (400 lines, seed 1),
probe.jsonl (200 lines, seed 2, with a third pattern to doubt, "before-marker":
m - 1 from every position after m) and probe-corrupted.jsonl (the probe's tokens
with x[m-1] changed, for activation patching: `headlab analyze --corrupted`)."""
import json
import random
import sys
from pathlib import Path

T = 16


def line(rng, doubt):
    tokens = [rng.randrange(2, 12) for _ in range(T)]
    markers = sorted(rng.sample(range(2, T - 2), rng.choice([1, 2])))
    if len(markers) == 2 and markers[1] - markers[0] < 2:
        markers = markers[:1]  # a marker right after one would be the token to recall
    for m in markers:
        tokens[m] = 1
    targets, latest, prev, before = [-1] * T, [None] * T, [None] * T, [None] * T
    last = None
    for q in range(T):
        if tokens[q] == 1:
            last, prev[q] = q, q - 1
        elif last is not None:
            targets[q], latest[q], before[q] = tokens[last - 1], last, last - 1
    attend = {"latest-marker": latest, "marker-prev": prev}
    if doubt:
        attend["before-marker"] = before
    return {"tokens": tokens, "targets": targets, "attend": attend}


def main():
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    folder.mkdir(parents=True, exist_ok=True)
    train, probe = random.Random(1), random.Random(2)
    rows = [line(train, False) for _ in range(400)]
    probe_rows = [line(probe, True) for _ in range(200)]
    change = random.Random(0)
    corrupted = []
    for r in probe_rows:
        tokens = list(r["tokens"])
        p = max(i for i, t in enumerate(tokens) if t == 1) - 1
        tokens[p] = 2 + (tokens[p] - 2 + change.randrange(1, 10)) % 10  # another token of 2..11
        corrupted.append({"tokens": tokens})
    for name, lines in (("recall.jsonl", rows), ("probe.jsonl", probe_rows), ("probe-corrupted.jsonl", corrupted)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in lines))


if __name__ == "__main__":
    main()
