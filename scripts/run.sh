#!/usr/bin/env bash
# README command 1: install what is needed, then the main job: a real chaos run of the KIP-447
# exactly-once pipeline on a 3-broker cluster, ending in verdict.json and report.html.
# Extra arguments replace the default run's arguments (see `eoschaos run --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
if [ "$#" -eq 0 ]; then
  set -- --workload kip447 --mode eos --faults kill,crash,zombie,latency --duration 60 --seed 1
fi
exec .venv/bin/eoschaos run "$@"
