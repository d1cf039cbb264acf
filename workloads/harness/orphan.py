"""An instance whose harness died exits at once: orphaned, it would go on processing (and,
for a frozen-then-killed harness, holding partitions) with nobody recording or stopping it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

EXIT_ORPHANED = 6  # the supervising harness died
ORPHAN_CHECK_S = 1.0


def exit_when_orphaned() -> None:
    """Watch the parent (the supervisor that started this process) from a daemon thread."""
    _when_orphaned(lambda: os._exit(EXIT_ORPHANED))


def interrupt_when_orphaned() -> None:
    """For a process with cleanup to do (a recording child heals its faults and stops its
    instances): orphaned, it is interrupted once, as Ctrl-C would."""
    _when_orphaned(lambda: os.kill(os.getpid(), signal.SIGINT))


def _when_orphaned(act: Callable[[], None]) -> None:
    supervisor = os.getppid()

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(ORPHAN_CHECK_S)
        act()

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()
