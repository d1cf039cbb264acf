#!/usr/bin/env bash
# README command 2 (and CI): install what is needed, lint, run the tests.
# Default: everything but the nightly chaos matrix. Extra arguments go to pytest.
# The 15 slowest tests are listed at the end: CI must stay well under 45 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
status=0
.venv/bin/pytest -m "not chaos" --durations=15 "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "test: error: pytest collected no tests; that is a failure, not a pass" >&2
  exit 1
fi
exit "$status"
