"""Open a page in real headless Chromium (Debian's, installed by scripts/setup_chromium.sh)
and return the DOM it rendered: what a reviewer's browser shows, not what we wrote."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=3000",
)


def rendered_dom(page: Path) -> str:
    binary = next(filter(None, map(shutil.which, BROWSERS)), None)
    assert binary, "chromium is not installed; run scripts/install.sh (scripts/setup_chromium.sh)"
    with tempfile.TemporaryDirectory(prefix="eoschaos-chromium-") as profile:
        result = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout
