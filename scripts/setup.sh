#!/usr/bin/env bash
# Installs whatever Debian packages headlab needs and are missing, then
# configures and builds. Idempotent, and quiet when everything is present.
#
#   scripts/setup.sh              Release build in build/
#   scripts/setup.sh --sanitize   ASan + UBSan build in build-san/
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
cmake_args=()
for arg in "$@"; do
  case "$arg" in
    --sanitize) build_dir=build-san; cmake_args+=(-DHEADLAB_SANITIZE=ON) ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

packages=(g++ cmake make libopenblas-openmp-dev libdnnl-dev libgtest-dev libspdlog-dev libcli11-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" "${cmake_args[@]}" >/dev/null
fi
echo "setup.sh: building in $build_dir/" >&2
cmake --build "$build_dir" -j "$(nproc)"
