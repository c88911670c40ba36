#!/usr/bin/env bash
# The whole GPU check in one go, on a machine with an NVIDIA GPU and PyTorch (docs/GPU.md):
#   1. configure against the LibTorch bundled with the local torch (its CMake prefix path), without
#      Qt: the worker and the CLI only, with CUDA, NCCL and CUPTI;
#   2. compare every strategy on the GPU: world size 1 on NCCL, and world size 2 sharing the GPU
#      through Gloo over CUDA tensors (NCCL refuses two ranks on one device);
#   3. print the comparison and the CUPTI statistics of every rank (kernels per step, NCCL kernels,
#      dropped records, clock uncertainty) and the capture overhead (capture on vs off).
# Exits non-zero on any failure. Output goes to ${OUT:-gpu-check}/ (the database and a log).
#   packaging/gpu-check.sh [--steps N] [--model M]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=10
MODEL=small
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
OUTDIR=${OUT:-gpu-check}
mkdir -p "$OUTDIR"
BUILD=${SHARDSCOPE_GPU_BUILD_DIR:-build-gpu}
fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: no NVIDIA driver on this machine"
nvidia-smi -L || fail "nvidia-smi cannot list the GPUs"
command -v python3 >/dev/null || fail "python3 not found (the LibTorch comes from the local torch)"
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') || fail "python3 cannot import torch"
python3 - <<'EOF' || fail "torch sees no CUDA device"
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
assert torch.cuda.is_available()
EOF

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# The CUDA toolkit the torch wheel was built for: nvcc on PATH, or /usr/local/cuda.
CUDA_ARGS=()
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then CUDA_ARGS=(-DCUDAToolkit_ROOT=/usr/local/cuda); fi
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DSHARDSCOPE_BUILD_GUI=OFF -DSHARDSCOPE_BUILD_TESTS=OFF -DSHARDSCOPE_BUILD_BENCHMARKS=OFF "${CUDA_ARGS[@]}" \
  | tee "$OUTDIR/configure.log" || fail "configure (see $OUTDIR/configure.log)"
grep -q "CUPTI from CUDA" "$OUTDIR/configure.log" || fail "the CUPTI tracer was not configured (no CUDA toolkit with CUPTI found)"
cmake --build "$BUILD" --parallel "$(nproc)" --target shardscope-cli shardscope-worker || fail "build"
grep -q "SHARDSCOPE_WITH_NCCL" "$BUILD/build.ninja" 2>/dev/null || echo "gpu-check: warning: the worker was built without NCCL" >&2

CLI=$BUILD/app/shardscope-cli
DB=$OUTDIR/gpu.db
rm -f "$DB" "$DB-wal" "$DB-shm"
ALL=ddp,zero1,zero2,zero3,fsdp,fsdp_grad_op
echo "== world size 1, NCCL, every strategy"
"$CLI" compare --db "$DB" --device cuda --backend nccl --world-size 1 --strategies "$ALL" --steps "$STEPS" --model "$MODEL" \
  || fail "compare on NCCL (world size 1)"
echo "== world size 2 sharing the GPU, Gloo over CUDA tensors, every strategy"
"$CLI" compare --db "$DB" --device cuda --backend gloo --world-size 2 --strategies "$ALL,hsdp" --steps "$STEPS" --model "$MODEL" \
  || fail "compare on one GPU with Gloo (world size 2)"
echo "== capture overhead (fsdp, world size 1): capture off, then on"
"$CLI" run --db "$DB" --device cuda --world-size 1 --strategy fsdp --steps "$STEPS" --model "$MODEL" --capture false \
  || fail "run without capture"
"$CLI" run --db "$DB" --device cuda --world-size 1 --strategy fsdp --steps "$STEPS" --model "$MODEL" || fail "run with capture"

python3 - "$DB" "$STEPS" <<'EOF' || fail "the CUPTI statistics are missing or show a broken capture"
import sqlite3, sys
db, steps = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
runs = c.execute("SELECT id, name, strategy, world_size, status FROM runs ORDER BY id").fetchall()
ok = True
print(f"{'run':>4} {'name':28} {'ws':>3} {'status':10} {'kernels/step':>12} {'nccl':>6} {'lost':>6} {'clock±ns':>9} {'tokens/s':>10}")
for rid, name, strat, ws, status in runs:
    def m(key, rank=None):
        if rank is None:
            r = c.execute("SELECT value FROM metrics WHERE run_id=? AND rank_id IS NULL AND key=?", (rid, key)).fetchone()
        else:
            r = c.execute("SELECT value FROM metrics WHERE run_id=? AND rank_id=? AND key=?", (rid, rank, key)).fetchone()
        return r[0] if r else None
    for (rank_id, rank) in c.execute("SELECT id, rank FROM ranks WHERE run_id=? ORDER BY rank", (rid,)).fetchall():
        k = m("cupti.kernels", rank_id)
        n = m("cupti.nccl_kernels", rank_id)
        lost = m("cupti.lost_records", rank_id)
        clk = m("cupti.clock_uncertainty_ns", rank_id)
        tps = m("tokens_per_s")
        print(f"{rid:>4} {name[:28]:28} {ws:>3} {status:10} {(k or 0)/steps:>12.1f} {int(n or 0):>6} {int(lost or 0):>6} "
              f"{(clk or 0):>9.0f} {(tps or 0):>10.0f}  rank {rank}")
        if status != "completed":
            ok = False
        if k is not None and k <= 0:
            ok = False
nccl_runs = c.execute("SELECT COUNT(*) FROM metrics WHERE key='cupti.nccl_kernels' AND value > 0").fetchone()[0]
print(f"ranks with NCCL kernels captured: {nccl_runs}")
gpu_lanes = c.execute("SELECT COUNT(*) FROM tracks WHERE kind='gpu_stream'").fetchone()[0]
print(f"GPU stream lanes stored: {gpu_lanes}")
if gpu_lanes == 0:
    ok = False
# Capture overhead: the last two runs (off, on).
last = c.execute("SELECT id FROM runs ORDER BY id DESC LIMIT 2").fetchall()
if len(last) == 2:
    on, off = last[0][0], last[1][0]
    st = lambda r: c.execute("SELECT value FROM metrics WHERE run_id=? AND rank_id IS NULL AND key='step_time_ms'", (r,)).fetchone()
    a, b = st(off), st(on)
    if a and b:
        print(f"capture overhead (fsdp, step time): off {a[0]:.2f} ms, on {b[0]:.2f} ms, {100*(b[0]/a[0]-1):+.1f}%")
sys.exit(0 if ok else 1)
EOF
echo "gpu-check: OK (database: $DB)"
