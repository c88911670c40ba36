#!/usr/bin/env bash
# Formats the C++ sources with the repository's .clang-format (Debian 12's clang-format 14).
#   packaging/format.sh           reformat every tracked .cpp/.h in place
#   packaging/format.sh --check   change nothing; list the files that differ and exit 1 if any
#                                 (the CTest `format`; exit 77 = skipped when clang-format is missing)
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format}
if ! command -v "$CF" >/dev/null 2>&1; then
  echo "format: $CF not found (packaging/install-deps.sh installs clang-format)"
  exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h')
else
  mapfile -t files < <(find app benchmarks core profiler tests ui \( -name '*.cpp' -o -name '*.h' \) | sort)
fi
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$CF" --dry-run -Werror "$f" >/dev/null 2>&1; then
      echo "not formatted: $f (packaging/format.sh fixes it)"
      bad=1
    fi
  done
  [ "$bad" = 0 ] && echo "format: ${#files[@]} files match .clang-format"
  exit "$bad"
fi
"$CF" -i "${files[@]}"
echo "format: ${#files[@]} files formatted"
