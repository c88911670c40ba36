#!/usr/bin/env bash
# Configures and builds Shardscope into ${SHARDSCOPE_BUILD_DIR:-build} (Release with debug info, Ninja,
# ccache when present). Extra CMake arguments are passed through. SHARDSCOPE_WERROR=1 in the
# environment turns warnings into errors (CI sets it: the build is warning-free with GCC 12; a
# user's newer compiler may find new ones, which should not stop a user's build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SHARDSCOPE_BUILD_DIR:-build}
if [ "${SHARDSCOPE_WERROR:-0}" = 1 ]; then set -- "$@" -DSHARDSCOPE_WERROR=ON; fi
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" "$@"
fi
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
