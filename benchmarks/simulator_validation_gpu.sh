#!/usr/bin/env bash
# The simulator validation on a GPU machine (docs/ESTIMATOR.md, "On a GPU"): builds the worker and
# the CLI against the local torch's LibTorch (packaging/gpu-check.sh, no Qt), runs the validation grid
# on CUDA (ranks beyond the GPUs share them through Gloo), and leaves the database and the table in
# OUT (default gpu-validation/), the database also compressed for carrying back (xz, 15 MB pieces).
#   benchmarks/simulator_validation_gpu.sh [--repeats N] [--budget SECONDS] [--new-knobs]
# --budget bounds the whole script: the grid gets what the build left (the database keeps the runs
# finished by then, which `simulator_validation.py --reuse` re-predicts anywhere). Headers the torch
# wheel lacks (SQLite, Gloo, LZ4, zlib): see packaging/gpu-check.sh (SHARDSCOPE_DEPS_PREFIX).
set -uo pipefail
cd "$(dirname "$0")/.."
REPEATS=2
BUDGET=560
NEW_KNOBS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) REPEATS=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --new-knobs) NEW_KNOBS=(--new-knobs); shift ;;
    *) echo "simulator_validation_gpu: unknown argument $1" >&2; exit 2 ;;
  esac
done
OUTDIR=${OUT:-gpu-validation}
mkdir -p "$OUTDIR"
T0=$(date +%s)
OUT=$OUTDIR packaging/gpu-check.sh --stages "" > "$OUTDIR/build.log" 2>&1 || { tail -40 "$OUTDIR/build.log"; exit 1; }
grep "built in" "$OUTDIR/build.log"
LEFT=$(( BUDGET - ($(date +%s) - T0) - 25 ))
[ "$LEFT" -gt 30 ] || { echo "simulator_validation_gpu: no time left for the grid after the build" >&2; exit 1; }
echo "grid: $LEFT s at most"
DB=/tmp/simulator-validation-gpu.db
rm -f "$DB" "$DB-wal" "$DB-shm"
PYTHONUNBUFFERED=1 timeout "$LEFT" python3 benchmarks/simulator_validation.py --cli "${SHARDSCOPE_GPU_BUILD_DIR:-build-gpu}/app/shardscope-cli" \
  --device cuda --repeats "$REPEATS" "${NEW_KNOBS[@]}" --db "$DB" --json "$OUTDIR/validation.json" > "$OUTDIR/validation.txt" 2> "$OUTDIR/validation.err"
RC=$?
pkill -f shardscope-worker 2>/dev/null
echo "grid exit $RC after $(( $(date +%s) - T0 )) s"
awk '/^class +predictions/{p=1} p && NF' "$OUTDIR/validation.txt"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); print('runs stored, completed:', c.execute('select count(*), sum(status=\"completed\") from runs').fetchone())" "$DB"
cp "$DB" "$OUTDIR/validation.db" 2>/dev/null
xz -T0 -4 -c "$DB" > /tmp/simulator-validation-gpu.db.xz && split -b 15M /tmp/simulator-validation-gpu.db.xz "$OUTDIR/validation.db.xz."
echo "total $(( $(date +%s) - T0 )) s"
exit $RC
