#!/usr/bin/env bash
# Quick start, step 1: install what is needed, build, and run the main job: DDP vs FSDP vs ZeRO-3
# trained for real (2 Gloo ranks on CPU, the `small` model) into demo.db with the comparison and
# analysis summary; then import the development traces from ../shared/traces (or a generated trace
# when they are absent) and analyse every run.
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/install-deps.sh
packaging/build.sh
BUILD_DIR=${SHARDSCOPE_BUILD_DIR:-build}
CLI="$BUILD_DIR/app/shardscope-cli"
DB=${SHARDSCOPE_DEMO_DB:-demo.db}
rm -f "$DB" "$DB-wal" "$DB-shm"

echo "== main job: shardscope-cli compare (ddp, fsdp, zero3; small model; 2 ranks on CPU)"
"$CLI" compare --db "$DB"
echo

SHARED=../shared/traces/kineto
if [ -d "$SHARED" ]; then
  echo "== importing the development traces from $SHARED"
  # Single-rank files from different jobs: one run each.
  for f in "$SHARED"/*.json.gz "$SHARED"/hta_trace_diff/*.json.gz; do
    [ -f "$f" ] || continue
    "$CLI" import --db "$DB" "$f"
  done
else
  echo "== ../shared/traces not found: generating a 4-rank synthetic trace"
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  for r in 0 1 2 3; do
    "$BUILD_DIR/tests/shardscope-gen-kineto" --events 200000 --rank $r --world 4 --seed 7 -o "$TMP/rank$r.pt.trace.json.gz" >/dev/null
  done
  "$CLI" import --db "$DB" --name "synthetic 4-rank job" "$TMP"
fi
echo
"$CLI" info --db "$DB"
echo
"$CLI" analyze --db "$DB" --all-runs
