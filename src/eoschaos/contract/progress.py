"""Progress of long work, one line at a time on stderr (stdout stays for results)."""

from __future__ import annotations

import sys


def progress_to_stderr(message: str) -> None:
    print(f"[eoschaos] {message}", file=sys.stderr, flush=True)
