"""Runs K instances of a pipeline as OS processes and replaces any that exits, as a deployment
would.

Writer `supervisor`: `instance` events for every start (instance, incarnation, txn_id) and
every exit (error = exit status, negative for a signal, e.g. "-9"). An instance that exits
before stop() — killed, crashed, fenced — is started again as the next incarnation. One that
exits 0 (a batch tool such as Kafka's copier, done with what it saw at launch) is started again
after RESTART_AFTER_CLEAN_EXIT_S, so a finished batch does not spin the machine.

What an instance runs is the workload's business: `launch(instance, incarnation, txn_id)` gives
the command line and environment of one process, and, for an instance that is not that process
itself (a container the process is the runtime's client of), how to signal it.

A *twin* (the nemesis' `twin` fault) is an extra, unsupervised process running an instance's
current transactional.id as incarnation TWIN_INCARNATION + n, so its transactions have their
own identity in the history; it is not replaced when it exits (normally: fenced).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from eoschaos.clusters import processes
from eoschaos.clusters.registry import register_run_dir, unregister_run_dir
from eoschaos.contract.history import INSTANCE_KIND, SUPERVISOR, HistoryWriter, instance_name

WATCH_INTERVAL_S = 0.1
RESTART_AFTER_CLEAN_EXIT_S = 1.0
TWIN_INCARNATION = 1000
TWIN_STOP_TIMEOUT_S = 10.0
STRAY_GRACE_S = 5.0  # for what an instance started to end after it
# A pause due while its instance is between incarnations (a batch tool's clean exit, a crash's
# replacement) or not yet running (a container being created) waits this long for it.
PAUSE_WAIT_S = 10.0


class Signaller(Protocol):
    """Signals an instance the supervised process only stands for (a container)."""

    def send(self, sig: signal.Signals) -> bool:
        """Deliver `sig` (SIGKILL, SIGTERM, SIGSTOP or SIGCONT); False if nothing ran."""


@dataclass(frozen=True)
class Launch:
    """How to start one instance process."""

    argv: list[str]
    env: dict[str, str]
    # None: the process is the instance, and its process group is signalled
    signaller: Signaller | None = None


Launcher = Callable[[int, int, str | None], Launch]  # (instance, incarnation, txn_id) -> Launch
TransactionalIds = Callable[[int, int], str | None]  # (instance, incarnation) -> txn_id


@dataclass(frozen=True)
class InstanceInfo:
    instance: int
    incarnation: int
    txn_id: str | None
    pid: int
    started: float = 0.0  # wall clock (epoch seconds) of the process start


@dataclass
class _Running:
    info: InstanceInfo
    popen: subprocess.Popen[bytes]
    managed: processes.ManagedProcess
    name: str
    signaller: Signaller | None = None
    exit_recorded: bool = False

    def send(self, sig: signal.Signals) -> bool:
        if self.signaller is not None:
            return self.popen.poll() is None and self.signaller.send(sig)
        return processes.signal_group(self.managed, sig)


@dataclass(frozen=True)
class Exit:
    """An instance process that ended: which, its exit status, and how long it had run."""

    info: InstanceInfo
    status: int
    ran_s: float


class Supervisor:
    def __init__(
        self,
        run_dir: Path,
        instances: int,
        launch: Launcher,
        transactional_id: TransactionalIds,
    ) -> None:
        self._run_dir = Path(run_dir)
        self._workload_dir = self._run_dir / "workload"
        self._launch = launch
        self._transactional_id = transactional_id
        self._count = instances
        self._history = HistoryWriter(run_dir, SUPERVISOR)
        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        self._txn_ids: list[str] = []
        self._twins: dict[str, _Running] = {}
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name=SUPERVISOR, daemon=True)
        # every instance dies with the harness, and not before stop() with a thread of it
        self._spawner = processes.Spawner(f"{SUPERVISOR}-spawner")
        self._started_at: dict[str, float] = {}
        self._restart_at: dict[int, tuple[float, int]] = {}  # instance -> (when, incarnation)
        self.exits: list[Exit] = []  # every exit of a supervised instance, in order

    @property
    def pid_dir(self) -> Path:
        return self._workload_dir / "pids"

    def start(self) -> None:
        # before the first instance: a harness killed from here on leaves its instances
        # where `eoschaos cleanup` looks
        register_run_dir(self._workload_dir)
        for instance in range(self._count):
            self._start(instance, 0)
        self._watcher.start()

    def instances(self) -> list[InstanceInfo]:
        """The current incarnation of every instance (alive or about to be replaced)."""
        with self._lock:
            return [self._running[i].info for i in sorted(self._running)]

    def transactional_ids(self) -> list[str]:
        """Every transactional.id any incarnation ran with."""
        with self._lock:
            return list(self._txn_ids)

    def instance_pid(self, instance: int) -> int | None:
        with self._lock:
            running = self._running.get(instance)
        return running.info.pid if running and running.managed.alive() else None

    def kill_instance(self, instance: int) -> None:
        self._signal(instance, signal.SIGKILL)

    def pause_instance(self, instance: int) -> None:
        self._signal(instance, signal.SIGSTOP, wait=PAUSE_WAIT_S)

    def resume_instance(self, instance: int) -> None:
        self._signal(instance, signal.SIGCONT)

    def start_twin(self, instance: int) -> str:
        """Start a second process with `instance`'s current transactional.id; returns its name."""
        with self._lock:
            running = self._running.get(instance)
            serial = len(self._twins)
        if running is None or running.info.txn_id is None:
            raise LookupError(f"instance {instance} runs no transactional.id to share")
        return self._spawn(instance, TWIN_INCARNATION + serial, running.info.txn_id, twin=True)

    def stop_twin(self, name: str) -> None:
        """SIGTERM the twin (if fencing has not ended it already), SIGKILL after a timeout."""
        with self._lock:
            twin = self._twins.get(name)
        if twin is None:
            return
        twin.send(signal.SIGTERM)
        twin.send(signal.SIGCONT)
        if not processes.wait_dead(twin.managed, TWIN_STOP_TIMEOUT_S, twin.popen):
            twin.send(signal.SIGKILL)
            processes.kill(twin.managed, twin.popen)

    def stop(self, timeout: float) -> None:
        """SIGTERM every instance (they finish their transaction and leave the group), SIGKILL
        whatever is still running after `timeout` seconds; record every exit."""
        self._stopping.set()
        if self._watcher.is_alive():
            self._watcher.join()  # after this, no replacement can start behind our back
        with self._lock:
            running = list(self._running.values()) + list(self._twins.values())
        for proc in running:
            proc.send(signal.SIGTERM)
            proc.send(signal.SIGCONT)  # a paused one must hear it
        deadline = time.monotonic() + timeout
        for proc in running:
            if not processes.wait_dead(
                proc.managed, max(0.0, deadline - time.monotonic()), proc.popen
            ):
                if timeout > 0:  # with no grace (an interrupted run) the kill is the plan
                    print(
                        f"{proc.name} still running {timeout:.0f}s after SIGTERM; killing it",
                        file=sys.stderr,
                    )
                proc.send(signal.SIGKILL)
                processes.kill(proc.managed, proc.popen)
        self._reap()
        # what the instances started and left behind (a user's command's children; a Spark
        # driver's JVM, which ends on its own once its driver has gone)
        deadline = time.monotonic() + STRAY_GRACE_S
        while processes.strays(self._workload_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        for stray in processes.stop_strays(self._workload_dir, timeout):
            print(f"{stray.describe()} outlived its instance; stopped", file=sys.stderr)
        unregister_run_dir(self._workload_dir)
        self._spawner.close()
        self._history.close()

    def _signal(self, instance: int, sig: signal.Signals, wait: float = 0.0) -> None:
        """Deliver `sig` to the instance's current incarnation, trying again for `wait`
        seconds while there is none that takes it."""
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                running = self._running.get(instance)
            if running is not None and running.send(sig):
                return
            if time.monotonic() >= deadline:
                raise ProcessLookupError(f"instance {instance} is not running")
            time.sleep(WATCH_INTERVAL_S)

    def log_of(self, instance: int, incarnation: int) -> Path:
        return self._workload_dir / f"{instance_name(instance, incarnation)}.log"

    def _start(self, instance: int, incarnation: int) -> None:
        txn_id = self._transactional_id(instance, incarnation)
        self._spawn(instance, incarnation, txn_id, twin=False)

    def _spawn(self, instance: int, incarnation: int, txn_id: str | None, *, twin: bool) -> str:
        name = instance_name(instance, incarnation)
        launch = self._launch(instance, incarnation, txn_id)
        popen, managed = self._spawner.spawn(
            name, launch.argv, self.log_of(instance, incarnation), self.pid_dir, launch.env
        )
        info = InstanceInfo(instance, incarnation, txn_id, popen.pid, time.time())
        with self._lock:
            self._started_at[name] = time.monotonic()
            if twin:
                self._twins[name] = _Running(info, popen, managed, name, launch.signaller)
            else:
                self._running[instance] = _Running(info, popen, managed, name, launch.signaller)
            if txn_id and txn_id not in self._txn_ids:
                self._txn_ids.append(txn_id)
        self._history.record(
            INSTANCE_KIND, "ok", "start", instance=instance, incarnation=incarnation, txn_id=txn_id
        )
        return name

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_INTERVAL_S):
            now = time.monotonic()
            for ended in self._reap():
                delay = RESTART_AFTER_CLEAN_EXIT_S if ended.status == 0 else 0.0
                self._restart_at[ended.info.instance] = (now + delay, ended.info.incarnation + 1)
            for instance, (when, incarnation) in list(self._restart_at.items()):
                if when <= now and not self._stopping.is_set():
                    del self._restart_at[instance]
                    self._start(instance, incarnation)

    def _reap(self) -> list[Exit]:
        """Record the exit of every instance process that has ended; return them.

        Called by the watcher thread only, or by stop() once the watcher has ended.
        """
        exited = []
        with self._lock:
            ended = [
                r
                for r in [*self._running.values(), *self._twins.values()]
                if not r.exit_recorded and r.popen.poll() is not None
            ]
        for proc in ended:
            info = proc.info
            proc.exit_recorded = True
            ran_s = time.monotonic() - self._started_at.get(proc.name, time.monotonic())
            processes.remove_pid_file(self.pid_dir, proc.name)
            self._history.record(
                INSTANCE_KIND,
                "info",
                "exit",
                instance=info.instance,
                incarnation=info.incarnation,
                txn_id=info.txn_id,
                error=str(proc.popen.returncode),
            )
            if info.incarnation < TWIN_INCARNATION:
                ended_instance = Exit(info, proc.popen.returncode, ran_s)
                self.exits.append(ended_instance)
                exited.append(ended_instance)
        return exited
