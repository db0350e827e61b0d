#!/usr/bin/env bash
# `headlab sweep` end to end: a small sweep writes one run folder per (heads,
# seed) and a sweep.json whose counts add up; bad arguments exit 2 and create
# nothing; an existing --out needs --force; SIGTERM stops every run and exits 143;
# SIGKILL of the sweep stops its runs; --resume continues a stopped sweep.
# Two shards (--shard, a Slurm array task) collected, and mpirun -np 2, give the
# unsharded summary.
#
#   tests/cli/sweep_test.sh [HEADLAB]     (default: $HEADLAB_BUILD_DIR/headlab, else build/headlab)
#
# Needs python3 to read the JSON (exit 77, skipped, without it). Takes ~10 s.
set -uo pipefail

headlab=${1:-${HEADLAB_BUILD_DIR:-$(dirname "$0")/../../build}/headlab}
[[ -x $headlab ]] || { echo "sweep_test: no headlab binary at $headlab" >&2; exit 2; }
command -v python3 >/dev/null || { echo "sweep_test: python3 not found; skipped" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# A model small enough to train in well under a second per run (a few under the sanitizers).
small=(--steps 20 --d-model 16 --eval-batch 32 --log-every 10)

echo "== a 2 x 2 sweep writes its run folders and sweep.json"
"$headlab" sweep --seeds 0-1 --heads 1,2 "${small[@]}" --jobs 2 --out "$tmp/sweep" >"$tmp/out.txt" 2>"$tmp/err.txt"
status=$?
[[ $status -eq 0 ]] || fail "the sweep exited $status: $(cat "$tmp/err.txt")"
for run in h1-s0 h1-s1 h2-s0 h2-s1; do
  for f in heads.json stdout.log checkpoint.safetensors; do
    [[ -f $tmp/sweep/$run/$f ]] || fail "no $run/$f"
  done
done
[[ $(grep -c '^\[[1-4]/4\] h[12] s[01]: acc ' "$tmp/err.txt") -eq 4 ]] || fail "not one progress line per run: $(cat "$tmp/err.txt")"
grep -q '^heads  runs  failed  acc >= 99.0%' "$tmp/out.txt" || fail "no summary table: $(cat "$tmp/out.txt")"
grep -q '^\[lo-hi%\]: the Wilson 95% interval' "$tmp/out.txt" || fail "no interval note: $(cat "$tmp/out.txt")"
[[ -s $tmp/sweep/sweep.html ]] || fail "no sweep.html"
python3 - "$tmp/sweep/sweep.json" <<'EOF' || fail "sweep.json is not as expected"
import json, sys
s = json.load(open(sys.argv[1]))
def check(ok, what):
    if not ok:
        print("sweep.json:", what, file=sys.stderr)
        sys.exit(1)
check(s["format"] == "headlab-sweep/1", "format")
check(s["task"] == "first-prev-pair" and s["seeds"] == [0, 1] and s["heads"] == [1, 2], "task, seeds, heads")
check(s["planned_runs"] == 4 and len(s["runs"]) == 4 and not s["interrupted"], "4 runs, not interrupted")
check(s["config"]["threads"] == 1 and s["config"]["analyze-every"] == 100 and s["config"]["d-model"] == 16, "config")
for r in s["runs"]:
    check(r["status"] == "done" and r["exit_code"] == 0, "run status")
    check(r["dir"] == "h%d-s%d" % (r["heads"], r["seed"]), "run dir")
    check(len(r["head_results"]) == r["heads"], "one result per head")
    check(0 <= r["accuracy"] <= 1 and r["reached_target"] == (r["accuracy"] >= 0.99), "accuracy")
    heads_json = json.load(open(sys.argv[1].replace("sweep.json", r["dir"] + "/heads.json")))
    check(r["specialized"] == heads_json["verdict"]["specialized"], "verdict copied from heads.json")
    check([h["label"] for h in r["head_results"]] == [h["label"] for h in heads_json["heads"]], "labels")
check([c["heads"] for c in s["configs"]] == [1, 2], "one config per head count")
for c in s["configs"]:
    runs = [r for r in s["runs"] if r["heads"] == c["heads"]]
    check(c["runs"] == 2 and c["failed"] == 0, "config runs")
    check(c["specialized"] == sum(r["specialized"] for r in runs), "specialized count")
    check(c["reached_target"] == sum(r["reached_target"] for r in runs), "reached count")
    check(abs(c["specialized_share"] - c["specialized"] / 2) < 1e-12, "specialized share")
    # The Wilson 95% interval, computed here independently.
    for k, ci in ((c["specialized"], c["specialized_ci"]), (c["reached_target"], c["reached_target_ci"])):
        n, z = c["runs"], 1.959963984540054
        p = k / n
        centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
        check(abs(ci[0] - max(0, centre - half)) < 1e-4 and abs(ci[1] - min(1, centre + half)) < 1e-4, "Wilson interval")
    # Analyses every 100 steps (the default) give the runs emergence steps.
    for r in runs:
        check("specialized_step" in r and all("emerged" in h for h in r["head_results"]), "emergence keys")
    # Every label: each pattern of the table (the pattern keys of a head's
    # scores in heads.json, '-' for '_'), then diffuse, mixed and sink.
    scores = heads_json["heads"][0]["scores"]
    # The built-in patterns' scores: numbers, not the all-query means (*_all)
    # nor the nested user and TransformerLens scores.
    patterns = {k.replace("_", "-") for k, v in scores.items()
                if isinstance(v, (int, float)) and not k.endswith("_all") and k not in ("entropy", "distance")}
    check(set(c["labels"]) == patterns | {"diffuse", "mixed", "sink"}, "every label listed")
    check(sum(l["heads"] for l in c["labels"].values()) == 2 * c["heads"], "label counts add up to the heads")
EOF

# sweep.json without what only timing changes: seconds, jobs (and --jobs
# as given), each run's seconds and the mean_seconds of each configuration
# and of each value of a varied flag.
same_summary() {
  python3 - "$1" "$2" <<'EOF' || fail "$2 differs from $1 (timings aside)"
import json, sys
def strip(path):
    s = json.load(open(path))
    for k in ("seconds", "jobs", "jobs_flag"):
        s.pop(k)
    for r in s["runs"]:
        r.pop("seconds")
    for c in s["configs"] + [v for f in s["flags"] for v in f["values"]]:
        c.pop("mean_seconds")
    return s
a, b = strip(sys.argv[1]), strip(sys.argv[2])
sys.exit(0 if a == b and len(a["runs"]) == 4 else 1)
EOF
}

echo "== two shards run one after the other, collected, equal the unsharded sweep"
"$headlab" sweep --seeds 0-1 --heads 1,2 "${small[@]}" --jobs 1 --shard 1/2 --out "$tmp/sharded" >/dev/null 2>"$tmp/err.txt" ||
  fail "shard 1/2 failed: $(cat "$tmp/err.txt")"
[[ -f $tmp/sharded/shard-1-of-2.json && ! -f $tmp/sharded/sweep.json ]] || fail "shard 1/2 wrote no shard file, or a sweep.json"
[[ $(ls -d "$tmp"/sharded/h*-s* | wc -l) -eq 2 ]] || fail "shard 1/2 did not train exactly its 2 runs"
"$headlab" sweep --collect "$tmp/sharded" >/dev/null 2>"$tmp/err.txt"
[[ $? -eq 2 ]] && grep -q 'shard 2 of 2 is missing' "$tmp/err.txt" || fail "collecting 1 of 2 shards: $(cat "$tmp/err.txt")"
# The second shard from a Slurm job array's variables (--array=0-1: task 1 of 2).
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=2 \
  "$headlab" sweep --seeds 0-1 --heads 1,2 "${small[@]}" --jobs 1 --out "$tmp/sharded" >/dev/null 2>"$tmp/err.txt" ||
  fail "shard 2/2 (Slurm) failed: $(cat "$tmp/err.txt")"
[[ -f $tmp/sharded/shard-2-of-2.json ]] || fail "the Slurm task did not run shard 2 of 2"
"$headlab" sweep --collect "$tmp/sharded" >"$tmp/out.txt" 2>"$tmp/err.txt" || fail "--collect failed: $(cat "$tmp/err.txt")"
grep -q '^heads  runs  failed' "$tmp/out.txt" || fail "--collect printed no summary"
same_summary "$tmp/sweep/sweep.json" "$tmp/sharded/sweep.json"
"$headlab" sweep --shard 3/2 --out "$tmp/bad" >/dev/null 2>"$tmp/err.txt"
[[ $? -eq 2 ]] && grep -qF -- "--shard '3/2': write K/N with 1 <= K <= N" "$tmp/err.txt" || fail "--shard 3/2: $(cat "$tmp/err.txt")"
"$headlab" sweep --shard 1/2 >/dev/null 2>"$tmp/err.txt"
[[ $? -eq 2 ]] && grep -qF -- "needs --out" "$tmp/err.txt" || fail "--shard without --out: $(cat "$tmp/err.txt")"

# HEADLAB_TEST_MPI=OFF (ctest, for a build without MPI) skips it.
if command -v mpirun >/dev/null && [[ ${HEADLAB_TEST_MPI:-ON} == ON ]]; then
  echo "== mpirun -np 2 spreads the runs over the ranks; rank 0 writes the same summary"
  # Under the sanitizers: no leak check of the MPI processes (see mpi_test.sh).
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    mpirun --oversubscribe -np 2 \
    "$headlab" sweep --seeds 0-1 --heads 1,2 "${small[@]}" --jobs 1 --out "$tmp/mpi" >"$tmp/out.txt" 2>"$tmp/err.txt" ||
    fail "mpirun -np 2 sweep failed: $(cat "$tmp/err.txt")"
  [[ $(grep -c '^heads  runs  failed' "$tmp/out.txt") -eq 1 ]] || fail "not one summary: $(cat "$tmp/out.txt")"
  same_summary "$tmp/sweep/sweep.json" "$tmp/mpi/sweep.json"
fi

echo "== an existing sweep folder needs --force"
"$headlab" sweep --seeds 0 --heads 1 "${small[@]}" --out "$tmp/sweep" >/dev/null 2>"$tmp/err.txt"
status=$?
[[ $status -eq 2 ]] || fail "a non-empty --out without --force exited $status, not 2"
grep -q 'is not empty; pass --force' "$tmp/err.txt" || fail "no --force hint: $(cat "$tmp/err.txt")"
"$headlab" sweep --seeds 0 --heads 1 "${small[@]}" --out "$tmp/sweep" --force >/dev/null 2>&1 ||
  fail "--force over an existing sweep failed"

echo "== bad arguments exit 2, name the value and create nothing"
bad() {  # expected message, then arguments
  local want=$1
  shift
  "$headlab" sweep "$@" --out "$tmp/bad" >/dev/null 2>"$tmp/err.txt"
  local status=$?
  [[ $status -eq 2 ]] || fail "sweep $* exited $status, not 2"
  grep -qF -- "$want" "$tmp/err.txt" || fail "sweep $*: expected '$want' in: $(cat "$tmp/err.txt")"
  [[ ! -e $tmp/bad ]] || { fail "sweep $* created --out"; rm -rf "$tmp/bad"; }
}
bad "--seeds '5-3': the range 5-3 runs backwards" --seeds 5-3
bad "--seeds is given an empty value ('')" --seeds ""
bad "--seeds '  ': the list is empty" --seeds "  "
bad "--seeds '-1': -1 is negative" --seeds=-1
bad "--seeds '1,x': 'x' is not a whole number" --seeds 1,x
bad "--seeds '0-2,1': 1 is listed twice" --seeds 0-2,1
bad "--heads '0': every value must be at least 1, got 0" --heads 0
bad "--heads '1,': an empty item" --heads 1,
bad "--d-model 32 is not divisible by --heads 3" --heads 1,3 --d-model 32
bad "--target-accuracy must be a fraction in (0, 1], like 0.99; got 99" --target-accuracy 99
bad "--jobs must be 0 (one per core) or more, got -1" --jobs -1
bad "unknown task 'nope'" --task nope
bad "--seed" --seed 3  # per-run flags are the sweep's: --seeds, --heads
bad "--threads" --threads 2

echo "== SIGTERM stops every run and exits 143"
"$headlab" sweep --seeds 0-3 --heads 2 --steps 1000000 --d-model 32 --jobs 2 --out "$tmp/stop" \
  >"$tmp/out.txt" 2>"$tmp/err.txt" &
pid=$!
for _ in $(seq 100); do  # until both runs have started training (their train.log exists)
  [[ $(ls "$tmp"/stop/h2-s*/train.log 2>/dev/null | wc -l) -ge 2 ]] && break
  sleep 0.1
done
sleep 0.5
kill -TERM "$pid"
wait "$pid"
status=$?
[[ $status -eq 143 ]] || fail "after SIGTERM the sweep exited $status, not 143: $(cat "$tmp/err.txt")"
python3 - "$tmp/stop/sweep.json" <<'EOF' || fail "the stopped sweep's sweep.json is not as expected"
import json, sys
s = json.load(open(sys.argv[1]))
ok = s["interrupted"] and s["planned_runs"] == 4 and len(s["runs"]) == 2 \
    and all(r["status"] == "interrupted" and r["exit_code"] == 143 for r in s["runs"])
sys.exit(0 if ok else 1)
EOF
for run in h2-s0 h2-s1; do
  [[ -f $tmp/stop/$run/checkpoint.safetensors ]] || fail "the stopped run $run saved no checkpoint"
done
[[ ! -e $tmp/stop/h2-s2 ]] || fail "a run started after the stop signal"

grep -qF -- "continue with: headlab sweep --resume $tmp/stop" "$tmp/err.txt" ||
  fail "a stopped sweep does not say how to continue: $(cat "$tmp/err.txt")"

echo "== SIGKILL of the sweep stops its runs too"
"$headlab" sweep --seeds 0-1 --heads 2 --steps 1000000 --d-model 32 --jobs 2 --out "$tmp/killed" \
  >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do
  [[ $(ls "$tmp"/killed/h2-s*/train.log 2>/dev/null | wc -l) -ge 2 ]] && break
  sleep 0.1
done
children=$(pgrep -P "$pid")
[[ -n $children ]] || fail "the sweep started no runs"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
for _ in $(seq 100); do  # each run saves its checkpoint on the way out
  alive=0
  for c in $children; do kill -0 "$c" 2>/dev/null && alive=1; done
  ((alive)) || break
  sleep 0.1
done
((alive == 0)) || { fail "runs outlived the killed sweep: $children"; kill -KILL $children 2>/dev/null; }

echo "== sweep --resume keeps finished runs, resumes interrupted ones, starts the rest"
"$headlab" sweep --seeds 0-2 --heads 1 "${small[@]}" --jobs 1 --out "$tmp/again" >/dev/null 2>&1 ||
  fail "the sweep to resume failed"
rm "$tmp/again/h1-s1/heads.json"  # interrupted after its last checkpoint
rm -r "$tmp/again/h1-s2"          # never started
rm "$tmp/again/sweep.html"
kept=$(stat -c %Y.%s "$tmp/again/h1-s0/heads.json")
"$headlab" sweep --resume "$tmp/again" --heads 2 >/dev/null 2>"$tmp/err.txt"
[[ $? -eq 2 ]] && grep -q -- "--heads" "$tmp/err.txt" || fail "sweep --resume accepted --heads: $(cat "$tmp/err.txt")"
"$headlab" sweep --resume "$tmp/again" >"$tmp/out.txt" 2>"$tmp/err.txt"
status=$?
[[ $status -eq 0 ]] || fail "sweep --resume exited $status: $(cat "$tmp/err.txt")"
[[ $(stat -c %Y.%s "$tmp/again/h1-s0/heads.json") == "$kept" ]] || fail "a finished run was trained again"
grep -q "resuming" "$tmp/again/h1-s1/stdout.log" || fail "the interrupted run was not resumed"
for run in h1-s0 h1-s1 h1-s2; do  # the page is written again, over every run
  grep -q "\"dir\":\"$run\"" "$tmp/again/sweep.html" || fail "the resumed sweep's sweep.html lacks $run"
done
python3 - "$tmp/again/sweep.json" <<'EOF' || fail "the resumed sweep's sweep.json is not as expected"
import json, sys
s = json.load(open(sys.argv[1]))
ok = not s["interrupted"] and s["planned_runs"] == 3 and len(s["runs"]) == 3 \
    and all(r["status"] == "done" for r in s["runs"])
sys.exit(0 if ok else 1)
EOF

if ((failures)); then
  echo "sweep_test: $failures failure(s)" >&2
  exit 1
fi
echo "sweep_test: all passed"
