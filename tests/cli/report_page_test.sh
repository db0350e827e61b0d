#!/usr/bin/env bash
# report.html of a 2-layer attention-only run in headless Chromium: it loads
# with no console error and no network (scripts/screenshot_report.sh), and
# its circuit view shows the composition graph, the copying scores and the
# pruning curve, matching heads.json.
#
#   tests/cli/report_page_test.sh [HEADLAB]   (default: $HEADLAB_BUILD_DIR/headlab, else build/headlab)
#
# Skipped (exit 77) without Chromium or python3. Takes ~10 s.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
headlab=${1:-${HEADLAB_BUILD_DIR:-$root/build}/headlab}
[[ -x $headlab ]] || { echo "report_page_test: no headlab binary at $headlab" >&2; exit 2; }
command -v python3 >/dev/null || { echo "report_page_test: python3 not found; skipped" >&2; exit 77; }
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null ||
  { echo "report_page_test: Chromium not found; skipped" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$headlab" train --task induction --layers 2 --attn-only --steps 60 --d-model 32 --eval-batch 64 --log-every 30 \
  --analyze-every 30 --out "$tmp/run" >"$tmp/train.txt" 2>&1 || { cat "$tmp/train.txt" >&2; exit 1; }
REPORT_DOM="$tmp/dom.html" "$root/scripts/screenshot_report.sh" "$tmp/run/report.html" "$tmp/shot.png" || exit 1
python3 - "$tmp/dom.html" "$tmp/run/heads.json" <<'PY'
import json, re, sys
dom, heads = open(sys.argv[1], encoding="utf-8").read(), json.load(open(sys.argv[2]))
def check(ok, what):
    if not ok:
        print("report_page_test:", what, file=sys.stderr)
        sys.exit(1)
check('id="circuits"' in dom, "no circuit view")
circ = dom[dom.index('id="circuits"'):]
for title in ["Composition between layers", "Copying score", "Pruning: accuracy", "Pruning: loss"]:
    check(title in circ, "no chart '%s'" % title)
base = heads["circuits"]["composition_baseline"]
above = sum(1 for c in heads["circuits"]["composition"] for k in "qkv" if c[k] > base)
edges = len(re.findall(r'class="edge"', circ))
check(edges == above, "%d edges drawn, heads.json has %d scores above the baseline" % (edges, above))
check(len(re.findall(r'class="node"', circ)) == len(heads["heads"]), "not one node per head")
bars = len(re.findall(r'class="copy-bar"', circ))
check(bars == sum(1 for h in heads["heads"] if h["copying"] is not None), "not one copying bar per scored head")
check(len(heads["pruning"]["loss"]) == len(heads["heads"]) + 1, "pruning curve length")
PY
