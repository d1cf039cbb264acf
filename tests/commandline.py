"""The `eoschaos` command line run as a user runs it: a child process, output captured."""

from __future__ import annotations

import subprocess
import sys


def run_eoschaos(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eoschaos.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
