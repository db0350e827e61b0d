#!/usr/bin/env bash
# scripts/test.sh's options, as setup.sh's: --help (and -h) prints the usage
# and a mistyped option (--fsat) is refused with exit 2, both before anything
# is built or run; --fast and no option at all still go on to the build. Run
# on a copy of test.sh beside a setup.sh that only records its call and
# fails, so that no case can start the real suite.
#
#   tests/cli/test_script_options_test.sh [SOURCE_DIR]   (default: this checkout)
set -uo pipefail
source_dir=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

mkdir "$tmp/scripts"
cp "$source_dir/scripts/test.sh" "$tmp/scripts/test.sh"
cat >"$tmp/scripts/setup.sh" <<'STUB'
#!/usr/bin/env bash
echo "$*" >>"$(dirname "$0")/../setup-called"
exit 1
STUB
chmod +x "$tmp/scripts/setup.sh"

# Runs the copy with "$@"; sets $status, $out, $err, and $built (setup.sh's arguments, if it ran).
run() {
  rm -f "$tmp/setup-called"
  "$tmp/scripts/test.sh" "$@" >"$tmp/out" 2>"$tmp/err"
  status=$?
  out=$(cat "$tmp/out")
  err=$(cat "$tmp/err")
  built=$(cat "$tmp/setup-called" 2>/dev/null)
}

for help in --help -h; do
  run "$help"
  [[ $status == 0 ]] || fail "test.sh $help exited $status: $err"
  [[ $out == *"scripts/test.sh --fast"* ]] || fail "test.sh $help does not print the usage: $out"
  [[ -z $built ]] || fail "test.sh $help started the build (setup.sh $built)"
done

for bad in --fsat fast "--fast --fsat"; do
  # shellcheck disable=SC2086  # "--fast --fsat" is two options
  run $bad
  [[ $status == 2 ]] || fail "test.sh $bad exited $status, not 2"
  [[ $err == *"test.sh: unknown option '"*"' (try --help)"* ]] || fail "test.sh $bad says: $err"
  [[ -z $built ]] || fail "test.sh $bad started the build (setup.sh $built)"
done

# What .ci/run and the README run: the build starts (here the stub fails it).
for good in "" --fast; do
  # shellcheck disable=SC2086  # "" is no option at all
  run $good
  [[ $built == "--all --python" ]] || fail "test.sh $good did not start the build: status $status, $err"
done

if ((failures > 0)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "test.sh options: all passed"
