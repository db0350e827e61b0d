#!/usr/bin/env bash
# Sets up, builds and runs every test: first the Release build, then the
# whole suite again under AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   scripts/test.sh               both runs
#   scripts/test.sh --fast        the Release run only
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/setup.sh
(cd build && ctest --output-on-failure -j "$jobs")

if [ "${1:-}" != "--fast" ]; then
  scripts/setup.sh --sanitize
  # OpenBLAS and libgomp keep thread pools alive at exit; they are not leaks of ours.
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  (cd build-san && ctest --output-on-failure -j "$jobs")
fi
