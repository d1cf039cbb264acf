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
    return _chromium(page, "--dump-dom").stdout


def screenshot(page: Path, png: Path, width: int = 1250, height: int = 2400) -> Path:
    """What a reviewer sees of `page`, as a PNG kept next to the test's other files."""
    _chromium(page, f"--screenshot={png}", f"--window-size={width},{height}")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    return png


def _chromium(page: Path, *action: str) -> subprocess.CompletedProcess[str]:
    binary = next(filter(None, map(shutil.which, BROWSERS)), None)
    assert binary, "chromium is not installed; run scripts/install.sh (scripts/setup_chromium.sh)"
    with tempfile.TemporaryDirectory(prefix="eoschaos-chromium-") as profile:
        result = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *action, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result
