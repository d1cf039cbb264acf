#!/usr/bin/env bash
# Set podman up for the containers backend on a Debian machine of ours (no Docker engine, no
# registry): install podman and runc if missing, then let eoschaos write its private
# containers.conf (under ~/.cache/eoschaos/podman, named by CONTAINERS_CONF; /etc is not touched)
# and prove that podman answers with it. Idempotent; a no-op when a Docker engine answers.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "setup_podman: error: $*" >&2; exit 2; }

[ -x .venv/bin/python ] || die "no .venv; run scripts/install.sh first"

if docker info >/dev/null 2>&1; then
  echo "setup_podman: a Docker engine answers; podman is not needed" >&2
  exit 0
fi

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
  command -v apt-get >/dev/null || die "podman is missing and there is no apt-get; install podman and runc"
  [ "$(id -u)" = 0 ] || die "installing podman needs root; run: sudo apt-get install podman runc"
  echo "setup_podman: apt-get install podman runc" >&2
  apt-get update -qq || die "apt-get update failed; check that the Debian mirror is reachable"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    podman runc netavark conmon iptables >/dev/null \
    || die "apt-get install podman runc failed"
fi

.venv/bin/python -c 'from eoschaos.clusters.container_runtime import setup_podman; print(setup_podman())' >&2
