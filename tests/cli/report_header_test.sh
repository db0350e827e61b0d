#!/usr/bin/env bash
# report.html in headless Chromium, as a user first sees it: the page title
# names the run and its task; the header leads with what identifies the run
# (task, or a --data run's file, model shape with the widths in effect,
# steps, seed, optimizer, lr) and folds the rest; with 16 positions on a wide screen the maps open in the
# large view; the score plot draws each head in its own colour.
#
#   tests/cli/report_header_test.sh [HEADLAB]   (default: $HEADLAB_BUILD_DIR/headlab, else build/headlab)
#
# Skipped (exit 77) without Chromium or python3. Takes ~15 s.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
headlab=${1:-${HEADLAB_BUILD_DIR:-$root/build}/headlab}
[[ -x $headlab ]] || { echo "report_header_test: no headlab binary at $headlab" >&2; exit 2; }
command -v python3 >/dev/null || { echo "report_header_test: python3 not found; skipped" >&2; exit 77; }
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null ||
  { echo "report_header_test: Chromium not found; skipped" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# d-ff 0 (the default) means 4 * d-model: the header must say 128.
"$headlab" train --task previous --seq-len 16 --heads 4 --d-model 32 --steps 40 --seed 3 --eval-batch 64 \
  --log-every 20 --analyze-every 20 --threads 1 --out "$tmp/my-run" >"$tmp/train.txt" 2>&1 ||
  { cat "$tmp/train.txt" >&2; exit 1; }
REPORT_DOM="$tmp/dom.html" "$root/scripts/screenshot_report.sh" "$tmp/my-run/report.html" "$tmp/shot.png" 1400x1800 ||
  exit 1
python3 - "$tmp/dom.html" <<'PY'
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
def check(ok, what):
    if not ok:
        print("report_header_test:", what, file=sys.stderr)
        sys.exit(1)
title = re.search(r"<title>([^<]*)</title>", dom)
check(title and "my-run" in title.group(1) and "previous" in title.group(1), "title %r lacks the run or task" % (title and title.group(1)))
header = dom[dom.index("<header"):dom.index("</header>")]
folded = header.index("<details") if "<details" in header else len(header)
first = re.findall(r'data-key="([^"]+)"', header[:folded])
check(first == ["task", "model", "steps", "seed", "optimizer", "lr"], "header leads with %s" % first)
model = re.search(r'data-key="model">model <b>([^<]*)</b>', header)
check(model and "4 heads" in model.group(1) and "d_model 32" in model.group(1) and "d_ff 128" in model.group(1),
      "model chip %r" % (model and model.group(1)))
check(re.search(r'data-key="seed">seed <b>3</b>', header), "seed 3 not shown")
rest = re.findall(r'data-key="([^"]+)"', header[folded:])
check("threads" in rest and "data" not in rest and "data" not in first, "folded settings %s" % rest)
check('class="grid large"' in dom, "16 positions on a 1400 px screen: the maps are not in the large view")
plot = dom[dom.index("Head scores over training"):]
plot = plot[:plot.index("</svg>")]
colours = re.findall(r'<path d="[^"]*" fill="none" stroke="(#[0-9a-f]+)"', plot)
check(len(colours) == 4 and len(set(colours)) == 4, "score plot colours %s: not one per head" % colours)
PY
[[ $? -eq 0 ]] || exit 1

# A --data run leads with its file, never with the unused default task its
# config.json holds beside it.
printf '{"tokens": [1, 2, 3, 4, 5]}\n{"tokens": [5, 4, 3, 2, 1]}\n' >"$tmp/seqs.jsonl"
"$headlab" train --data "$tmp/seqs.jsonl" --d-model 16 --batch 2 --steps 2 --analyze-every 0 --threads 1 \
  --out "$tmp/data-run" >"$tmp/train-data.txt" 2>&1 || { cat "$tmp/train-data.txt" >&2; exit 1; }
REPORT_DOM="$tmp/dom-data.html" "$root/scripts/screenshot_report.sh" "$tmp/data-run/report.html" "$tmp/shot-data.png" \
  800x600 || exit 1
python3 - "$tmp/dom-data.html" "$tmp/seqs.jsonl" <<'PY'
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
header = dom[dom.index("<header"):dom.index("</header>")]
folded = header.index("<details") if "<details" in header else len(header)
first = re.findall(r'data-key="([^"]+)"', header[:folded])
if first[:2] != ["data", "model"] or "task" in re.findall(r'data-key="([^"]+)"', header):
    print("report_header_test: a --data run's header leads with %s" % first, file=sys.stderr)
    sys.exit(1)
if not re.search(r'data-key="data">data <b>[^<]*' + re.escape(sys.argv[2]) + '</b>', header):
    print("report_header_test: the data chip does not name %s" % sys.argv[2], file=sys.stderr)
    sys.exit(1)
PY
