#!/usr/bin/env bash
# Fine-tuning on a GPU (docs/RUNTIME.md, "LoRA" and "fp16"): run where packaging/gpu-check.sh built the
# CLI (build-gpu/), on a machine with one NVIDIA GPU and torch.
#  1. fp16 with dynamic loss scaling: ours under GradScaler's rule (--hysteresis 1
#     --loss-scale-window 2000) against PyTorch's DDP with torch.autocast(float16) + GradScaler, on the
#     same shapes (Llama-3-8B cut to 2 layers, micro-batch 2, sequence 1024, world size 1, NCCL): step
#     time, skipped steps, final scale; and bf16 of both for reference.
#  2. LoRA r=8 under DDP, ZeRO-3 and FSDP on the same shapes (bf16, world size 1, NCCL), and full
#     fine-tuning under DDP: step time, tokens/s, peak memory, trainable parameters.
#  3. LoRA across ranks: `small`, two ranks sharing the GPU through Gloo over CUDA tensors, bf16
#     (the frozen base gathered as bf16 bits): the runs complete with equal losses.
#   benchmarks/gpu_finetune.sh [--cli build-gpu/app/shardscope-cli] [--steps N]
# Output under ${OUT:-gpu-finetune}/: the database and one summary table on stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
CLI=build-gpu/app/shardscope-cli
STEPS=13
while [ $# -gt 0 ]; do
  case "$1" in
    --cli) CLI=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    *) echo "gpu_finetune: unknown argument $1" >&2; exit 2 ;;
  esac
done
OUTDIR=${OUT:-gpu-finetune}
mkdir -p "$OUTDIR"
DB=$OUTDIR/finetune.db
rm -f "$DB" "$DB"-wal "$DB"-shm
SHAPE=(--model llama3-8b --layers 2 --micro-batch 2 --seq-len 1024 --device cuda --world-size 1 --link-probe false)
fail=0
run() {
  local name=$1; shift
  echo "== $name" >&2
  if ! "$CLI" run --db "$DB" --name "$name" "$@" >"$OUTDIR/${name// /_}.log" 2>&1; then
    echo "gpu_finetune: $name failed:" >&2
    tail -5 "$OUTDIR/${name// /_}.log" >&2
    fail=1
  fi
}
run "ours fp16 ddp" "${SHAPE[@]}" --strategy ddp --steps "$STEPS" --precision fp16 --hysteresis 1 --loss-scale-window 2000
# From 2^30 the scale must back off: skipped steps on both sides.
run "ours fp16 2^30" "${SHAPE[@]}" --strategy ddp --steps "$STEPS" --precision fp16 --hysteresis 1 --loss-scale-window 2000 \
  --initial-scale-power 30
run "ours bf16 ddp" "${SHAPE[@]}" --strategy ddp --steps "$STEPS" --precision bf16
python3 benchmarks/pytorch_gpu_peer.py --model llama3-8b --layers 2 --micro-batch 2 --seq-len 1024 --strategies ddp \
  --precisions fp16,bf16 --steps $((STEPS - 3)) --warmup 3 2>&1 | grep '^pytorch' | tee "$OUTDIR/peer.txt" || fail=1
python3 benchmarks/pytorch_gpu_peer.py --model llama3-8b --layers 2 --micro-batch 2 --seq-len 1024 --strategies ddp \
  --precisions fp16 --init-scale-power 30 --steps $((STEPS - 3)) --warmup 3 2>&1 | grep '^pytorch' | sed 's/fp16/fp16 2^30/' |
  tee -a "$OUTDIR/peer.txt" || fail=1
for s in ddp zero3 fsdp; do
  run "lora $s" "${SHAPE[@]}" --strategy "$s" --steps 6 --precision bf16 --lora-rank 8 --lora-alpha 16
done
run "full ddp" "${SHAPE[@]}" --strategy ddp --steps 6 --precision bf16
for s in ddp zero3 fsdp; do
  run "lora2 $s" --model small --device cuda --world-size 2 --strategy "$s" --steps 6 --precision bf16 --lora-rank 8 \
    --dump-losses "$OUTDIR/lora2_$s.loss"
done
python3 - "$DB" "$OUTDIR" <<'EOF'
import sqlite3, sys, glob
db = sqlite3.connect(sys.argv[1])
def metric(run, key):
    r = db.execute("select value from metrics where run_id=? and rank_id is null and key=?", (run, key)).fetchone()
    return r[0] if r else None
print(f"{'run':<16} {'status':<10} {'step ms':>9} {'tokens/s':>9} {'peak GiB':>9} {'trainable':>14} {'skipped':>7}  loss scale per step")
for rid, name, status in db.execute("select id, name, status from runs order by id"):
    peak = db.execute("select max(value) from metrics where run_id=? and key='peak_allocated_bytes'", (rid,)).fetchone()[0]
    scales = [v for _, v in sorted(db.execute(
        "select cast(substr(key, 17) as integer), value from metrics where run_id=? and rank_id is not null and key like 'loss_scale/step/%' "
        "and rank_id=(select min(rank_id) from metrics where run_id=?)", (rid, rid)).fetchall())]
    f = lambda v, fmt: (fmt % v) if v is not None else "n/a"
    print(f"{name:<16} {status:<10} {f(metric(rid, 'step_time_ms'), '%9.1f')} {f(metric(rid, 'tokens_per_s'), '%9.0f')} "
          f"{f(peak / 2**30 if peak else None, '%9.2f')} {f(metric(rid, 'trainable_params'), '%14.0f')} "
          f"{f(metric(rid, 'skipped_steps'), '%7.0f')}  {' '.join('%g' % s for s in scales)}")
losses = {}
for s in ("ddp", "zero3", "fsdp"):
    per_rank = [list(map(float, open(p).read().split())) for p in sorted(glob.glob(f"{sys.argv[2]}/lora2_{s}.loss.rank*"))]
    if per_rank:
        losses[s] = [sum(x) / len(x) for x in zip(*per_rank)]
if losses:
    base = next(iter(losses.values()))
    for s, l in losses.items():
        print(f"lora2 {s}: losses {' '.join('%.5f' % x for x in l)}; max |diff| vs {next(iter(losses))} "
              f"{max(abs(a - b) for a, b in zip(l, base)):.2e}")
EOF
exit $fail
