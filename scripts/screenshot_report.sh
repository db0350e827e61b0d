#!/usr/bin/env bash
# Loads a report.html or sweep.html in headless Chromium, fails if the page
# logs a console error, throws, or fetches any resource (the page must be
# self-contained), and saves a screenshot.
#
#   scripts/screenshot_report.sh REPORT.html[#L0H1] [OUT.png] [WIDTHxHEIGHT]
#
# OUT.png defaults to REPORT.png next to the report; the window is 1400x2600.
# With REPORT_DOM=FILE in the environment, the rendered DOM is saved there too.
# A fragment #L<layer>H<head> opens that head's large view before the shot.
# REPORT_EXPECT_IDS="behaviour interventions" (environment): also fail unless
# the page built an element with each of these ids (its sections).
# With HEADLAB_DOM_OUT=FILE set, the DOM the page's script built is saved
# there (for tests that check what the page shows).
# Needs Debian's chromium package (apt-get install chromium). Exit status: 0 ok,
# 1 the page has errors or no screenshot was written, 2 usage, 77 no Chromium.
set -euo pipefail

usage() { echo "usage: $0 REPORT.html[#L0H1] [OUT.png] [WIDTHxHEIGHT]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 3 ]] || usage
report=${1%%#*}
fragment=""
[[ $1 == *#* ]] && fragment="#${1#*#}"
[[ -f $report ]] || { echo "$0: no such file: $report" >&2; exit 2; }
out=${2:-${report%.html}.png}
size=${3:-1400x2600}
[[ $size =~ ^[0-9]+x[0-9]+$ ]] || { echo "$0: window size '$size' is not WIDTHxHEIGHT" >&2; exit 2; }

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null; then browser=$b; break; fi
done
if [[ -z $browser ]]; then
  echo "$0: Chromium not found; install it with: apt-get install chromium" >&2
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
report_abs=$(cd "$(dirname "$report")" && pwd)/$(basename "$report")

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --disable-extensions --hide-scrollbars --mute-audio
  # Any host lookup fails, so a page that needs the network shows it.
  --host-resolver-rules="MAP * ~NOTFOUND"
  --virtual-time-budget=5000)

# 1. Errors: a copy of the page with a probe as its first script. The probe
#    records uncaught errors, console.error calls and every fetched resource,
#    and writes them into the DOM, which --dump-dom prints. (The markers are
#    assembled at run time so that the probe's own source never matches them.)
probe='<script>(function(){var e=[];window.__probe=e;
window.addEventListener("error",function(ev){e.push(ev.message?"error: "+ev.message+" (line "+ev.lineno+")":"failed to load: "+((ev.target&&(ev.target.src||ev.target.href))||ev.type));},true);
window.addEventListener("unhandledrejection",function(ev){e.push("Unhandled rejection: "+ev.reason);});
var ce=console.error;console.error=function(){e.push("console.error: "+Array.prototype.join.call(arguments," "));ce.apply(console,arguments);};
window.addEventListener("load",function(){setTimeout(function(){
performance.getEntriesByType("resource").forEach(function(r){e.push("fetched resource: "+r.name);});
"__EXPECT_IDS__".split(" ").forEach(function(id){if(id&&!document.getElementById(id))e.push("missing section #"+id);});
var p=document.createElement("pre");p.id="__probe_result";var m="PROBE-";p.textContent=m+"BEGIN\n"+e.join("\n")+"\n"+m+"END";
document.body.appendChild(p);},500);});})();</script>'
expect_ids=${REPORT_EXPECT_IDS:-}
[[ $expect_ids =~ ^[A-Za-z0-9_\ -]*$ ]] || { echo "$0: REPORT_EXPECT_IDS holds more than ids and spaces" >&2; exit 2; }
probe=${probe/__EXPECT_IDS__/$expect_ids}
probed="$work/probed.html"
python3 - "$report_abs" "$probed" "$probe" <<'EOF'
import re, sys
src, dst, probe = sys.argv[1], sys.argv[2], sys.argv[3]
html = open(src, encoding="utf-8", errors="replace").read()
m = re.search(r"<head[^>]*>", html, re.I)
at = m.end() if m else 0
open(dst, "w", encoding="utf-8").write(html[:at] + probe + html[at:])
EOF

# The same window size as the shot: the page lays itself out by the width.
"$browser" "${flags[@]}" --user-data-dir="$work/profile-dom" --window-size="${size/x/,}" --enable-logging=stderr --v=0 \
  --dump-dom "file://$probed$fragment" >"$work/dom.html" 2>"$work/stderr.log" || true

if [[ -n ${HEADLAB_DOM_OUT:-} ]]; then cp "$work/dom.html" "$HEADLAB_DOM_OUT"; fi
status=0
if ! grep -q "PROBE-END" "$work/dom.html"; then
  echo "$0: the page did not finish loading (no probe result); Chromium said:" >&2
  tail -n 20 "$work/stderr.log" >&2
  status=1
else
  errors=$(sed -n '/PROBE-BEGIN/,/PROBE-END/p' "$work/dom.html" | sed '1d;$d' | sed '/^[[:space:]]*$/d')
  if [[ -n $errors ]]; then
    echo "$0: the page reported errors:" >&2
    echo "$errors" >&2
    status=1
  fi
fi
# The rendered page, for tests that check what it shows (REPORT_DOM=FILE).
if [[ -n ${REPORT_DOM:-} ]]; then cp "$work/dom.html" "$REPORT_DOM"; fi
# Chromium's own log of console messages, for errors the probe cannot see
# (e.g. a syntax error in the page's script).
if grep -E "Uncaught|CONSOLE.*(Error|error)" "$work/stderr.log" >&2; then
  echo "$0: Chromium logged console errors (above)" >&2
  status=1
fi

# 2. The screenshot, of the unmodified page.
rm -f "$out"
"$browser" "${flags[@]}" --user-data-dir="$work/profile-shot" --window-size="${size/x/,}" \
  --screenshot="$out" "file://$report_abs$fragment" >"$work/shot.log" 2>&1 || true
if [[ ! -s $out ]]; then
  echo "$0: no screenshot written; Chromium said:" >&2
  tail -n 20 "$work/shot.log" >&2
  exit 1
fi
if [[ $status -eq 0 ]]; then
  echo "ok: $report loads with no console errors and no network; screenshot $out"
fi
exit $status
