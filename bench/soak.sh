#!/usr/bin/env bash
# Soak run: one long training run of a tiny model with its resident memory
# (VmRSS) sampled at intervals. A leak in the training step, the periodic
# evaluation, head analysis or checkpointing shows as memory that keeps
# growing; a healthy run is flat once warmed up.
#
#   bench/soak.sh [STEPS] [INTERVAL_SECONDS]    default: 20000 steps, a sample every 2 s
#
# Runs $HEADLAB (default build/headlab) in a temporary folder. Prints one line
# per sample (seconds, step, RSS), then the growth from the first sample past
# 10% of the steps (warm-up: allocator caches, the first analysis) to the
# last one. Exits 1 if that growth exceeds 8 MB and 5% of the warm RSS, or if
# the run fails. Not part of the test suite: it takes a minute or more.
set -euo pipefail

steps="${1:-20000}"
interval="${2:-2}"
if ! [[ "$steps" =~ ^[0-9]+$ && "$interval" =~ ^[0-9]+([.][0-9]+)?$ ]] || (( steps < 100 )); then
  echo "usage: bench/soak.sh [STEPS >= 100] [INTERVAL_SECONDS]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
headlab="${HEADLAB:-$root/build/headlab}"
if [[ ! -x "$headlab" ]]; then
  echo "soak: no headlab at $headlab (build it, or set HEADLAB=path)" >&2
  exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/headlab-soak-XXXXXX")"
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The tiny model, with every periodic path of the trainer exercised.
"$headlab" train --out "$work/run" --d-model 32 --heads 2 --batch 32 --eval-batch 64 \
  --steps "$steps" --log-every 100 --analyze-every 1000 --checkpoint-every 1000 --threads 1 \
  >"$work/stdout" 2>"$work/stderr" &
pid=$!

# seconds step rss_kb
samples="$work/samples"
: >"$samples"
start=$(date +%s.%N)
printf '%8s %8s %10s\n' seconds step rss_mb
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  step=$(tail -n 1 "$work/run/metrics.jsonl" 2>/dev/null | grep -o '"step":[0-9]*' | cut -d: -f2 || true)
  if [[ -n "$rss" ]]; then
    now=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN {printf "%.1f", n - s}')
    echo "$now ${step:-0} $rss" >>"$samples"
    awk -v t="$now" -v s="${step:-0}" -v r="$rss" 'BEGIN {printf "%8s %8d %10.1f\n", t, s, r / 1024}'
  fi
  sleep "$interval"
done
status=0
wait "$pid" || status=$?
pid=""
if (( status != 0 )); then
  echo "soak: the run failed (exit status $status):" >&2
  cat "$work/stderr" >&2
  exit 1
fi

awk -v steps="$steps" '
  { t[NR] = $1; s[NR] = $2; r[NR] = $3 }
  END {
    if (NR < 3) { print "soak: too few samples; use a shorter interval or more steps"; exit 1 }
    warm = 0
    for (i = 1; i <= NR; ++i) if (s[i] >= steps / 10) { warm = i; break }
    if (warm == 0 || warm == NR) warm = int(NR / 2) > 0 ? int(NR / 2) : 1
    peak = 0
    for (i = warm; i <= NR; ++i) if (r[i] > peak) peak = r[i]
    growth = r[NR] - r[warm]
    per_k = s[NR] > s[warm] ? growth / (s[NR] - s[warm]) * 1000 : 0
    printf "\nwarm RSS %.1f MB at step %d, last %.1f MB at step %d, peak %.1f MB\n", r[warm] / 1024, s[warm], r[NR] / 1024, s[NR], peak / 1024
    printf "growth %+.2f MB (%+.1f KB per 1000 steps) over %d samples\n", growth / 1024, per_k, NR - warm + 1
    if (growth > 8 * 1024 && growth > 0.05 * r[warm]) { print "soak: memory GROWS"; exit 1 }
    print "soak: memory flat"
  }' "$samples"
