"""Stop a run before it fills the disk that holds its run directory.

A run directory holds the brokers' data and the history. Left to fill its disk, a run ends in
confusion: brokers die on their own log writes, the harness retries, and history writers fail.
Instead the guard watches the free space, and below a floor it interrupts the run in its main
thread, the way Ctrl-C would. So the faults are healed, the instances and the cluster stop, and
the history so far stays complete. The user gets one line saying why (an EoschaosError, exit 2).
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path
from types import TracebackType

from eoschaos.contract.errors import EoschaosError

MIN_FREE_ENV = "EOSCHAOS_MIN_FREE_MB"
MIN_FREE_MB = 256  # far below what any machine running Kafka has, far above what a flush needs
POLL_S = 1.0
INTERRUPT = signal.SIGUSR1  # its handler raises in the main thread, wherever it waits


class DiskFull(EoschaosError):
    """The free space on the run directory's disk fell below the floor."""


def min_free_mb() -> int:
    return int(os.environ.get(MIN_FREE_ENV) or MIN_FREE_MB)


class DiskGuard:
    """`with DiskGuard(run_dir):` refuses to start below the floor and interrupts the body when
    the free space falls below it. Only the main thread can take the interrupt (signals); in any
    other thread the guard only checks at the start."""

    def __init__(self, run_dir: Path, floor_mb: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.floor_mb = min_free_mb() if floor_mb is None else floor_mb
        self.reason: str | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._previous_handler = None

    def free_mb(self) -> float:
        return shutil.disk_usage(self.run_dir).free / (1 << 20)

    def __enter__(self) -> DiskGuard:
        free = self.free_mb()
        if free < self.floor_mb:
            raise DiskFull(self._message(free, "has"))
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(INTERRUPT, self._raise)
            self._watcher = threading.Thread(target=self._watch, name="disk-guard", daemon=True)
            self._watcher.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
            signal.signal(INTERRUPT, self._previous_handler)
        if self.reason is not None and not isinstance(error, DiskFull):
            # The interrupt may surface as another error (a C library masking it): the
            # disk is still the reason the run stopped.
            raise DiskFull(self.reason) from error

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            free = self.free_mb()
            if free < self.floor_mb:
                self.reason = self._message(free, "fell to")
                signal.pthread_kill(threading.main_thread().ident, INTERRUPT)
                return

    def _raise(self, signum: int, frame: object) -> None:
        raise DiskFull(self.reason or "the disk is full")

    def _message(self, free: float, verb: str) -> str:
        return (
            f"the disk holding {self.run_dir} {verb} {free:.0f} MB free, below the floor of "
            f"{self.floor_mb} MB ({MIN_FREE_ENV}); the run stopped before filling it. Free space "
            "or pass --out on a larger disk"
        )
