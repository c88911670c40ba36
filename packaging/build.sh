#!/usr/bin/env bash
# Configures and builds Shardscope into ${SHARDSCOPE_BUILD_DIR:-build} (Release with debug info, Ninja,
# ccache when present). Extra CMake arguments are passed through.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SHARDSCOPE_BUILD_DIR:-build}
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" "$@"
fi
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
