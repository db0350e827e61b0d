#!/usr/bin/env bash
# sweep.html in a real browser: a small sweep's page loads in headless
# Chromium with no console error and no network (scripts/screenshot_report.sh),
# and what its script drew matches sweep.json: one rates row per head count
# with the Wilson intervals, one label bar per head count, one emergence dot per
# head with an emergence step, one loss dot per finished run, and a relative
# link to every run's report.html, which exists and loads cleanly too. The
# rate of runs that found their expected roles is shown beside specialized;
# a sweep.json from before it is drawn without it.
#
#   tests/cli/sweep_page_test.sh [HEADLAB]   (default: $HEADLAB_BUILD_DIR/headlab, else build/headlab)
#
# Exit 77 (skipped) without Chromium or python3. Takes ~15 s.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
headlab=${1:-${HEADLAB_BUILD_DIR:-$here/../../build}/headlab}
shot=$here/../../scripts/screenshot_report.sh
[[ -x $headlab ]] || { echo "sweep_page_test: no headlab binary at $headlab" >&2; exit 2; }
command -v python3 >/dev/null || { echo "sweep_page_test: python3 not found; skipped" >&2; exit 77; }
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null ||
  { echo "sweep_page_test: Chromium not found; skipped (apt-get install chromium)" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

echo "== a 2 x 2 sweep with analyses during training"
"$headlab" sweep --seeds 0-1 --heads 1,2 --steps 150 --d-model 32 --eval-batch 128 --log-every 50 \
  --analyze-every 50 --jobs 2 --out "$tmp/sweep" >"$tmp/out.txt" 2>"$tmp/err.txt" ||
  fail "the sweep exited $?: $(cat "$tmp/err.txt")"
grep -q "^sweep.html: $tmp/sweep/sweep.html$" "$tmp/out.txt" || fail "the sweep does not name sweep.html: $(cat "$tmp/out.txt")"

echo "== sweep.html loads in Chromium with no error and no network"
HEADLAB_DOM_OUT=$tmp/dom.html "$shot" "$tmp/sweep/sweep.html" "$tmp/sweep.png" >"$tmp/shot.txt" 2>&1 ||
  fail "sweep.html: $(cat "$tmp/shot.txt")"

echo "== what the page shows matches sweep.json"
python3 - "$tmp/sweep" "$tmp/dom.html" <<'PY' || fail "sweep.html does not show what sweep.json holds"
import html.parser, json, os, sys
folder, dom = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
s = json.load(open(os.path.join(folder, "sweep.json")))
errors = []
def check(ok, what):
    if not ok:
        errors.append(what)

class Page(html.parser.HTMLParser):
    """Collects the rows of each table (by class), the links, and the SVG circles by chart."""
    def __init__(self):
        super().__init__()
        self.tables, self.table, self.row, self.cell = {}, None, None, None
        self.links, self.svg, self.dots, self.segments, self.stacks = [], None, {}, [], 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class") or ""
        if tag == "table":
            self.table = self.tables.setdefault(cls, [])
        elif tag == "tr" and self.table is not None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = ""
        elif tag == "a":
            self.links.append(a.get("href"))
        elif tag == "svg":
            self.svg = a.get("aria-label")
        elif tag == "circle" and a.get("class") == "dot":
            self.dots[self.svg] = self.dots.get(self.svg, 0) + 1
        elif cls == "seg":
            self.segments.append((a.get("data-label"), int(a.get("data-heads"))))
        elif cls == "stack":
            self.stacks += 1
    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None
        elif tag == "tr" and self.row is not None:
            if self.table is not None and self.row:
                self.table.append(self.row)
            self.row = None
        elif tag in ("td", "th") and self.cell is not None:
            self.row.append(self.cell.strip())
            self.cell = None
        elif tag == "svg":
            self.svg = None
    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

p = Page()
p.feed(dom)
pct = lambda v: "%d%%" % round(100 * v)
rates = p.tables.get("heads rates", [])
check(len(rates) == 1 + len(s["configs"]), "one rates row per head count, got %s" % rates)
for row, c in zip(rates[1:], s["configs"]):
    check(row[0] == str(c["heads"]) and row[1] == str(c["runs"]), "rates row %s" % row)
    check(row[5] == "%d (%s)" % (c["specialized"], pct(c["specialized_share"])), "specialized cell %s" % row)
    check(row[6] == "[%s, %s]" % (pct(c["specialized_ci"][0]), pct(c["specialized_ci"][1])), "specialized CI %s" % row)
    check(row[4] == "[%s, %s]" % (pct(c["reached_target_ci"][0]), pct(c["reached_target_ci"][1])), "target CI %s" % row)
    # first-prev-pair expects two roles: every finished run counts in the roles' rate.
    check(c["runs_expecting_roles"] == c["runs"], "runs expecting roles %s" % c)
    check(row[7] == "%d of %d (%s)" % (c["roles_found"], c["runs_expecting_roles"], pct(c["roles_found_share"])),
          "roles found cell %s" % row)
    check(row[8] == "[%s, %s]" % (pct(c["roles_found_ci"][0]), pct(c["roles_found_ci"][1])), "roles found CI %s" % row)
check(p.stacks == len(s["configs"]), "one label bar per head count")
shown = {}
for label, n in p.segments:
    shown[label] = shown.get(label, 0) + n
want = {}
for c in s["configs"]:
    for label, st in c["labels"].items():
        if st["heads"]:
            want[label] = want.get(label, 0) + st["heads"]
check(shown == want, "label bars %s, sweep.json %s" % (shown, want))
done = [r for r in s["runs"] if r["status"] == "done"]
emerged = sum(1 for r in done for h in r["head_results"] if h["emerged"] is not None)
check(emerged > 0, "no head emerged in the test sweep: the emergence chart is untested")
check(p.dots.get("emergence steps", 0) == emerged, "emergence dots %s, heads %d" % (p.dots, emerged))
check(p.dots.get("specialization steps", 0) == sum(1 for r in done if r["specialized_step"] is not None),
      "specialization dots %s" % p.dots)
check(p.dots.get("final losses", 0) == len(done), "loss dots %s, runs %d" % (p.dots, len(done)))
runs_table = p.tables.get("heads runs", [])
check(len(runs_table) == 1 + len(s["runs"]), "one row per run")
for r in s["runs"]:
    link = r["dir"] + "/report.html"
    check(link in p.links, "no link to " + link)
    check(os.path.isfile(os.path.join(folder, link)), link + " does not exist")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
PY

grep -q '<th>roles found</th>' "$tmp/dom.html" || fail "the page shows no roles found column"

echo "== a sweep.json from before the roles' rate is redrawn without it, with no error"
python3 - "$tmp/sweep/sweep.json" <<'PY' || fail "cannot edit sweep.json"
import json, sys
s = json.load(open(sys.argv[1]))
for r in s["runs"]:
    del r["roles_found"]
for c in s["configs"] + [v for f in s["flags"] for v in f["values"]]:
    for key in ("runs_expecting_roles", "roles_found", "roles_found_share", "roles_found_ci"):
        del c[key]
json.dump(s, open(sys.argv[1], "w"))
PY
"$headlab" sweep --redraw "$tmp/sweep" >/dev/null 2>"$tmp/err.txt" || fail "--redraw of the old sweep.json: $(cat "$tmp/err.txt")"
HEADLAB_DOM_OUT=$tmp/old-dom.html "$shot" "$tmp/sweep/sweep.html" "$tmp/old.png" >"$tmp/shot.txt" 2>&1 ||
  fail "the old sweep.json's page: $(cat "$tmp/shot.txt")"
grep -q '<table class="heads rates">' "$tmp/old-dom.html" || fail "the old sweep.json's page drew no rates table"
! grep -q '<th>roles found</th>' "$tmp/old-dom.html" || fail "the old sweep.json's page shows a roles column it has no data for"

echo "== a run's report.html (linked from the page) loads cleanly too"
"$shot" "$tmp/sweep/h2-s0/report.html" "$tmp/report.png" >"$tmp/shot.txt" 2>&1 ||
  fail "h2-s0/report.html: $(cat "$tmp/shot.txt")"

if ((failures)); then
  echo "sweep_page_test: $failures failure(s)" >&2
  exit 1
fi
echo "sweep_page_test: all passed"
