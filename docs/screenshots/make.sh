#!/bin/sh
# Regenerates the README's screenshots with the app's screenshot mode (no display needed); each
# picture gets its OUT.json (what the page shows) beside it in the same run, not committed.
#   docs/screenshots/make.sh [BUILD_DIR] [DB]
# DB: the README's first command's database (demo.db): runs 1-3 are `shardscope-cli compare` (ddp,
# fsdp, zero3 on the small model, 2 CPU ranks, 20 steps), runs 4-6 the development traces imported
# one run per file (`shardscope-cli import --separate-runs ../shared/traces/kineto`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
db=${2:-demo.db}
app="$build/app/shardscope"
export QT_QPA_PLATFORM=offscreen
export XDG_CONFIG_HOME="${TMPDIR:-/tmp}/shardscope-screenshots-config"  # never the user's settings
json="${TMPDIR:-/tmp}/shardscope-screenshots-json"
mkdir -p "$json"

shot() {  # page out.png [options...]  (db: $db unless set for the call)
  page=$1 out=$2
  shift 2
  "$app" --open "${db}" --page "$page" --screenshot "$json/$out" --size 1600x1000 "$@"
  mv "$json/$out" "$here/$out"
  echo "$out: $(wc -c < "$here/$out") bytes (what it shows: $json/${out%.png}.json)"
}

# The three strategies side by side on every page.
shot compare compare-3runs.png --run 1,2,3
shot overview overview-3runs.png --run 1,2,3
shot memory memory-3runs.png --run 1,2,3
shot communication communication-3runs.png --run 1,2,3
shot timeline timeline-3runs.png --run 1,2,3 --timeline-view step --step 1
shot timeline timeline-3runs-stacked.png --run 1,2,3 --timeline-view stacked
# One run, and the imported traces.
shot memory memory-runtime.png --run 2
shot timeline timeline-runtime.png --run 2
shot overview overview-traces.png --run 5
shot communication communication-traces.png --run 5
shot timeline timeline-traces.png --run 5
shot estimator estimator.png
# The bottlenecks and arrivals of the ZeRO-3 run.
shot communication communication-zero3.png --run 3
# Top kernels and operators, HTA's temporal and kernel-type breakdowns, of the A100 trace.
shot kernels kernels-traces.png --run 5

# An 8-rank job (generated: the same data-parallel loop on every rank, its own jitter) at open.
gen="$build/tests/shardscope-gen-kineto"
job="${TMPDIR:-/tmp}/shardscope-screenshots-8ranks"
rm -rf "$job" && mkdir -p "$job"
for r in 0 1 2 3 4 5 6 7; do "$gen" --events 40k --rank $r --world 8 --steps 6 --seed 7 -o "$job/rank$r.json.gz"; done
"$build/app/shardscope-cli" import --db "$job/eight.db" --name "8-rank job" "$job"/rank*.json.gz > /dev/null
db="$job/eight.db" shot timeline timeline-8ranks.png --run 1
