#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz, then runs them.
#
#   fuzz/run.sh [SECONDS]    each fuzzer for SECONDS (default 60)
#   fuzz/run.sh --build      only build them
#
# The seeds in fuzz/corpus/NAME are only read; inputs the fuzzer finds go to
# build-fuzz/corpus/NAME. A crash leaves its input in build-fuzz/artifacts/
# and makes this script fail. Reproduce one with:
#   build-fuzz/fuzz/NAME_fuzz build-fuzz/artifacts/NAME-crash-...
set -euo pipefail
seconds="${1:-60}"
if ! [[ "$seconds" =~ ^([0-9]+|--build)$ ]]; then
  echo "usage: fuzz/run.sh [SECONDS | --build]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"
fuzzers=(safetensors data_file checkpoint)

generator=()
# Ninja where installed, as scripts/setup.sh does; a folder keeps its generator.
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ -DHEADLAB_FUZZ=ON -DHEADLAB_TESTS=OFF >/dev/null
cmake --build "$build" -j 2 --target "${fuzzers[@]/%/_fuzz}"
[[ $seconds == --build ]] && exit 0

# The fuzzers run side by side, each for SECONDS of wall time, its output in
# build-fuzz/NAME.log; a failure prints the log's tail.
pids=()
for name in "${fuzzers[@]}"; do
  mkdir -p "$build/corpus/$name" "$build/artifacts"
  "$build/fuzz/${name}_fuzz" "$build/corpus/$name" "$root/fuzz/corpus/$name" \
    -dict="$root/fuzz/$name.dict" -max_total_time="$seconds" -timeout=10 \
    -artifact_prefix="$build/artifacts/$name-" -print_final_stats=1 >"$build/$name.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!fuzzers[@]}"; do
  name=${fuzzers[$i]}
  if wait "${pids[$i]}"; then
    echo "== $name: $(grep -m1 '^Done' "$build/$name.log" || echo done) (log: build-fuzz/$name.log)"
  else
    status=1
    echo "== $name: FAILED (log: build-fuzz/$name.log)" >&2
    tail -n 40 "$build/$name.log" >&2
  fi
done
exit "$status"
