"""An instance whose harness died exits at once: orphaned, it would go on processing (and,
for a frozen-then-killed harness, holding partitions) with nobody recording or stopping it."""

from __future__ import annotations

import os
import threading
import time

EXIT_ORPHANED = 6  # the supervising harness died
ORPHAN_CHECK_S = 1.0


def exit_when_orphaned() -> None:
    """Watch the parent (the supervisor that started this process) from a daemon thread."""
    supervisor = os.getppid()

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(ORPHAN_CHECK_S)
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()
