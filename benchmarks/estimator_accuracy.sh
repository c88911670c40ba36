#!/usr/bin/env bash
# Estimator accuracy against our runtime: runs `compare` (real ranks, Gloo on CPU) and prints, per
# strategy, the measured model-state bytes and peak (rank 0's model_state.*_bytes and
# peak_allocated_bytes, from the counting allocator) next to `estimate`'s, with the error in percent.
#   benchmarks/estimator_accuracy.sh [CLI] [MODELS] [extra run flags...]
# Defaults: build/app/shardscope-cli (it must have the `estimate` command and find shardscope-worker:
# beside it, in the build tree or through $SHARDSCOPE_WORKER), models "tiny small", strategies
# ddp,zero1,zero2,zero3,fsdp, 2 ranks, 5 steps, micro-batch 4, seq-len 128. Extra flags go to both
# the runs and the estimate (e.g. --activation-checkpointing, --micro-batch 2).
# Needs sqlite3 and python3. Exit status 1 when some peak misses by more than 10 %.
set -euo pipefail
CLI=${1:-build/app/shardscope-cli}
MODELS=${2:-"tiny small"}
shift $(( $# >= 2 ? 2 : $# )) || true
EXTRA=("$@")
STRATEGIES=${STRATEGIES:-ddp,zero1,zero2,zero3,fsdp}
WORLD=${WORLD:-2}
STEPS=${STEPS:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
status=0
for model in $MODELS; do
  DB=$TMP/$model.db
  SHARDSCOPE_NO_PROGRESS=1 "$CLI" compare --db "$DB" --model "$model" --strategies "$STRATEGIES" \
    --world-size "$WORLD" --steps "$STEPS" --micro-batch 4 --seq-len 128 "${EXTRA[@]}" >"$TMP/$model.log" 2>&1 ||
    { echo "compare failed for $model:"; tail -20 "$TMP/$model.log"; exit 2; }
  sqlite3 -separator ' ' "$DB" "select r.name, m.key, m.value from metrics m join runs r on r.id = m.run_id
      join ranks k on k.id = m.rank_id where k.rank = 0 and (m.key like 'model_state.%' or m.key = 'peak_allocated_bytes'
      or m.key like 'peak_breakdown.%') order by r.id" >"$TMP/$model.measured"
  "$CLI" estimate --model "$model" --gpus "$WORLD" --strategy "$STRATEGIES" --micro-batch 4 --seq-len 128 \
    --precision fp32 --link gloo-cpu-local --json "${EXTRA[@]}" >"$TMP/$model.estimate.json"
  python3 - "$model" "$TMP/$model.measured" "$TMP/$model.estimate.json" <<'EOF' || status=1
import json, sys
model, measured_path, est_path = sys.argv[1:4]
meas = {}
for line in open(measured_path):
    name, key, value = line.split()
    meas.setdefault(name, {})[key] = float(value)
est = {s["strategy"]: s for s in json.load(open(est_path))["strategies"]}
MiB = 1024.0 * 1024.0
def pct(e, m):
    return 100.0 * (e - m) / m if m else float("nan")
print(f"\n{model}: rank 0, MiB (error = (estimate - measured) / measured)")
print(f"  {'strategy':<9} {'states meas':>11} {'states est':>11} {'err':>7}   {'activ. meas':>11} {'activ. est':>11}"
      f" {'err':>7}   {'peak meas':>10} {'peak est':>10} {'err':>7}")
worst = 0.0
for name, m in meas.items():
    s = est.get(name)
    if s is None:
        continue
    ms = sum(m.get("model_state." + k + "_bytes", 0.0) for k in ("parameters", "gradients", "optimizer", "buffers"))
    es = s["model_state"]["model_states"]
    ma = m.get("peak_breakdown.activations", 0.0)
    ea = s["at_peak"]["activations"]
    mp = m["peak_allocated_bytes"]
    ep = s["peak_bytes"]
    worst = max(worst, abs(pct(ep, mp)))
    print(f"  {name:<9} {ms / MiB:11.3f} {es / MiB:11.3f} {pct(es, ms):+6.2f}%   {ma / MiB:11.3f} {ea / MiB:11.3f}"
          f" {pct(ea, ma):+6.2f}%   {mp / MiB:10.3f} {ep / MiB:10.3f} {pct(ep, mp):+6.2f}%")
print(f"  worst peak error {worst:.2f}% ({'within' if worst <= 10 else 'OUTSIDE'} 10%)")
sys.exit(0 if worst <= 10 else 1)
EOF
done
exit $status
