#!/usr/bin/env bash
# README command 1: install what is needed, then run the main job on a real cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/eoschaos demo "$@"
