#!/usr/bin/env bash
# Data-parallel training on MPI, end to end with mpirun:
#  - `mpirun -np 2 headlab train` and `headlab train --micro-batches 2` in one
#    process give byte-identical metrics.jsonl (but tokens_per_s), heads.json,
#    config.json and checkpoints, run after run; a resumed run equals them;
#  - only rank 0 writes and prints;
#  - a batch 2 processes cannot share, a usage error (said by rank 0 only),
#    or a failure on rank 0 alone, exits 2 with one line; a NaN loss exits 1
#    naming the step on every rank;
#  - ranks given other flags (an MPMD line) or resuming checkpoints of other
#    steps exit 2 before step 1, naming the difference, and a folder with
#    nothing to resume exits 2 with one line;
#  - 2 processes on one machine share its cores (--threads capped at a share);
#  - SIGTERM to rank 0 alone stops both ranks after the same step (exit 143)
#    with a checkpoint to resume from; a rank killed mid-run stops the job
#    without a hang and the last checkpoint resumes.
#
#   tests/cli/mpi_test.sh [HEADLAB]     (default: $HEADLAB_BUILD_DIR/headlab, else build/headlab)
#
# Exits 77 (skipped) without mpirun or python3. Takes ~30 s.
set -uo pipefail

headlab=${1:-${HEADLAB_BUILD_DIR:-$(dirname "$0")/../../build}/headlab}
[[ -x $headlab ]] || { echo "mpi_test: no headlab binary at $headlab" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "mpi_test: mpirun not found; skipped" >&2; exit 77; }
command -v python3 >/dev/null || { echo "mpi_test: python3 not found; skipped" >&2; exit 77; }
# CI runs as root, which Open MPI refuses unless told twice.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI keeps allocations until exit that LeakSanitizer cannot attribute (its
# plugins are unloaded by then, so no suppression by library name matches them):
# under the sanitizers the MPI processes check everything but leaks.
mpirun=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe)
mpi=("${mpirun[@]}" -np 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# Each command adds --steps, --batch and --log-every (CLI11 refuses a flag given twice).
tiny=(--d-model 16 --eval-batch 32 --analyze-every 10 --threads 1)
std=(--steps 30 --batch 16 --log-every 5)

# The two runs' files are the same bytes (metrics.jsonl without tokens_per_s).
same_run() {
  local a=$1 b=$2 f
  for f in checkpoint.safetensors heads.json; do
    cmp -s "$a/$f" "$b/$f" || fail "$f differs between $a and $b"
  done
  python3 - "$a/metrics.jsonl" "$b/metrics.jsonl" <<'PY' || fail "metrics.jsonl differs between $a and $b"
import json, sys
def lines(path):
    out = [json.loads(l) for l in open(path)]
    for l in out:
        l.pop("tokens_per_s", None)
    return out
a, b = lines(sys.argv[1]), lines(sys.argv[2])
sys.exit(0 if a == b and len(a) >= 2 else 1)
PY
}

# The pid of rank $2 among the children of mpirun $1 (empty until it started).
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p"
  done
}

# Waits at most $2 seconds for pid $1 to end; sets $status, or kills it (a hang).
wait_for() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then
    fail "pid $1 still runs after $2 s: a hang"
    kill -KILL "$1"
  fi
  wait "$1"
  status=$?
}

checkpoint_step() {
  python3 - "$1" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
print(json.loads(data[8:8 + n])["__metadata__"]["step"])
PY
}

# Until the file exists (at most 60 s).
wait_file() {
  local deadline=$((SECONDS + 60))
  until [[ -s $1 ]] || ((SECONDS >= deadline)); do sleep 0.1; done
}

echo "== mpirun -np 2 equals --micro-batches 2 in one process, bit for bit"
"$headlab" train "${tiny[@]}" "${std[@]}" --micro-batches 2 --out "$tmp/micro" >"$tmp/micro.out" 2>&1 ||
  fail "--micro-batches 2 failed: $(cat "$tmp/micro.out")"
"${mpi[@]}" "$headlab" train "${tiny[@]}" "${std[@]}" --out "$tmp/mpi" >"$tmp/mpi.out" 2>"$tmp/mpi.err" ||
  fail "mpirun -np 2 failed: $(cat "$tmp/mpi.out" "$tmp/mpi.err")"
same_run "$tmp/micro" "$tmp/mpi"
cmp -s "$tmp/micro/config.json" "$tmp/mpi/config.json" || fail "config.json differs"
grep -q '"micro-batches": 2' "$tmp/mpi/config.json" || fail "config.json does not record the 2 slices"
"${mpi[@]}" "$headlab" train "${tiny[@]}" "${std[@]}" --out "$tmp/mpi-again" >/dev/null 2>&1 || fail "the second mpirun failed"
same_run "$tmp/mpi" "$tmp/mpi-again"
# One slice sums in another order: the comparisons above can fail.
"$headlab" train "${tiny[@]}" "${std[@]}" --out "$tmp/whole" >/dev/null 2>&1 || fail "the one-slice run failed"
cmp -s "$tmp/whole/checkpoint.safetensors" "$tmp/micro/checkpoint.safetensors" &&
  fail "one slice and two slices gave the same checkpoint bytes: the comparison proves nothing"
[[ $(grep -c 'training first-prev-pair in' "$tmp/mpi.out") -eq 1 ]] || fail "not one start line: $(cat "$tmp/mpi.out")"
[[ $(grep -c 'time in gradient' "$tmp/mpi/train.log") -eq 1 ]] || fail "train.log has no exchange time"

echo "== a run resumed under mpirun equals the straight one"
"${mpi[@]}" "$headlab" train "${tiny[@]}" --steps 15 --batch 16 --log-every 5 --out "$tmp/resumed" >/dev/null 2>&1 || fail "the first half failed"

echo "== ranks given other flags (MPMD) or resuming other checkpoints exit 2 naming the difference, no hang"
# One rank each: `mpirun -np 1 A : -np 1 B`.
"${mpirun[@]}" -np 1 "$headlab" train "${tiny[@]}" "${std[@]}" --out "$tmp/mpmd" : \
  -np 1 "$headlab" train "${tiny[@]/16/32}" "${std[@]}" --out "$tmp/mpmd" >/dev/null 2>"$tmp/err.txt" &
wait_for $! 60
[[ $status -eq 2 ]] || fail "ranks of --d-model 16 and 32 exited $status, not 2: $(cat "$tmp/err.txt")"
grep -q -- '--d-model is 16 on process 0, 32 on process 1' "$tmp/err.txt" || fail "no message naming --d-model: $(cat "$tmp/err.txt")"
[[ $(grep -c '^headlab train: error' "$tmp/err.txt") -eq 1 ]] || fail "not exactly one error line: $(cat "$tmp/err.txt")"
[[ ! -e $tmp/mpmd ]] || fail "the refused run created its folder"
"${mpirun[@]}" -np 1 "$headlab" train --resume "$tmp/resumed" --steps 30 : \
  -np 1 "$headlab" train --resume "$tmp/mpi" --steps 30 >/dev/null 2>"$tmp/err.txt" &
wait_for $! 60
[[ $status -eq 2 ]] || fail "ranks resuming steps 15 and 30 exited $status, not 2: $(cat "$tmp/err.txt")"
grep -q 'the step it starts from is 15 on process 0, 30 on process 1' "$tmp/err.txt" ||
  fail "no message naming the steps: $(cat "$tmp/err.txt")"

# A folder with neither a checkpoint nor a snapshot: rank 0 says so; rank 1, which reads without
# rank 0's check, crashed on the empty list of snapshots.
mkdir "$tmp/empty-run" && cp "$tmp/resumed/config.json" "$tmp/resumed/.headlab" "$tmp/empty-run/"
"${mpi[@]}" "$headlab" train --resume "$tmp/empty-run" >/dev/null 2>"$tmp/err.txt" &
wait_for $! 60
[[ $status -eq 2 ]] || fail "--resume of a folder without checkpoint exited $status, not 2: $(cat "$tmp/err.txt")"
grep -q 'no checkpoint.safetensors and no snapshot to resume from' "$tmp/err.txt" ||
  fail "no message saying there is nothing to resume: $(cat "$tmp/err.txt")"
[[ $(grep -c '^headlab train: error' "$tmp/err.txt") -eq 1 ]] || fail "not exactly one error line: $(cat "$tmp/err.txt")"

"${mpi[@]}" "$headlab" train --resume "$tmp/resumed" --steps 30 >/dev/null 2>"$tmp/err.txt" ||
  fail "the resume failed: $(cat "$tmp/err.txt")"
same_run "$tmp/mpi" "$tmp/resumed"

echo "== a batch 2 processes cannot share exits 2 naming both numbers, once"
"${mpi[@]}" "$headlab" train "${tiny[@]}" --steps 30 --batch 15 --log-every 5 --out "$tmp/bad" >/dev/null 2>"$tmp/err.txt"
status=$?
[[ $status -eq 2 ]] || fail "--batch 15 on 2 processes exited $status, not 2"
grep -q -- '--batch 15 does not divide among the 2 processes (mpirun -np 2)' "$tmp/err.txt" ||
  fail "no message naming both numbers: $(cat "$tmp/err.txt")"
[[ $(grep -c '^headlab train: error' "$tmp/err.txt") -eq 1 ]] || fail "not exactly one error line: $(cat "$tmp/err.txt")"
[[ ! -e $tmp/bad ]] || fail "the failed run created its folder"

echo "== a full batch no slice count splits over 2 processes is told to resize, not to pick a count"
# p = 5: 25 pairs, --train-size 15 odd; no --micro-batches (a multiple of 2) divides it.
"${mpi[@]}" "$headlab" train --task modular-addition --vocab 6 --seq-len 3 --train-size 15 --batch 0 --steps 2 \
  --out "$tmp/odd" >/dev/null 2>"$tmp/err.txt"
status=$?
[[ $status -eq 2 ]] || fail "an odd full batch on 2 processes exited $status, not 2"
grep -q -- 'no number of slices splits 15 sequences evenly over 2 processes: give --train-size a multiple of 2' \
  "$tmp/err.txt" || fail "no resize advice: $(cat "$tmp/err.txt")"

echo "== a usage error is said once, by rank 0, and every rank exits 2 (no hang)"
for args in "train --d_model 5" "trian"; do
  # shellcheck disable=SC2086  # the words of $args are the command line
  "${mpi[@]}" "$headlab" $args >/dev/null 2>"$tmp/err.txt" &
  wait_for $! 60
  [[ $status -eq 2 ]] || fail "headlab $args exited $status, not 2: $(cat "$tmp/err.txt")"
  [[ $(grep -c '^headlab.*: error: unknown' "$tmp/err.txt") -eq 1 ]] ||
    fail "headlab $args: not exactly one error line: $(cat "$tmp/err.txt")"
done

echo "== a failure on rank 0 alone stops both ranks (exit 2, no hang)"
"${mpi[@]}" "$headlab" train "${tiny[@]}" "${std[@]}" --out "$tmp/mpi" >/dev/null 2>"$tmp/err.txt" &
wait_for $! 60
[[ $status -eq 2 ]] || fail "an --out that holds a run exited $status, not 2: $(cat "$tmp/err.txt")"
grep -q 'already holds a run' "$tmp/err.txt" || fail "no reason given: $(cat "$tmp/err.txt")"
same_run "$tmp/micro" "$tmp/mpi"  # untouched

echo "== a non-finite loss stops every rank at the same step, exit 1, last checkpoint kept"
"${mpi[@]}" "$headlab" train "${tiny[@]}" --steps 30 --batch 16 --lr 1e30 --clip 0 --checkpoint-every 1 --log-every 1 --out "$tmp/nan" \
  >/dev/null 2>"$tmp/err.txt" &
wait_for $! 60
[[ $status -eq 1 ]] || fail "a NaN run exited $status, not 1: $(cat "$tmp/err.txt")"
[[ $(grep -c '^headlab train: error: the .* at step [0-9]' "$tmp/err.txt") -eq 1 ]] ||
  fail "not one line naming the step: $(cat "$tmp/err.txt")"
failed=$(sed -nE 's/.*at step ([0-9]+).*/\1/p' "$tmp/err.txt" | head -n 1)
if [[ $failed == 1 ]]; then
  [[ ! -e $tmp/nan/checkpoint.safetensors ]] || fail "a checkpoint was written although step 1 failed"
else
  [[ -n $failed && -f $tmp/nan/checkpoint.safetensors &&
     $(checkpoint_step "$tmp/nan/checkpoint.safetensors") -eq $((failed - 1)) ]] ||
    fail "the kept checkpoint is not the step before $failed"
fi

echo "== SIGTERM to rank 0 alone stops both ranks after the same step, exit 143"
"${mpi[@]}" "$headlab" train "${tiny[@]}" "${std[@]/30/1000000}" --out "$tmp/stop" >/dev/null 2>"$tmp/err.txt" &
run=$!
wait_file "$tmp/stop/metrics.jsonl"
kill -TERM "$(rank_pid $run 0)"
wait_for $run 60
[[ $status -eq 143 ]] || fail "after SIGTERM to rank 0, mpirun exited $status, not 143: $(cat "$tmp/err.txt")"
step=$(checkpoint_step "$tmp/stop/checkpoint.safetensors")
[[ $step -ge 5 ]] || fail "the stopped run saved no checkpoint after its first log line"
grep -q "stopped" "$tmp/stop/train.log" || fail "train.log does not say it stopped"
"${mpi[@]}" "$headlab" train --resume "$tmp/stop" --steps $((step + 5)) >/dev/null 2>"$tmp/err.txt" ||
  fail "resuming the stopped run failed: $(cat "$tmp/err.txt")"

echo "== a rank killed mid-run stops the job without a hang; the last checkpoint resumes"
"${mpi[@]}" "$headlab" train "${tiny[@]}" "${std[@]/30/1000000}" --checkpoint-every 5 --out "$tmp/killed" \
  >/dev/null 2>"$tmp/err.txt" &
run=$!
wait_file "$tmp/killed/checkpoint.safetensors"
kill -KILL "$(rank_pid $run 1)"
wait_for $run 60
[[ $status -ne 0 ]] || fail "a job with a killed rank exited 0"
"$headlab" eval "$tmp/killed/checkpoint.safetensors" >/dev/null 2>&1 || fail "the last checkpoint does not load"
step=$(checkpoint_step "$tmp/killed/checkpoint.safetensors")
"${mpi[@]}" "$headlab" train --resume "$tmp/killed" --steps $((step + 5)) >/dev/null 2>"$tmp/err.txt" ||
  fail "resuming after the kill failed: $(cat "$tmp/err.txt")"

echo "== the processes on one machine share its cores: --threads is capped at each one's share"
share=$(( $(nproc) / 2 )); ((share >= 1)) || share=1
"${mpi[@]}" "$headlab" train --d-model 16 --eval-batch 32 --analyze-every 0 --threads 64 --steps 2 --batch 16 \
  --out "$tmp/threads" >/dev/null 2>"$tmp/err.txt" || fail "the run at --threads 64 failed: $(cat "$tmp/err.txt")"
grep -q "training .* $share thread(s)" "$tmp/threads/train.log" ||
  fail "2 processes on $(nproc) cores did not run $share thread(s) each: $(head -1 "$tmp/threads/train.log")"
[[ $(grep -c "share of the cores" "$tmp/err.txt") -eq 1 ]] ||
  fail "the cap's note is not said once (by rank 0): $(cat "$tmp/err.txt")"

if ((failures)); then
  echo "mpi_test: $failures failure(s)" >&2
  exit 1
fi
echo "mpi_test: all passed"
