#!/usr/bin/env bash
# report.html in headless Chromium, for what a run's history adds: the
# "Attention over training" slider over the run's snapshots (one step per
# snapshot, then the final analysis), y labels of a log-scale loss that stay
# apart over ten decades, the pruning chart's ticks at whole heads only; an
# analysis of a checkpoint file alone, which has no history, saying so; and
# `analyze RUN --out DIR` drawing the run's own history there.
#
#   tests/cli/report_workflow_test.sh [HEADLAB]   (default: $HEADLAB_BUILD_DIR/headlab, else build/headlab)
#
# Skipped (exit 77) without Chromium or python3. Takes ~10 s.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
headlab=${1:-${HEADLAB_BUILD_DIR:-$root/build}/headlab}
[[ -x $headlab ]] || { echo "report_workflow_test: no headlab binary at $headlab" >&2; exit 2; }
command -v python3 >/dev/null || { echo "report_workflow_test: python3 not found; skipped" >&2; exit 77; }
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null ||
  { echo "report_workflow_test: Chromium not found; skipped" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$headlab" train --heads 4 --d-model 16 --batch 16 --eval-batch 32 --steps 20 --analyze-every 0 --threads 1 \
  --snapshot-every 5 --out "$tmp/run" >"$tmp/train.txt" 2>&1 || { cat "$tmp/train.txt" >&2; exit 1; }
# The same page with a loss history over ten decades (1e1 down to 1e-9).
python3 - "$tmp/run/report.html" "$tmp/decades.html" <<'PY'
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'(<script type="application/json" id="headlab-data">)(.*?)(</script>)', html, re.S)
data = json.loads(m.group(2))
data["history"] = [{"step": 10 * i, "loss": 10.0 ** (1 - i / 2), "eval_loss": 10.0 ** (1 - i / 2)} for i in range(21)]
text = json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
open(sys.argv[2], "w", encoding="utf-8").write(html[:m.start(2)] + text + html[m.end(2):])
PY
# A checkpoint file away from its run has no history: its page says so, not "train with --analyze-every".
# `analyze RUN --out DIR` draws the run's own history (trained without per-head records:
# that page does send the reader to --analyze-every).
mkdir "$tmp/alone" && cp "$tmp/run/checkpoint.safetensors" "$tmp/alone/" || exit 1
"$headlab" analyze "$tmp/alone/checkpoint.safetensors" --batch 8 --out "$tmp/analysis" --quiet >"$tmp/analyze.txt" 2>&1 ||
  { cat "$tmp/analyze.txt" >&2; exit 1; }
"$headlab" analyze "$tmp/run" --batch 8 --out "$tmp/analysis-run" --quiet >"$tmp/analyze-run.txt" 2>&1 ||
  { cat "$tmp/analyze-run.txt" >&2; exit 1; }
for folder in analysis analysis-run; do
  REPORT_DOM="$tmp/$folder.dom" "$root/scripts/screenshot_report.sh" "$tmp/$folder/report.html" "$tmp/shot.png" \
    1400x2600 || exit 1
done
python3 - "$tmp/analysis.dom" "$tmp/analysis-run.dom" <<'PY' || exit 1
import re, sys
def captions(path):  # what the page drew, not its script
    return re.findall(r'<div class="caption">([^<]*)</div>', open(path, encoding="utf-8").read())
alone, run = captions(sys.argv[1]), captions(sys.argv[2])
if not any("No training history in this folder" in c for c in alone) or any("--analyze-every" in c for c in alone):
    print("report_workflow_test: a checkpoint's page sends the reader to --analyze-every: %s" % alone, file=sys.stderr)
    sys.exit(1)
if any("No training history" in c for c in run) or not any("--analyze-every" in c for c in run):
    print("report_workflow_test: analyze RUN --out lost the run's history: %s" % run, file=sys.stderr)
    sys.exit(1)
PY
for page in run/report.html decades.html; do
  REPORT_DOM="$tmp/${page//\//-}.dom" "$root/scripts/screenshot_report.sh" "$tmp/$page" "$tmp/shot.png" 1400x2600 ||
    exit 1
done
python3 - "$tmp/run-report.html.dom" "$tmp/decades.html.dom" <<'PY'
import re, sys
run, decades = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
def check(ok, what):
    if not ok:
        print("report_workflow_test:", what, file=sys.stderr)
        sys.exit(1)
check('id="snapshots"' in run, "no 'Attention over training' section")
section = run[run.index('id="snapshots"'):]
slider = re.search(r'<input type="range"[^>]*max="(\d+)"', section)
check(slider and slider.group(1) == "4", "the slider has %s steps, not 4 snapshots + the final analysis" % (slider and slider.group(1)))
check(section.count('class="head-card"') >= 4, "the section does not show the 4 heads")
def chart(dom, title):
    at = dom.index(title)
    return dom[at:dom.index("</svg>", at)]
# The loss chart's y labels are right-aligned at the axis; none closer than 12 px.
loss = chart(decades, "Loss (log scale)")
ys = sorted(float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="end" dominant-baseline="central"', loss))
check(len(ys) >= 3, "log loss axis has %d labels" % len(ys))
check(all(b - a >= 12 for a, b in zip(ys, ys[1:])), "log loss labels overlap: y = %s" % ys)
pruning = chart(run, "Pruning: accuracy")
xs = re.findall(r'text-anchor="middle" fill="#64748b">([^<]*)</text>', pruning)
check(xs and all(re.fullmatch(r"\d+", x) for x in xs), "pruning x ticks %s are not whole heads" % xs)
PY
