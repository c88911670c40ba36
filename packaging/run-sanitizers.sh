#!/usr/bin/env bash
# The core and CLI test suites under AddressSanitizer + UndefinedBehaviorSanitizer (CMakePresets.json
# "asan": a Debug build in build-asan), plus the fuzz corpora. Run by packaging/run-tests.sh after the
# main suite; alone after packaging/install-deps.sh. A sanitizer report fails the test that caused it
# (UBSan halts on the first error; leak detection is off: LibTorch and Qt keep process-lifetime
# allocations).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan >/dev/null
mapfile -t tests < <(ls tests/core/tst_*.cpp tests/app/tst_*.cpp | xargs -n1 basename | sed 's/\.cpp$//')
cmake --build build-asan --parallel "$(nproc)" --target "${tests[@]}" shardscope-cli shardscope-gen-kineto \
  fuzz_kineto_regress fuzz_run_config_regress fuzz_event_chunk_regress fuzz_memsnap_regress
regex="^($(IFS='|'; echo "${tests[*]}"))\$|^fuzz_"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
QT_QPA_PLATFORM=offscreen ctest --test-dir build-asan --output-on-failure --parallel "$(nproc)" -R "$regex" "$@"
