#!/usr/bin/env bash
# Quick start, step 2: install what is needed, build everything, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/install-deps.sh
packaging/build.sh
BUILD_DIR=${SHARDSCOPE_BUILD_DIR:-build}
QT_QPA_PLATFORM=offscreen ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" "$@"
# The core and CLI suites again under ASan + UBSan (SHARDSCOPE_SANITIZERS=0 skips it).
if [ "${SHARDSCOPE_SANITIZERS:-1}" != 0 ] && [ $# -eq 0 ]; then
  packaging/run-sanitizers.sh
fi
