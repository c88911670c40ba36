#!/usr/bin/env bash
# Our DDP (shardscope-cli run --strategy ddp, Gloo on CPU) against PyTorch's own DDP on the same
# model, data, batch and world size (benchmarks/pytorch_ddp_reference.py): issue 4's throughput
# item, target ratio >= 1.0. Builds nothing.
#
#   benchmarks/ddp_vs_pytorch.sh [--cli PATH] [--model small] [--world-size 2] [--micro-batch 4]
#                                [--seq-len 128] [--steps 20] [--reps 3] [--python PYTHON]
#
# --cli defaults to build-rt/app/shardscope-cli of this checkout (the worker is found beside it).
# Runs ours and theirs alternately, --reps times each; prints one line per measurement and finally
#   ddp tokens/s: shardscope 4600 (median) vs pytorch 4300 (median): ratio 1.07
# Both sides: steady state = mean step time of rank 0 without the first step; each rank gets
# cores/world intra-op threads (our launcher's OMP_NUM_THREADS/OPENBLAS_NUM_THREADS; the reference
# sets the same). Exits non-zero when any run fails. The machine's noise matters: use --reps >= 3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cli="$here/../build-rt/app/shardscope-cli"
model=small world=2 mb=4 seq=128 steps=20 reps=3
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  # Debian's python3-torch lives in /usr/bin/python3 (a pyenv/venv python3 first on PATH may lack it).
  if [[ -x /usr/bin/python3 ]]; then python=/usr/bin/python3; else python=python3; fi
fi

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cli) cli="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --world-size) world="$2"; shift 2 ;;
    --micro-batch) mb="$2"; shift 2 ;;
    --seq-len) seq="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "ddp_vs_pytorch.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

for n in "$world" "$mb" "$seq" "$steps" "$reps"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "ddp_vs_pytorch.sh: '$n' is not a positive integer" >&2; exit 2; }
done
(( steps >= 2 )) || { echo "ddp_vs_pytorch.sh: --steps must be at least 2 (the first step is left out)" >&2; exit 2; }
[[ -x "$cli" ]] || { echo "ddp_vs_pytorch.sh: $cli is not an executable (build shardscope-cli and shardscope-worker first)" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "ddp_vs_pytorch.sh: sqlite3 is needed to read the run's metrics" >&2; exit 1; }
"$python" -c 'import torch, torch.distributed; assert torch.distributed.is_available()' 2>/dev/null ||
  { echo "ddp_vs_pytorch.sh: $python cannot import torch.distributed (apt-get install python3-torch)" >&2; exit 1; }

tmp="$(mktemp -d /tmp/ddp_vs_pytorch.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

echo "model $model, world size $world, micro batch $mb, seq len $seq, $steps steps, $reps repetitions each; $cli vs $python"
ours=() theirs=()
for ((i = 1; i <= reps; ++i)); do
  db="$tmp/ours$i.db"
  if ! "$cli" run --strategy ddp --world-size "$world" --steps "$steps" --model "$model" --micro-batch "$mb" \
      --seq-len "$seq" --db "$db" >"$tmp/ours$i.log" 2>&1; then
    echo "ddp_vs_pytorch.sh: shardscope run $i failed:" >&2
    tail -n 20 "$tmp/ours$i.log" >&2
    exit 1
  fi
  tps="$(sqlite3 "$db" "select value from metrics where rank_id is null and key='tokens_per_s'")"
  ms="$(sqlite3 "$db" "select value from metrics where rank_id is null and key='step_time_ms'")"
  [[ -n "$tps" && -n "$ms" ]] || { echo "ddp_vs_pytorch.sh: run $i stored no tokens_per_s/step_time_ms" >&2; exit 1; }
  printf 'shardscope run %d: step_time_ms %.1f tokens/s %.0f\n' "$i" "$ms" "$tps"
  ours+=("$tps")

  if ! "$python" "$here/pytorch_ddp_reference.py" --model "$model" --world-size "$world" --micro-batch "$mb" \
      --seq-len "$seq" --steps "$steps" >"$tmp/theirs$i.log" 2>&1; then
    echo "ddp_vs_pytorch.sh: pytorch run $i failed:" >&2
    tail -n 20 "$tmp/theirs$i.log" >&2
    exit 1
  fi
  line="$(grep '^pytorch ddp:' "$tmp/theirs$i.log" | tail -n 1)"
  tps="$(sed -n 's/.*tokens_per_s \([0-9.]*\).*/\1/p' <<<"$line")"
  ms="$(sed -n 's/.*step_time_ms \([0-9.]*\).*/\1/p' <<<"$line")"
  [[ -n "$tps" && -n "$ms" ]] || { echo "ddp_vs_pytorch.sh: pytorch run $i printed no figures" >&2; cat "$tmp/theirs$i.log" >&2; exit 1; }
  printf 'pytorch    run %d: step_time_ms %.1f tokens/s %.0f\n' "$i" "$ms" "$tps"
  theirs+=("$tps")
done

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mo="$(median "${ours[@]}")"
mt="$(median "${theirs[@]}")"
awk -v o="$mo" -v t="$mt" 'BEGIN { printf "ddp tokens/s: shardscope %.0f (median) vs pytorch %.0f (median): ratio %.2f\n", o, t, o / t }'
