#!/usr/bin/env bash
# import_scale.sh: how import and analysis grow with the number of ranks (the curve, not one point).
#
#   benchmarks/import_scale.sh [--build DIR] [--ranks "8 64 256"] [--events N] [--keep] [--dir DIR]
#
# For each rank count R: generates R gzipped Kineto traces of one job (shardscope-gen-kineto --events N
# --rank r --world R, all cores), imports them with `shardscope-cli import` into a fresh database and
# runs `shardscope-cli analyze --json` on it, each under /usr/bin/time. Prints one line per R: stored
# events, JSON and gzip MB, import wall and CPU seconds, events/s and MB/s of JSON, peak RSS, database
# size, analyze wall seconds and peak RSS. The load average is printed before each import: wall times
# are only meaningful on an idle machine (CPU seconds are, mostly, either way).
# Defaults: 8, 64 and 256 ranks of 250k traceEvents each (256 ranks: 1.4 GB of gzip, 18 GB of JSON,
# about 5 GB of database on disk; generating them takes minutes). --events 60k for a quick curve.
# Inputs go to a temporary directory (or --dir), removed at the end unless --keep.
set -euo pipefail

build=build
ranksList="8 64 256"
events=250k
keep=0
dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ranks) ranksList=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --dir) dir=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "import_scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

cli=$build/app/shardscope-cli
gen=$build/tests/shardscope-gen-kineto
for exe in "$cli" "$gen"; do
  [ -x "$exe" ] || { echo "import_scale.sh: $exe not built (cmake --build $build --target shardscope-cli shardscope-gen-kineto)" >&2; exit 2; }
done
cli=$(realpath "$cli")
gen=$(realpath "$gen")
[ -x /usr/bin/time ] || { echo "import_scale.sh: needs /usr/bin/time (Debian package 'time')" >&2; exit 2; }

if [ -z "$dir" ]; then
  dir=$(mktemp -d "${TMPDIR:-/tmp}/shardscope_import_scale.XXXXXX")
else
  mkdir -p "$dir"
fi
cleanup() { [ "$keep" = 1 ] || rm -rf "$dir"; }
trap cleanup EXIT

cores=$(nproc)
echo "import_scale: $cores cores, $events traceEvents per rank, files in $dir"
echo "import_scale: $(uname -srm); $("$cli" --version 2>/dev/null | head -1 || true)"
printf '%-6s %10s %9s %8s %9s %9s %12s %10s %9s %9s %10s %9s\n' ranks events "json MB" "gz MB" "import s" "cpu s" "events/s" "MB/s json" "RSS MB" "db MB" "analyze s" "an. RSS"

for ranks in $ranksList; do
  traces=$dir/r$ranks
  mkdir -p "$traces"
  seq 0 $((ranks - 1)) | xargs -P "$cores" -I{} "$gen" --events "$events" --rank {} --world "$ranks" -o "$traces/rank{}.json.gz" >/dev/null
  gzMb=$(du -cb "$traces"/*.json.gz | tail -1 | awk '{printf "%.0f", $1 / 1e6}')
  # gzip -l's uncompressed size is modulo 4 GiB per file: fine for one rank's trace.
  jsonMb=$(gzip -l "$traces"/*.json.gz | tail -1 | awk '{printf "%.0f", $2 / 1e6}')
  db=$dir/r$ranks.db
  rm -f "$db" "$db-wal" "$db-shm"
  sync
  sleep 1
  echo "  load before $ranks ranks: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" "$cli" import --db "$db" "$traces" >"$dir/import.txt"
  read -r wall user sys rssKb <"$dir/time.txt"
  stored=$(sed -n 's/.*: \([0-9]*\) events in .*/\1/p' "$dir/import.txt" | tail -1)
  /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$cli" analyze --db "$db" --json >/dev/null
  read -r aWall aRssKb <"$dir/time.txt"
  dbMb=$(du -cb "$db"* | tail -1 | awk '{printf "%.0f", $1 / 1e6}')
  awk -v r="$ranks" -v ev="$stored" -v j="$jsonMb" -v g="$gzMb" -v w="$wall" -v u="$user" -v s="$sys" -v rss="$rssKb" \
    -v db="$dbMb" -v aw="$aWall" -v arss="$aRssKb" 'BEGIN {
      printf "%-6d %10d %9d %8d %9.2f %9.2f %12.0f %10.0f %9.0f %9d %10.2f %9.0f\n",
             r, ev, j, g, w, u + s, ev / w, j / w, rss / 1024, db, aw, arss / 1024 }'
  [ "$keep" = 1 ] || rm -rf "$traces" "$db" "$db-wal" "$db-shm"
done
