#!/usr/bin/env bash
# README command 2 (and CI): install what is needed, lint, run the tests.
# Default: everything but the nightly chaos matrix. Extra arguments go to pytest.
# Every test over 10 s is listed at the end (CI must stay well under 45 minutes), between two
# timings of a fixed CPU load: the host's speed varies, and they tell a slow machine from slow code.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# The layering contract (pyproject.toml), read from the package as a wheel installs it: the role
# folders map into `eoschaos` by the build's package-dir, which an import graph of the source
# tree cannot see.
layers=$(mktemp -d)
trap 'rm -rf "$layers"' EXIT
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps --target "$layers" . \
  2> >(grep -v -i beta >&2)
PYTHONPATH="$layers" .venv/bin/lint-imports
# The Kafka protocol proxy's own tests (Go): its framing, holds, answers, against a stand-in.
(
  cd clusters/kafka_proxy
  unformatted=$(gofmt -l .)
  [ -z "$unformatted" ] || { echo "test: error: gofmt would change $unformatted" >&2; exit 1; }
  go vet ./... && go test ./...
)
.venv/bin/python scripts/machine_reference.py
status=0
# A failed real-cluster test runs once more, and every rerun is listed at the end (conftest.py).
EOSCHAOS_CLUSTER_RERUNS=1 .venv/bin/pytest -m "not chaos" --durations=0 --durations-min=10 "$@" \
  || status=$?
.venv/bin/python scripts/machine_reference.py
if [ "$status" -eq 5 ]; then
  echo "test: error: pytest collected no tests; that is a failure, not a pass" >&2
  exit 1
fi
exit "$status"
