#!/usr/bin/env python3
"""Writes marker.jsonl: the marker task of issue 25 (docs/head-metrics.md).

Each line: 10 tokens uniform in 0..8 with the marker 9 at one random position
m <= 7; the only target, at the last position, is the token right after the
marker, and the "attend" pattern "after-marker" says where a head doing it
looks at that query (key m + 1; null elsewhere). Train with
  headlab train --data tests/train/data/marker.jsonl --vocab 10 --seq-len 10 --layers 2
Usage: marker.py [LINES] [SEED] > marker.jsonl
"""
import json
import random
import sys

lines = int(sys.argv[1]) if len(sys.argv) > 1 else 512
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
T, MARKER = 10, 9
for _ in range(lines):
    tokens = [rng.randrange(MARKER) for _ in range(T)]
    m = rng.randrange(T - 2)
    tokens[m] = MARKER
    targets = [-1] * T
    targets[-1] = tokens[m + 1]
    attend = [None] * T
    attend[-1] = m + 1
    print(json.dumps({"tokens": tokens, "targets": targets, "attend": {"after-marker": attend}},
                     separators=(",", ":")))
