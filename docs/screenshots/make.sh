#!/bin/sh
# Regenerates the README's screenshots with the app's screenshot mode (no display needed).
#   docs/screenshots/make.sh [BUILD_DIR] [RUNTIME_DB] [TRACES_DB]
# RUNTIME_DB: `shardscope-cli compare --db runtime3.db` (ddp, fsdp, zero3 on the small model, 2 ranks);
# TRACES_DB: the development traces imported one run per file (`shardscope-cli import --separate-runs`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
runtime=${2:-/tmp/ui-fixtures/runtime3.db}
traces=${3:-/tmp/ui-fixtures/traces.db}
app="$build/app/shardscope"
export QT_QPA_PLATFORM=offscreen
export XDG_CONFIG_HOME="${TMPDIR:-/tmp}/shardscope-screenshots-config"  # never the user's settings

shot() {  # db page out.png [--run ...]
  db=$1 page=$2 out=$3
  shift 3
  "$app" --open "$db" --page "$page" --screenshot "$here/$out" --size 1600x1000 "$@"
  echo "$out: $(wc -c < "$here/$out") bytes"
}

shot "$runtime" compare compare-runtime.png --run 1,2,3
shot "$runtime" overview overview-runtime.png --run 3
shot "$runtime" memory memory-runtime.png --run 2
shot "$runtime" communication communication-runtime.png --run 3
shot "$traces" overview overview-traces.png --run 2
shot "$traces" communication communication-traces.png --run 2
shot "$runtime" timeline timeline-runtime.png --run 2
shot "$traces" timeline timeline-traces.png --run 2
shot "$runtime" estimator estimator.png
