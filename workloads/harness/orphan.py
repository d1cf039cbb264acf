"""An instance whose harness died exits at once: orphaned, it would go on processing (and,
for a frozen-then-killed harness, holding partitions) with nobody recording or stopping it.

The harness to watch is the one named when the process was started (PARENT_PID), not whatever
`getppid()` says when the watch begins: a harness that died before then would otherwise be
mistaken for init or a subreaper, and never missed. It is watched for being alive, not for
being the parent, so a process a shell in between started (a BYO command) watches it too.
The kernel's parent-death signal (clusters.processes.Spawner) is the first line; this
watch is the second, for what a shell or a JVM started in turn and for the recording child,
which must be interrupted (to heal its faults) rather than killed."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

from eoschaos.clusters import processes
from eoschaos.contract.instance_env import PARENT_PID

EXIT_ORPHANED = processes.EXIT_PARENT_GONE  # the supervising harness died
ORPHAN_CHECK_S = 1.0


def exit_when_orphaned() -> None:
    """Watch the parent (the supervisor that started this process) from a daemon thread."""
    _when_orphaned(lambda: os._exit(EXIT_ORPHANED))


def interrupt_when_orphaned() -> None:
    """For a process with cleanup to do (a recording child heals its faults and stops its
    instances): orphaned, it is interrupted once, as Ctrl-C would."""
    _when_orphaned(lambda: os.kill(os.getpid(), signal.SIGINT))


def expected_parent() -> int:
    """The harness this process was started by: as its starter said, else its parent now."""
    named = os.environ.get(PARENT_PID, "")
    return int(named) if named.isdigit() else os.getppid()


def _when_orphaned(act: Callable[[], None]) -> None:
    harness = expected_parent()
    stat = processes.proc_stat(harness)
    if stat is None or stat[0] in ("Z", "X"):
        act()  # gone before we looked: act now, not never
        return
    started = stat[1]  # a recycled pid is not the harness

    def watch() -> None:
        while processes.process_alive(harness, started):
            time.sleep(ORPHAN_CHECK_S)
        act()

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()
