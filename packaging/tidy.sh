#!/usr/bin/env bash
# clang-tidy (.clang-tidy: bugprone, performance, concurrency) over core/, or over the files given.
#   packaging/tidy.sh [--build DIR] [FILE...]   # default: every core/**/*.cpp, build dir `build`
# Needs compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS is on). Exits non-zero on any finding.
# core/ is the CTest `tidy` (no Qt, no LibTorch: fast enough for every CI run); profiler/, ui/ and
# app/ are checked on demand (`packaging/tidy.sh $(git ls-files 'ui/*.cpp')`).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ "${1:-}" = --build ]; then build=$2; shift 2; fi
tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
[ -n "$tidy" ] || { echo "tidy: clang-tidy is not installed (packaging/install-deps.sh)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || { echo "tidy: $build/compile_commands.json is missing: configure first" >&2; exit 2; }
if [ $# -gt 0 ]; then
  files=("$@")
elif git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files 'core/*.cpp')
else
  mapfile -t files < <(find core -name '*.cpp' | sort)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet >"$log" 2>/dev/null || true
if grep -E '(warning|error): .*\[[a-z-]+.*\]$' "$log" | sort -u >"$log.found" && [ -s "$log.found" ]; then
  cat "$log.found"
  echo "tidy: $(wc -l <"$log.found") finding(s) in ${#files[@]} files" >&2
  rm -f "$log.found"
  exit 1
fi
rm -f "$log.found"
echo "tidy: ${#files[@]} files clean"
