#!/usr/bin/env bash
# Simulated vs measured step time and overlap for every runtime run in a database (docs/ESTIMATOR.md,
# "Simulator accuracy"). Each run is simulated from its own compute per block (--profile-run) and its
# own collectives (the alpha-beta link fitted from them) and its own rank-to-rank compute variation
# (jitter), so what is tested is the schedule: the strategy's dependencies, prefetch rules and
# overlap, and the waiting for late ranks at every collective.
#   benchmarks/simulator_accuracy.sh [CLI] DB [DB...]
# Make the runs first, e.g.:
#   build/app/shardscope-cli compare --db acc2.db --model small --world-size 2 --steps 8 \
#     --strategies ddp,zero1,zero2,zero3,fsdp,fsdp_grad_op
set -euo pipefail
CLI=build/app/shardscope-cli
if [ $# -gt 0 ] && [ -x "$1" ] && [ ! -d "$1" ] && [[ "$1" != *.db ]]; then CLI=$1; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 [CLI] DB [DB...]" >&2; exit 2; }
printf '%-22s %4s %-13s %10s %10s %8s %9s %9s %7s\n' db run strategy measured simulated error "ovl meas" "ovl sim" jitter
for DB in "$@"; do
  ids=$("$CLI" info --db "$DB" --json | python3 -c '
import json,sys
for r in json.load(sys.stdin)["runs"]:
    if r.get("source")=="runtime" and r.get("status")=="completed": print(r["id"])')
  for id in $ids; do
    out=$("$CLI" simulate --db "$DB" --profile-run "$id" --dry-run --json 2>&1) || { echo "$DB run $id: $out" >&2; continue; }
    python3 - "$DB" "$id" "$out" <<'P'
import json,sys
db,run,out=sys.argv[1],sys.argv[2],json.loads(sys.argv[3])
m=out["profile_run"]; s=out["simulations"][0]
err=(s["step_s"]-m["step_s"])/m["step_s"]*100
print("%-22s %4s %-13s %8.1fms %8.1fms %+7.1f%% %8.1f%% %8.1f%% %6.1f%%"%(db[-22:],run,s["strategy"],m["step_s"]*1e3,s["step_s"]*1e3,err,m["overlap"]*100,s["overlap"]*100,m.get("compute_jitter",0)*100))
P
  done
done
