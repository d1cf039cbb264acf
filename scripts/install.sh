#!/usr/bin/env bash
# Install everything eoschaos needs: a virtualenv in .venv with the Python packages, then
# (through `eoschaos install`) Kafka jars from Maven Central and Toxiproxy built with Go, cached
# under ~/.cache/eoschaos. Idempotent; with warm caches it takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "install: error: $*" >&2; exit 2; }

command -v python3 >/dev/null || die "python3 not found; install Python 3.11+"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "Python 3.11+ is needed, found $(python3 --version 2>&1); install a newer python3"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || die "could not create .venv; install the venv module (apt-get install python3-venv)"
fi
# The exact versions of requirements.lock (uv pip compile; docs/nightly.md says how to renew it),
# so two machines, or two nights, differ only in what changed on purpose.
stamp=.venv/.eoschaos-deps
wanted=$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "install: Python packages (pyspark is large: about a minute the first time)" >&2
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.lock \
    || die "pip install failed; check that PyPI is reachable"
  .venv/bin/pip install --quiet --disable-pip-version-check --no-deps -e '.[dev]' \
    || die "pip install of eoschaos itself failed"
  echo "$wanted" > "$stamp"
fi
# The versions the tests run: the default and the last 3.x, as clusters/kafka_dist.py names them.
read -r current last3x < <(.venv/bin/python -c \
  'from eoschaos.clusters.kafka_dist import DEFAULT_KAFKA_VERSION as d, LATEST_3X_VERSION as l; print(d, l)')
.venv/bin/eoschaos install --kafka-version "$current" --kafka-version "$last3x" >&2
# The containers backend: podman with eoschaos' private configuration (a no-op where Docker runs).
bash scripts/setup_podman.sh
# A real browser for the report and matrix index tests (Debian chromium).
bash scripts/setup_chromium.sh
