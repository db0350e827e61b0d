#!/usr/bin/env bash
# `headlab sweep` over a grid of any training flags, end to end, on a tiny
# model trained 2 steps: --lr 1e-3,1e-2 --layers 1,2 --seeds 0-2 gives 12 runs
# grouped into 4 configurations in sweep.json and sweep.html; --redraw (of a
# sweep.json a sweep could have written only); --resume keeps the plan and
# --jobs and runs a run with a damaged heads.json again; shards with other
# settings, or of another split, are refused (when they start and by
# --collect), as are plan files no sweep could have written; a folder of user files is never written; a run's stdout.log is not
# opened through a link; two sweeps never write one folder at once.
#
#   tests/cli/sweep_grid_test.sh [HEADLAB]     (default: $HEADLAB_BUILD_DIR/headlab, else build/headlab)
#
# Needs python3 to read the JSON (exit 77, skipped, without it).
set -uo pipefail

headlab=${1:-${HEADLAB_BUILD_DIR:-$(dirname "$0")/../../build}/headlab}
[[ -x $headlab ]] || { echo "sweep_grid_test: no headlab binary at $headlab" >&2; exit 2; }
command -v python3 >/dev/null || { echo "sweep_grid_test: python3 not found; skipped" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# Edits a JSON file in place: the Python statement gets the document as j.
edit() { python3 -c "import json,sys; p=sys.argv[1]; j=json.load(open(p)); $2; json.dump(j, open(p,'w'))" "$1"; }
# Runs headlab, expecting exit 2 and a message.
refused() {  # expected message, then arguments
  local want=$1
  shift
  "$headlab" "$@" >/dev/null 2>"$tmp/err.txt"
  local status=$?
  [[ $status -eq 2 ]] || fail "headlab $* exited $status, not 2: $(cat "$tmp/err.txt")"
  grep -qF -- "$want" "$tmp/err.txt" || fail "headlab $*: expected '$want' in: $(cat "$tmp/err.txt")"
}

tiny=(--steps 2 --d-model 8 --eval-batch 8 --log-every 1 --analyze-every 0)

echo "== --lr 1e-3,1e-2 --layers 1,2 --seeds 0-2: 12 runs in 4 configurations"
"$headlab" sweep --lr 1e-3,1e-2 --layers 1,2 --seeds 0-2 "${tiny[@]}" --jobs 3 --out "$tmp/grid" \
  >"$tmp/out.txt" 2>"$tmp/err.txt" || fail "the grid sweep exited $?: $(cat "$tmp/err.txt")"
grep -q '^configuration  *runs  failed' "$tmp/out.txt" || fail "no table of configurations: $(cat "$tmp/out.txt")"
python3 - "$tmp/grid" <<'EOF' || fail "the grid's sweep.json is not as expected"
import json, os, sys
folder = sys.argv[1]
s = json.load(open(os.path.join(folder, "sweep.json")))
def check(ok, what):
    if not ok:
        print("sweep.json:", what, file=sys.stderr)
        sys.exit(1)
check(s["grid"] == {"layers": [1, 2], "lr": [0.001, 0.01]}, "grid %s" % s["grid"])
check(s["planned_runs"] == 12 and len(s["runs"]) == 12 and s["jobs_flag"] == 3, "12 runs, --jobs 3")
dirs = sorted(r["dir"] for r in s["runs"])
want = sorted("layers%d-lr%s-h2-s%d" % (l, lr, seed) for l in (1, 2) for lr in ("0.001", "0.01") for seed in range(3))
check(dirs == want, "run folders %s" % dirs)
for r in s["runs"]:
    check(r["status"] == "done", "run %s %s" % (r["dir"], r["status"]))
    cfg = json.load(open(os.path.join(folder, r["dir"], "config.json")))
    check(cfg["layers"] == r["settings"]["layers"] and cfg["lr"] == r["settings"]["lr"], "the run trained its cell's values")
    check(len(r["head_results"]) == 2 * r["settings"]["layers"], "a result per head of every layer")
check(len(s["configs"]) == 4, "4 configurations")
for c in s["configs"]:
    runs = [r for r in s["runs"] if r["config"] == c["name"]]
    check(len(runs) == 3 and c["runs"] == 3, "3 runs in %s" % c["name"])
    check(all(r["settings"] == c["settings"] for r in runs), "the runs of %s" % c["name"])
    check(c["specialized"] == sum(r["specialized"] for r in runs), "specialized count of %s" % c["name"])
check([f["flag"] for f in s["flags"]] == ["layers", "lr"], "a summary per varied flag")
for f in s["flags"]:
    check([v["runs"] for v in f["values"]] == [6, 6], "6 runs per value of %s" % f["flag"])
page = open(os.path.join(folder, "sweep.html")).read()
for c in s["configs"]:
    check("<li>" + c["name"] + ": " in page, "sweep.html lists %s" % c["name"])
EOF

echo "== --redraw writes sweep.html again from sweep.json"
rm "$tmp/grid/sweep.html"
"$headlab" sweep --redraw "$tmp/grid" >/dev/null 2>"$tmp/err.txt" || fail "--redraw failed: $(cat "$tmp/err.txt")"
grep -q '<li>layers 2, lr 0.01, h2: ' "$tmp/grid/sweep.html" 2>/dev/null || fail "--redraw wrote no page of the grid"
refused "not a sweep folder" sweep --redraw "$tmp"
# As strictly as --resume reads the plan and --collect the runs: no page of a file no sweep wrote.
cp "$tmp/grid/sweep.json" "$tmp/grid.json"
for change in 'j["runs"] = "x"' 'j["seeds"] = [5, 5]' 'j["runs"][0]["loss"] = "high"' 'j["runs"][0]["dir"] = "elsewhere"' \
              'j["runs"] = j["runs"] * 2' 'j["config"]["steps"] = -1' 'del j["format"]'; do
  edit "$tmp/grid/sweep.json" "$change"
  "$headlab" sweep --redraw "$tmp/grid" >/dev/null 2>"$tmp/err.txt"
  [[ $? -eq 2 && $(wc -l <"$tmp/err.txt") -eq 1 ]] && grep -qF -- "--redraw $tmp/grid: $tmp/grid/sweep.json" "$tmp/err.txt" ||
    fail "--redraw of a sweep.json with $change: $(cat "$tmp/err.txt")"
  cp "$tmp/grid.json" "$tmp/grid/sweep.json"
done

echo "== --resume keeps the grid, the finished runs and --jobs; a damaged heads.json is analyzed again"
rm "$tmp/grid/layers2-lr0.01-h2-s2/heads.json"
rm -r "$tmp/grid/layers1-lr0.001-h2-s1"
echo '{"format": "headlab-heads/1", ' >"$tmp/grid/layers2-lr0.001-h2-s0/heads.json"
refused "--lr cannot be given with it" sweep --resume "$tmp/grid" --lr 0.1
# As if layers2-lr0.01-h2-s2 had been stopped after 100 s: it goes on from its checkpoint.
edit "$tmp/grid/sweep.json" 'r=[r for r in j["runs"] if r["dir"] == "layers2-lr0.01-h2-s2"][0]; r["status"]="interrupted"; r["seconds"]=100'
"$headlab" sweep --resume "$tmp/grid" >"$tmp/out.txt" 2>"$tmp/err.txt" || fail "--resume failed: $(cat "$tmp/err.txt")"
grep -q '^sweep: 12 runs of first-prev-pair (layers 1,2 x lr 0.001,0.01 x heads 2 x seeds 0,1,2, 2 steps each), 3 at a time' \
  "$tmp/err.txt" || fail "--resume did not keep the plan and --jobs 3: $(head -1 "$tmp/err.txt")"
[[ $(grep -c 'finished earlier' "$tmp/err.txt") -eq 9 ]] || fail "not 9 runs kept: $(cat "$tmp/err.txt")"
grep -qF "sweep: cannot read $tmp/grid/layers2-lr0.001-h2-s0/heads.json: " "$tmp/err.txt" &&
  grep -q "running layers2-lr0.001-h2-s0 again" "$tmp/err.txt" || fail "the damaged heads.json is not named: $(cat "$tmp/err.txt")"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if all(r['status'] == 'done' for r in s['runs']) else 1)" \
  "$tmp/grid/sweep.json" || fail "a run of the resumed sweep is not done"
[[ $(ls -d "$tmp"/grid/*-s* | wc -l) -eq 12 ]] || fail "--resume made other run folders"
python3 -c "import json,sys; before={r['dir']: r['seconds'] for r in json.load(open(sys.argv[1]))['runs']}
after={r['dir']: r['seconds'] for r in json.load(open(sys.argv[2]))['runs']}
kept=[d for d in after if d not in ('layers2-lr0.01-h2-s2', 'layers1-lr0.001-h2-s1', 'layers2-lr0.001-h2-s0')]
sys.exit(0 if len(kept) == 9 and all(after[d] == before[d] > 0 for d in kept) else 1)" "$tmp/grid.json" "$tmp/grid/sweep.json" ||
  fail "--resume did not keep the times of the runs finished earlier"
python3 -c "import json,sys; r=[r for r in json.load(open(sys.argv[1]))['runs'] if r['dir'] == 'layers2-lr0.01-h2-s2'][0]
sys.exit(0 if 100 < r['seconds'] < 200 else 1)" "$tmp/grid/sweep.json" || fail "an interrupted run's earlier time is not added"

echo "== bad lists exit 2 and create nothing"
refused "--lr '1e-3,abc': 'abc' is not a finite number" sweep --lr 1e-3,abc --out "$tmp/bad"
refused "--layers" sweep --layers 1,0 --out "$tmp/bad"
refused "--optimizer must be adamw, adam or sgd, got 'nope'" sweep --optimizer adamw,nope --out "$tmp/bad"
[[ ! -e $tmp/bad ]] || fail "a refused sweep created --out"

echo "== a plan file no sweep could have written is refused"
"$headlab" sweep --seeds 0 "${tiny[@]}" --out "$tmp/plain" >/dev/null 2>&1 || fail "the one-run sweep failed"
cp "$tmp/plain/sweep.json" "$tmp/plain.json"
edit "$tmp/plain/sweep.json" 'j["seeds"] = [5, 5]'
refused "5 is listed twice" sweep --resume "$tmp/plain"
edit "$tmp/plain/sweep.json" 'j["seeds"] = [-3]'
refused "-3 is not from 0" sweep --resume "$tmp/plain"
edit "$tmp/plain/sweep.json" 'j["seeds"] = list(range(20000))'
refused "more than 10000" sweep --resume "$tmp/plain"
[[ ! -e $tmp/plain/h2-s5 && ! -e $tmp/plain/h2-s-3 && ! -e $tmp/plain/h2-s1 ]] || fail "a refused plan created run folders"
cp "$tmp/plain.json" "$tmp/plain/sweep.json"

echo "== shards trained with other settings are refused, when they start and by --collect"
"$headlab" sweep --layers 1,2 --seeds 0 "${tiny[@]}" --shard 1/2 --out "$tmp/shards" >/dev/null 2>"$tmp/err.txt" ||
  fail "shard 1/2 failed: $(cat "$tmp/err.txt")"
refused "steps 2 vs 3" sweep --layers 1,2 --seeds 0 "${tiny[@]:2}" --steps 3 --shard 2/2 --out "$tmp/shards"
"$headlab" sweep --layers 1,2 --seeds 0 "${tiny[@]}" --shard 2/2 --out "$tmp/shards" >/dev/null 2>"$tmp/err.txt" ||
  fail "shard 2/2 failed: $(cat "$tmp/err.txt")"
"$headlab" sweep --collect "$tmp/shards" >"$tmp/out.txt" 2>"$tmp/err.txt" || fail "--collect failed: $(cat "$tmp/err.txt")"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if len(s['configs']) == 2 and len(s['runs']) == 2 else 1)" \
  "$tmp/shards/sweep.json" || fail "the collected grid has not 2 configurations of one run each"
shard2=$tmp/shards/shard-2-of-2.json
cp "$shard2" "$tmp/shard2.json"
edit "$shard2" 'j["config"]["steps"] = 40; j["config"]["lr"] = 0.01'
refused "other settings than shard-1-of-2.json (lr 0.001 vs 0.01, steps 2 vs 40)" sweep --collect "$tmp/shards"
cp "$tmp/shard2.json" "$shard2"
edit "$shard2" 'j["jobs"] = 2147483647'
refused '"jobs" 2147483647 is not a whole number from 1 to 10000' sweep --collect "$tmp/shards"
cp "$tmp/shard2.json" "$shard2"
edit "$shard2" 'j["runs"][0].update(status="failed", exit_code=1e300)'
refused '"exit_code" 1e+300 is not a whole number from 0 to 255' sweep --collect "$tmp/shards"
cp "$tmp/shard2.json" "$shard2"
edit "$shard2" 'j["runs"] = j["runs"] * 3'
refused "is listed twice" sweep --collect "$tmp/shards"
cp "$tmp/shard2.json" "$shard2"
edit "$shard2" 'j["shard"] = 3'
refused '"shard" 3 is not a whole number from 1 to 2' sweep --collect "$tmp/shards"
cp "$tmp/shard2.json" "$shard2"

echo "== one folder holds one split of a sweep: another is refused when it starts and by --collect"
refused "--out $tmp/shards holds shard-1-of-2.json, shard-2-of-2.json, of this sweep split into 2 shards" \
  sweep --layers 1,2 --seeds 0 "${tiny[@]}" --shard 1/3 --out "$tmp/shards"
grep -qF "(--shard K/2), or remove those files first (rm $tmp/shards/shard-1-of-2.json $tmp/shards/shard-2-of-2.json)" \
  "$tmp/err.txt" || fail "the refusal does not say what to do: $(cat "$tmp/err.txt")"
[[ ! -e $tmp/shards/shard-1-of-3.json ]] || fail "the refused shard wrote its file"
cp "$shard2" "$tmp/shards/shard-3-of-3.json"
edit "$tmp/shards/shard-3-of-3.json" 'j["shard"] = 3; j["shards"] = 3'
refused "shard files of 2 splits of the sweep are mixed in one folder: 2 shards (shard-1-of-2.json, shard-2-of-2.json; all done) and 3 shards (shard-3-of-3.json; shards 1, 2 missing)" \
  sweep --collect "$tmp/shards"
grep -qF "(rm $tmp/shards/shard-3-of-3.json), then --collect again" "$tmp/err.txt" || fail "--collect does not name the file to remove: $(cat "$tmp/err.txt")"
rm "$tmp/shards/shard-3-of-3.json"
"$headlab" sweep --collect "$tmp/shards" >/dev/null 2>"$tmp/err.txt" || fail "--collect of one split failed: $(cat "$tmp/err.txt")"

echo "== a folder of user files is never written, with --shard or --force"
mkdir -p "$tmp/user/h2-s0"
echo mine >"$tmp/user/config.json"
echo mine >"$tmp/user/h2-s0/stdout.log"
refused "holds no sweep" sweep --seeds 0 "${tiny[@]}" --shard 1/1 --out "$tmp/user"
refused "holds no sweep" sweep --seeds 0 "${tiny[@]}" --force --out "$tmp/user"
[[ $(cat "$tmp/user/config.json") == mine && $(cat "$tmp/user/h2-s0/stdout.log") == mine ]] ||
  fail "a refused sweep wrote over the user's files"

echo "== a run's stdout.log is not opened through a link"
echo precious >"$tmp/precious.txt"
ln -sf "$tmp/precious.txt" "$tmp/plain/h2-s0/stdout.log"
"$headlab" sweep --seeds 0 "${tiny[@]}" --force --out "$tmp/plain" >/dev/null 2>&1
[[ $(cat "$tmp/precious.txt") == precious ]] || fail "the sweep wrote through the link stdout.log"

echo "== two sweeps never write one folder at once"
"$headlab" sweep --seeds 0 --steps 1000000 --d-model 8 --eval-batch 8 --out "$tmp/busy" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do
  [[ -s $tmp/busy/h2-s0/train.log ]] && break
  sleep 0.1
done
log_size=$(stat -c %s "$tmp/busy/h2-s0/stdout.log" 2>/dev/null || echo 0)
refused "is being written by another sweep" sweep --seeds 0 "${tiny[@]}" --force --out "$tmp/busy"
refused "is being written by" sweep --redraw "$tmp/busy"
(( $(stat -c %s "$tmp/busy/h2-s0/stdout.log") >= log_size )) || fail "the second sweep cut the first one's stdout.log"
kill -TERM "$pid"
wait "$pid"
status=$?
[[ $status -eq 143 ]] || fail "the first sweep exited $status after SIGTERM, not 143"

if ((failures)); then
  echo "sweep_grid_test: $failures failure(s)" >&2
  exit 1
fi
echo "sweep_grid_test: all passed"
