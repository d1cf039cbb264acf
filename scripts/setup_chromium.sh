#!/usr/bin/env bash
# Install Debian's Chromium if missing: the tests open the matrix index and the reports in a real
# headless browser (docs/nightly.md). Idempotent; a no-op when a Chromium or Chrome is on PATH.
set -euo pipefail

die() { echo "setup_chromium: error: $*" >&2; exit 2; }

for browser in chromium chromium-browser google-chrome; do
  command -v "$browser" >/dev/null && exit 0
done
command -v apt-get >/dev/null || die "chromium is missing and there is no apt-get; install chromium"
[ "$(id -u)" = 0 ] || die "installing chromium needs root; run: sudo apt-get install chromium"
echo "setup_chromium: apt-get install chromium (about a minute)" >&2
apt-get update -qq || die "apt-get update failed; check that the Debian mirror is reachable"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
  || die "apt-get install chromium failed"
