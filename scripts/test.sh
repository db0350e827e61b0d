#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build once per GEMM
# backend (oneDNN, the default, all of it; then OpenBLAS through
# HEADLAB_GEMM, the tests of what computes), once more in bf16 mixed
# precision (HEADLAB_PRECISION=bf16, the same tests on oneDNN; on a CPU
# without bf16 units, on emulated bf16 products), the Python package's tests
# (pytest) and its notebook (examples/*.ipynb, executed headless),
# then the suite again under AddressSanitizer and UndefinedBehaviorSanitizer
# (all but the tests labelled "browser": Chromium's code is not instrumented;
# and the long repetitions of stress_tests, not built there),
# then each libFuzzer target for a bounded time (HEADLAB_FUZZ_SECONDS, 30).
#
#   scripts/test.sh               all of it
#   scripts/test.sh --fast        the Release runs only (both backends, and bf16)
#   scripts/test.sh --help        this text
set -euo pipefail
cd "$(dirname "$0")/.."
# Options first, before anything is built: a mistyped one (--fsat) would
# otherwise start the whole suite, sanitizers and fuzzers included.
fast=0
for arg in "$@"; do
  case "$arg" in
    --fast) fast=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
jobs=$(nproc)
passed=0
failed=0

# Runs ctest in a build folder (further arguments go to ctest) and adds its
# counts to the totals.
run_ctest() {
  local log
  log=$(mktemp)
  local status=0
  (cd "$1" && ctest --output-on-failure -j "$jobs" "${@:2}") | tee "$log" || status=$?
  local total fails
  total=$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' "$log" | tail -n 1)
  fails=$(sed -nE 's/.* ([0-9]+) tests failed out of .*/\1/p' "$log" | tail -n 1)
  rm -f "$log"
  passed=$((passed + ${total:-0} - ${fails:-0}))
  failed=$((failed + ${fails:-0}))
  if [ "$status" -ne 0 ]; then
    echo "tests: $passed passed, $failed failed"
    exit "$status"
  fi
}

# Prints the count pytest's summary gives for a word (passed, failed,
# errors?), empty if none. grep finds no match on a clean run, and under
# pipefail its status would end the script: hence the `|| true`.
pytest_count() {
  { grep -oE "[0-9]+ $1" "$2" || true; } | tail -n 1 | cut -d' ' -f1
}

# Runs the Python package's tests and executes the notebooks (docs/python.md),
# adding pytest's counts and one test per notebook to the totals. pytest's
# exit 5 (no tests collected) is a failure, not a silent pass.
run_python() {
  local log status=0 p f e
  log=$(mktemp)
  HEADLAB_BUILD="$PWD/build" /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests | tee "$log" || status=$?
  p=$(pytest_count passed "$log")
  f=$(pytest_count failed "$log")
  e=$(pytest_count 'errors?' "$log")
  rm -f "$log"
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0} + ${e:-0}))
  if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests in python/tests" >&2
    failed=$((failed + 1))
  fi
  local nb
  for nb in examples/*.ipynb; do
    if HEADLAB_BUILD="$PWD/build" /usr/bin/python3 python/run_notebook.py "$nb"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      status=1
    fi
  done
  if [ "$status" -ne 0 ]; then
    echo "tests: $passed passed, $failed failed"
    exit 1
  fi
}

# The second GEMM backend runs the tests of what computes (the libraries up to
# training and sessions, and MPI's gradient sums); the analysis and the
# CLI's handling of input, files and processes are the same on both.
gemm_labels="^(core_tests|autograd_tests|layers_tests|optim_tests|train_tests|cli_mpi)$"

# Says how long the part just done took, so that CI's log shows where its
# half hour goes (the whole run must stay under 30 minutes on 2 cores).
mark=$SECONDS
took() {
  echo "test.sh: $1 took $((SECONDS - mark)) s (at $SECONDS s)"
  mark=$SECONDS
}

scripts/setup.sh --all --python
took "setting up and the Release build"
# What the tests need beyond the build: python3 (the script tests read JSON),
# chromium (the page tests), clang and its libFuzzer runtime (the fuzzers),
# pytest, nbclient, ipykernel, matplotlib and pandas for the Python package
# and its notebook.
scripts/install_packages.sh python3 chromium clang libclang-rt-14-dev \
  python3-pytest python3-nbclient python3-ipykernel python3-matplotlib python3-pandas
took "installing the tests' tools"
# The fuzzers' clang build runs from here on beside everything else, at the
# lowest priority, so that it takes only the time the rest leaves idle: the
# tests wait on the processes they start and the builds on their slowest
# file. Started after the Release build, it is done by the fuzzers' turn.
fuzz_build=""
if [ "$fast" -eq 0 ]; then
  fuzz_log=$(mktemp)
  # Its own process group (set -m), to be stopped with the script, but in
  # this session: Linux's autogroups share the CPU fairly between sessions,
  # so under setsid nice would count for nothing against the tests.
  set -m
  nice -n 19 fuzz/run.sh --build >"$fuzz_log" 2>&1 &
  fuzz_build=$!
  set +m
  trap 'kill -- -"$fuzz_build" 2>/dev/null || true; rm -f "$fuzz_log"' EXIT
fi
# Without bf16 units the library refuses bf16, and the bf16 tests would skip:
# HEADLAB_EMULATE_BF16=1 lets them run, the bf16 products computed as f32
# products of the rounded operands (core/gemm.h): bf16's arithmetic, every
# path that rounds, keeps or guards, without the units' speed. Kept for every
# pass below. Should the kernel's flags list units that headlab's own check
# (cpuid) does not find, the bf16 tests fail with the refusal: the bf16 pass
# cannot pass in f32 by mistake.
if ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  export HEADLAB_EMULATE_BF16=1
  echo "test.sh: this CPU has no bf16 units (no avx512_bf16 or amx_bf16 among /proc/cpuinfo's flags):" \
    "the bf16 tests run on emulated bf16 products (HEADLAB_EMULATE_BF16=1)"
fi
HEADLAB_GEMM=onednn HEADLAB_PRECISION=f32 run_ctest build
took "the Release tests"
HEADLAB_GEMM=openblas HEADLAB_PRECISION=f32 run_ctest build --label-regex "$gemm_labels"
took "the OpenBLAS tests"
# The same tests with every float32 product in bf16 mixed precision (docs/performance.md).
HEADLAB_GEMM=onednn HEADLAB_PRECISION=bf16 run_ctest build --label-regex "$gemm_labels"
took "the bf16 tests"
run_python
took "the Python package's tests and notebook"
if [ "$fast" -eq 1 ]; then
  echo "tests: $passed passed, $failed failed"
  exit 0
fi

scripts/setup.sh --sanitize
took "the sanitizer build"
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run_ctest build-san --label-exclude '^browser$'
took "the sanitizer tests"

if ! wait "$fuzz_build"; then
  echo "test.sh: building the fuzzers failed:" >&2
  tail -n 30 "$fuzz_log" >&2
  exit 1
fi
took "waiting for the fuzzers' build"
fuzz/run.sh "${HEADLAB_FUZZ_SECONDS:-30}"
took "the fuzzers"
echo "Release and ASan + UBSan suites passed; fuzzers found nothing."
echo "tests: $passed passed, $failed failed"
