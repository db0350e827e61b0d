#!/usr/bin/env bash
# report.html in headless Chromium: a 2-layer induction run analyzed with
# --patch loads with no console error and no network, and builds the
# behaviour-over-training and interventions sections.
#
#   tests/cli/report_browser_test.sh [HEADLAB]
#
# Exit 77 (skipped) without Chromium. Takes ~15 s.
set -uo pipefail
headlab=${1:-${HEADLAB_BUILD_DIR:-$(dirname "$0")/../../build}/headlab}
[[ -x $headlab ]] || { echo "report_browser_test: no headlab binary at $headlab" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$headlab" train --task induction --layers 2 --attn-only --d-model 32 --steps 100 --analyze-every 25 \
  --eval-batch 64 --threads 1 --out "$tmp/run" >"$tmp/train.txt" 2>&1 || { cat "$tmp/train.txt" >&2; exit 1; }
"$headlab" analyze "$tmp/run" --patch --threads 1 >"$tmp/analyze.txt" 2>&1 || { cat "$tmp/analyze.txt" >&2; exit 1; }
grep -q "patch restores" "$tmp/analyze.txt" || { echo "FAIL: analyze --patch printed no interventions table" >&2; exit 1; }
REPORT_EXPECT_IDS="behaviour interventions" "$root/scripts/screenshot_report.sh" "$tmp/run/report.html" "$tmp/shot.png"
status=$?
[[ $status -eq 77 ]] && exit 77
# The probe must fail on a section the page does not build.
if [[ $status -eq 0 ]] && REPORT_EXPECT_IDS="no-such-section" "$root/scripts/screenshot_report.sh" \
  "$tmp/run/report.html" "$tmp/shot2.png" 2>/dev/null; then
  echo "FAIL: a missing section was not reported" >&2
  exit 1
fi
exit $status
