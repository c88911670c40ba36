#!/usr/bin/env bash
# Predictions against runs they were not calibrated on: makes fresh CPU runs (strategies, 2 and 4
# ranks, knobs, two model sizes, repeats for the noise), predicts each configuration from every
# other one in its class and prints the validation table (docs/ESTIMATOR.md, "Validation").
#   benchmarks/simulator_validation.sh [--cli build/app/shardscope-cli] [--db F [--reuse]] [--repeats N] [--quick] [--new-knobs] [--json OUT]
# Run it on an idle machine: the runs are timed.
set -euo pipefail
exec python3 "$(dirname "$0")/simulator_validation.py" "$@"
