#!/usr/bin/env bash
# Installs whatever Debian packages headlab needs and are missing, then
# configures and builds. Idempotent; the build shows one progress line and
# keeps the build's full output in <build dir>/setup.log (its tail is printed if
# the build fails). Uses ccache when it is installed.
#
#   scripts/setup.sh              Release build of the headlab program in build/
#   scripts/setup.sh --all        Release build of everything (tests too) in build/
#   scripts/setup.sh --sanitize   ASan + UBSan build of everything in build-san/
#   scripts/setup.sh --python     also the Python package, into build/python
#                                 (PYTHONPATH=build/python /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
cmake_args=()
# The main job runs only the program; the test command builds the rest.
targets=(--target headlab)
python=0
for arg in "$@"; do
  case "$arg" in
    --all) targets=() ;;
    --python) python=1 ;;
    --sanitize) build_dir=build-san; cmake_args+=(-DHEADLAB_SANITIZE=ON); targets=() ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

scripts/install_packages.sh g++ cmake make ninja-build libopenblas-openmp-dev libdnnl-dev libgtest-dev libspdlog-dev \
  libcli11-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin
if ((python)); then
  # Debian's interpreter, its headers and numpy: the module is built for /usr/bin/python3.
  scripts/install_packages.sh pybind11-dev python3-dev python3-numpy
  # Turned on in an existing build folder too; it stays on there.
  cmake_args+=(-DHEADLAB_PYTHON=ON)
  ((${#targets[@]})) && targets+=(--target headlab_python)
fi

mkdir -p "$build_dir"
log="$build_dir/setup.log"
: >"$log"

# Prints the log's path and tail, then fails.
fail() {
  echo "setup.sh: $1 failed; full log: $log" >&2
  tail -n 30 "$log" >&2
  exit 1
}

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null; then
    cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  # Ninja rather than make: it starts a library's files as soon as the headers
  # they include exist, not after the libraries it links are built, so both
  # cores stay busy (a fresh Release build took 389 s against make's 435 on
  # a 2-core AMD EPYC). A folder configured earlier keeps its generator.
  cmake -S . -B "$build_dir" -G Ninja "${cmake_args[@]}" >>"$log" 2>&1 || fail "configuring"
elif ((python)) && ! grep -q '^HEADLAB_PYTHON:BOOL=ON' "$build_dir/CMakeCache.txt"; then
  cmake -S . -B "$build_dir" -DHEADLAB_PYTHON=ON >>"$log" 2>&1 || fail "configuring"
fi

# Reads the build's output, appends it to the log and shows its "[ xx%]" progress:
# one line redrawn in place on a terminal, else a line every 10 percent.
progress() {
  local line pct shown=-10 tty=0
  [ -t 2 ] && tty=1
  ((tty)) || echo "setup.sh: building in $build_dir/ (log: $log)" >&2
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    [[ "$line" =~ ^\[\ *([0-9]+)%\] ]] || continue
    pct=${BASH_REMATCH[1]}
    if ((tty)); then
      printf '\rsetup.sh: building in %s/ %3d%% (log: %s)' "$build_dir" "$pct" "$log" >&2
    elif ((pct / 10 > shown / 10)); then
      echo "setup.sh: $pct%" >&2
    fi
    shown=$pct
  done
  ((tty)) && printf '\n' >&2
  return 0
}

# NINJA_STATUS: ninja's progress in make's form.
NINJA_STATUS="[%p] " cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" 2>&1 | progress || fail "the build"
