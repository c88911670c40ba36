#!/usr/bin/env bash
# Capture overhead of the runtime: steady-state step time with capture on vs off, same run otherwise.
#   benchmarks/capture_overhead.sh [CLI] [REPS] [extra run flags...]
# Defaults: build/app/shardscope-cli, 5 alternating repetitions, fsdp on the small model, 2 ranks,
# 20 steps. Prints each measurement, the medians and the overhead in percent (target <= 3 %), for
# the wall-clock step time and for the CPU time of the whole run (user + system of every rank: far
# less sensitive to other load on the machine than wall time).
set -euo pipefail
CLI=${1:-build/app/shardscope-cli}
REPS=${2:-5}
shift $(( $# >= 2 ? 2 : $# )) || true
EXTRA=("$@")
[ ${#EXTRA[@]} -eq 0 ] && EXTRA=(--strategy fsdp --model small --world-size 2 --steps 20)
DB=$(mktemp -d)/overhead.db
trap 'rm -rf "$(dirname "$DB")"' EXIT
declare -a ON OFF CON COFF
for i in $(seq 1 "$REPS"); do
  for cap in true false; do
    /usr/bin/time -o "$DB.time" -f "%U %S" env SHARDSCOPE_NO_PROGRESS=1 "$CLI" run --db "$DB" --capture="$cap" \
      --name "cap-$cap-$i" "${EXTRA[@]}" >/dev/null 2>&1
    cpu=$(tail -1 "$DB.time" | awk '{print $1+$2}')
    id=$(sqlite3 "$DB" "select max(id) from runs")
    ms=$(sqlite3 "$DB" "select value from metrics where run_id=$id and rank_id is null and key='step_time_ms'")
    echo "capture=$cap rep $i: step ${ms} ms, cpu ${cpu} s"
    if [ "$cap" = true ]; then ON+=("$ms"); CON+=("$cpu"); else OFF+=("$ms"); COFF+=("$cpu"); fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
MON=$(median "${ON[@]}")
MOFF=$(median "${OFF[@]}")
awk -v on="$MON" -v off="$MOFF" 'BEGIN { printf "capture overhead (wall): step %.2f ms with capture vs %.2f ms without: %+.1f%%\n", on, off, (on/off-1)*100 }'
CON_M=$(median "${CON[@]}")
COFF_M=$(median "${COFF[@]}")
awk -v on="$CON_M" -v off="$COFF_M" 'BEGIN { printf "capture overhead (cpu): %.2f s with capture vs %.2f s without: %+.1f%%\n", on, off, (on/off-1)*100 }'
