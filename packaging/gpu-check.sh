#!/usr/bin/env bash
# The whole GPU check in one go, on a machine with an NVIDIA GPU and PyTorch (docs/GPU.md):
#   0. checks its prerequisites first and says what to install (a CUDA torch, the CUDA toolkit with
#      nvcc and CUPTI, cmake and a C++ compiler, and the headers the torch wheel does not bring:
#      SQLite, Gloo, LZ4);
#   1. configures against the LibTorch bundled with the local torch (its CMake prefix path), without
#      Qt: the worker and the CLI only, with CUDA, NCCL and CUPTI;
#   2. compares every strategy on the GPU: world size 1 on NCCL, and world size 2 sharing the GPU
#      through Gloo over CUDA tensors (NCCL refuses two ranks on one device);
#   3. prints the comparison and the CUPTI statistics of every rank (kernels per step, NCCL kernels,
#      dropped records, clock uncertainty);
#   4. measures the capture overhead: capture off, then on at each --gpu-trace level, --pairs rounds (default 3),
#      medians of the step time;
#   5. runs PyTorch's own DDP and FSDP2 (benchmarks/pytorch_gpu_peer.py) and ours on the same shapes
#      (--peer-model, default Llama-3-8B cut to 2 layers, micro-batch 2, sequence 1024, world size 1),
#      fp32 and bf16, and prints ours/theirs.
# Exits non-zero on any failure. Output goes to ${OUT:-gpu-check}/ (the databases and logs).
#   packaging/gpu-check.sh [--steps N] [--model M] [--pairs P] [--peer-model M] [--peer-layers L] [--no-peer]
#                          [--stages compare,overhead,peer]   (the stages to run, in the order given; default all)
# Headers without root: on a Debian/Ubuntu machine `apt-get download libsqlite3-dev libgloo-dev
# liblz4-dev zlib1g-dev`, `dpkg -x` each into PREFIX, then SHARDSCOPE_DEPS_PREFIX=PREFIX/usr
# packaging/gpu-check.sh (a development symlink such as libsqlite3.so that points at a library the
# machine has under another version is pointed at the machine's own).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=10
MODEL=small
PAIRS=3
PEER_MODEL=llama3-8b
PEER_LAYERS=2
PEER=1
STAGES=compare,overhead,peer
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --peer-model) PEER_MODEL=$2; shift 2 ;;
    --peer-layers) PEER_LAYERS=$2; shift 2 ;;
    --no-peer) PEER=0; shift ;;
    --stages) STAGES=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$PEER" = 0 ] && STAGES=$(echo "$STAGES" | tr ',' '\n' | grep -vx peer | paste -sd, -)
for s in ${STAGES//,/ }; do
  case "$s" in compare|overhead|peer) ;; *) echo "gpu-check: unknown stage $s (compare, overhead, peer)" >&2; exit 2 ;; esac
done
OUTDIR=${OUT:-gpu-check}
mkdir -p "$OUTDIR"
BUILD=${SHARDSCOPE_GPU_BUILD_DIR:-build-gpu}
fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }

# 0. Prerequisites, all checked before anything is built; every missing one is named with its fix.
missing=()
command -v nvidia-smi >/dev/null || missing+=("nvidia-smi (the NVIDIA driver)")
command -v cmake >/dev/null || missing+=("cmake (apt install cmake, or pip install cmake)")
command -v c++ >/dev/null || missing+=("a C++ compiler (apt install g++)")
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  missing+=("nvcc: the CUDA toolkit matching torch.version.cuda (CUPTI comes with it)")
fi
python3 -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null ||
  missing+=("a CUDA build of torch for python3 (pip install torch)")
inc_dirs=(/usr/include /usr/local/include /usr/local/cuda/include)
[ -n "${SHARDSCOPE_DEPS_PREFIX:-}" ] && inc_dirs=("$SHARDSCOPE_DEPS_PREFIX/include" "${inc_dirs[@]}")
have_header() { for d in "${inc_dirs[@]}"; do [ -e "$d/$1" ] && return 0; done; return 1; }
have_header sqlite3.h || missing+=("sqlite3.h (apt install libsqlite3-dev)")
have_header gloo/allreduce.h || missing+=("Gloo's headers, which the torch wheel does not ship (apt install libgloo-dev)")
have_header lz4.h || missing+=("lz4.h (apt install liblz4-dev)")
have_header zlib.h || missing+=("zlib.h (apt install zlib1g-dev)")
have_header cupti.h || [ -e /usr/local/cuda/extras/CUPTI/include/cupti.h ] || missing+=("cupti.h (the CUDA toolkit's CUPTI)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-check: missing prerequisites:" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  echo "  (headers without root: apt-get download the -dev packages, dpkg -x them into PREFIX and set SHARDSCOPE_DEPS_PREFIX=PREFIX/usr)" >&2
  exit 1
fi
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
PREFIXES="$TORCH_PREFIX"
DEPS_FLAGS=()
if [ -n "${SHARDSCOPE_DEPS_PREFIX:-}" ]; then
  PREFIXES="$PREFIXES;$SHARDSCOPE_DEPS_PREFIX"
  # Gloo's headers are found through the include path only (no CMake package): name the prefix.
  DEPS_FLAGS=(-DCMAKE_CXX_FLAGS="-isystem $SHARDSCOPE_DEPS_PREFIX/include")
fi
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIXES" \
  -DSHARDSCOPE_BUILD_GUI=OFF -DSHARDSCOPE_BUILD_TESTS=OFF -DSHARDSCOPE_BUILD_BENCHMARKS=OFF "${CUDA_ARGS[@]}" "${DEPS_FLAGS[@]}" \
  | tee "$OUTDIR/configure.log" || fail "configure (see $OUTDIR/configure.log)"
grep -q "CUPTI from CUDA" "$OUTDIR/configure.log" || fail "the CUPTI tracer was not configured (no CUDA toolkit with CUPTI found)"
build_start=$(date +%s)
cmake --build "$BUILD" --parallel "$(nproc)" --target shardscope-cli shardscope-worker || fail "build"
echo "gpu-check: built in $(( $(date +%s) - build_start )) s on $(nproc) cores"
grep -q "SHARDSCOPE_WITH_NCCL" "$BUILD/build.ninja" 2>/dev/null || echo "gpu-check: warning: the worker was built without NCCL" >&2

CLI=$BUILD/app/shardscope-cli
DB=$OUTDIR/gpu.db
rm -f "$DB" "$DB-wal" "$DB-shm"
# 2-3. Every strategy on the GPU and the CUPTI statistics of every rank.
stage_compare() {
  ALL=ddp,zero1,zero2,zero3,fsdp,fsdp_grad_op
  echo "== world size 1, NCCL, every strategy"
  "$CLI" compare --db "$DB" --device cuda --backend nccl --world-size 1 --strategies "$ALL" --steps "$STEPS" --model "$MODEL" \
    || fail "compare on NCCL (world size 1)"
  echo "== world size 2 sharing the GPU, Gloo over CUDA tensors, every strategy"
  "$CLI" compare --db "$DB" --device cuda --backend gloo --world-size 2 --strategies "$ALL,hsdp" --steps "$STEPS" --model "$MODEL" \
    || fail "compare on one GPU with Gloo (world size 2)"

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
sys.exit(0 if ok else 1)
EOF
}

stage_overhead() {
  # 4. Capture overhead on a host-bound model (every launch traced): capture off, then on with each
  # --gpu-trace level, in rounds (the machine's drift hits all alike); medians of the step time.
  echo "== capture overhead (fsdp, world size 1, $MODEL): $PAIRS rounds of capture off / on per --gpu-trace level"
  ODB=$OUTDIR/overhead.db
  rm -f "$ODB" "$ODB-wal" "$ODB-shm"
  : > "$OUTDIR/overhead.log"
  local levels=(none launches kernels full off)
  for round in $(seq 1 "$PAIRS"); do
    # Each round starts at another level, so no level always runs first (a cold machine) or last.
    for i in $(seq 0 4); do
      level=${levels[$(( (i + round - 1) % 5 ))]}
      if [ "$level" = none ]; then flags=(--capture false); else flags=(--capture true --gpu-trace "$level"); fi
      x=$("$CLI" run --db "$ODB" --device cuda --world-size 1 --strategy fsdp --steps "$STEPS" --model "$MODEL" "${flags[@]}" --json \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_ms"])') || fail "run with ${flags[*]}"
      echo "$level $x" >> "$OUTDIR/overhead.log"
    done
  done
  python3 - "$OUTDIR/overhead.log" <<'PYEOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    level, ms = line.split()
    runs[level].append(float(ms))
base = statistics.median(runs["none"])
print(f"capture overhead (fsdp, step time, medians of {len(runs['none'])} rounds): capture off {base:.2f} ms")
names = {"launches": "on, --gpu-trace launches (default)", "kernels": "on, --gpu-trace kernels",
         "full": "on, --gpu-trace full", "off": "on, --gpu-trace off (host spans only)"}
for level in ("launches", "kernels", "full", "off"):
    m = statistics.median(runs[level])
    print(f"  {names[level]:38} {m:8.2f} ms  {100 * (m / base - 1):+6.1f}%   (" + ", ".join(f"{x:.2f}" for x in runs[level]) + ")")
PYEOF
}

stage_peer() {
  # 5. PyTorch's own DDP and FSDP2 on the same shapes, and ours, fp32 and bf16: ours/theirs. Ours runs
  # with capture off (the step time compared) and then on (the capture overhead on a GPU-bound model).
  echo "== peer: PyTorch DDP and FSDP2 vs ours ($PEER_MODEL, $PEER_LAYERS layers, micro-batch 2, seq 1024, world size 1)"
  PYTHONUNBUFFERED=1 python3 benchmarks/pytorch_gpu_peer.py --model "$PEER_MODEL" --layers "$PEER_LAYERS" --micro-batch 2 \
    --seq-len 1024 --steps "$STEPS" | tee "$OUTDIR/peer.log" || fail "the PyTorch peer (benchmarks/pytorch_gpu_peer.py)"
  PDB=$OUTDIR/peer.db
  rm -f "$PDB" "$PDB-wal" "$PDB-shm"
  : > "$OUTDIR/ours.log"
  for strategy in ddp fsdp; do
    for precision in fp32 bf16; do
      for capture in false true; do
        line=$("$CLI" run --db "$PDB" --device cuda --backend nccl --world-size 1 --strategy "$strategy" \
          --precision "$precision" --model "$PEER_MODEL" --layers "$PEER_LAYERS" --micro-batch 2 --seq-len 1024 \
          --steps "$STEPS" --capture "$capture" --json \
          | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["step_time_ms"], d.get("init_time_s", 0), d.get("peak_allocated_bytes", 0))') \
          || fail "our $strategy $precision run on the peer's shapes (capture $capture)"
        echo "ours $strategy $precision capture=$capture: $line" | tee -a "$OUTDIR/ours.log"
      done
    done
  done
  python3 - "$OUTDIR/peer.log" "$OUTDIR/ours.log" <<'PYEOF'
import re, sys
theirs = {}
for line in open(sys.argv[1]):
    m = re.match(r"pytorch (\w+) (\w+):.*step_time_ms ([\d.]+).*peak_allocated_gib ([\d.]+)", line)
    if m:
        theirs[(m.group(1), m.group(2))] = (float(m.group(3)), float(m.group(4)))
ours = {}
for line in open(sys.argv[2]):
    m = re.match(r"ours (\w+) (\w+) capture=(\w+): ([\d.]+) ([\d.]+) ([\d.e+]+)", line)
    if m:
        ours[(m.group(1), m.group(2), m.group(3))] = (float(m.group(4)), float(m.group(5)), float(m.group(6)))
print(f"{'strategy':8} {'precision':9} {'ours ms':>9} {'pytorch ms':>10} {'ours/theirs':>11} {'our init s':>10} "
      f"{'our peak GiB':>12} {'pt peak GiB':>11} {'capture on ms':>13} {'overhead':>8}")
for (strategy, precision, capture), (ms, init, peak) in ours.items():
    if capture != "false":
        continue
    t = theirs.get((strategy, precision))
    on = ours.get((strategy, precision, "true"))
    ratio = f"{ms / t[0]:.2f}" if t else "-"
    over = f"{100 * (on[0] / ms - 1):+.1f}%" if on else "-"
    print(f"{strategy:8} {precision:9} {ms:>9.1f} {(t[0] if t else float('nan')):>10.1f} {ratio:>11} {init:>10.2f} "
          f"{peak / 2**30:>12.2f} {(t[1] if t else float('nan')):>11.2f} {(on[0] if on else float('nan')):>13.1f} {over:>8}")
PYEOF
}

for s in ${STAGES//,/ }; do
  stage_start=$(date +%s)
  "stage_$s"
  echo "gpu-check: stage $s took $(( $(date +%s) - stage_start )) s"
done
echo "gpu-check: OK (databases and logs: $OUTDIR)"

