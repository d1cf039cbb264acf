"""Processes eoschaos starts: own process group, a PID file in the run dir, safe signalling.

Every server runs in its own session so Ctrl-C at the terminal reaches only eoschaos (which then
stops them in order) and so a later `eoschaos cluster down` or `cleanup` from another process can
signal the whole group. A PID file records the kernel start time of the process as well, so a
recycled PID is never mistaken for ours.

A PID file can only name the process eoschaos started, not what that process started in turn
(a user's command's children, a driver's JVM), nor one that left its group. So every process is
also marked in its environment with the directory that owns it (OWNER_DIR, inherited by all its
descendants): `strays(dir)` reads the process table for any process so marked, the net under
the PID files. And a process that must not outlive its starter (a workload instance) gets the
kernel's parent-death signal, set between fork and exec, where no race can miss it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eoschaos.contract.instance_env import OWNER_DIR, PARENT_PID

HISTORY_FILE = "history.jsonl"  # append-only; PID files (*.json) list only the live ones


@dataclass(frozen=True)
class ManagedProcess:
    """What a PID file says about one process eoschaos started."""

    name: str
    pid: int
    start_ticks: int
    cmd: list[str]
    log: str

    def alive(self) -> bool:
        return process_alive(self.pid, self.start_ticks)

    def describe(self) -> str:
        """Its pid and the start of its command line, as cleanup reports a stray."""
        return f"{self.pid} ({' '.join(self.cmd)[:60]})"


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) from /proc, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def process_alive(pid: int, start_ticks: int | None = None) -> bool:
    """True if `pid` runs and is not a zombie (a zombie answers kill(0) but is dead)."""
    stat = proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return start_ticks is None or stat[1] == start_ticks


PR_SET_PDEATHSIG = 1  # linux/prctl.h
EXIT_PARENT_GONE = 6  # the harness that started it died (workloads.harness.orphan too)
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> Callable[[], None]:
    """A preexec_fn (Linux): the child gets SIGKILL when the thread that started it ends --
    with the whole process, for a harness killed with SIGKILL -- and exits at once if its
    parent is already gone by the time the signal is armed."""
    parent = os.getpid()

    def arm() -> None:
        _libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(EXIT_PARENT_GONE)

    return arm


class Spawner:
    """A thread that starts processes bound to their parent, and lives until closed.

    The kernel ties the parent-death signal to the *thread* that started a process, not to
    its process: a replacement started by a short-lived thread (a watcher that ends at stop,
    the nemesis) would be killed when that thread ends, before its graceful stop. Every bound
    process of an owner is started here instead, and close() comes after they are stopped."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def spawn(
        self, name: str, cmd: list[str], log_path: Path, pid_dir: Path, env: dict[str, str] | None
    ) -> tuple[subprocess.Popen[bytes], ManagedProcess]:
        """spawn(..., bound=True), from this thread."""
        done: Future[tuple[subprocess.Popen[bytes], ManagedProcess]] = Future()
        self._jobs.put((lambda: spawn(name, cmd, log_path, pid_dir, env=env, bound=True), done))
        return done.result()

    def close(self) -> None:
        """End the thread: whatever it started and still runs gets SIGKILL."""
        self._jobs.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            work, done = job
            try:
                done.set_result(work())
            except BaseException as exc:
                done.set_exception(exc)


def spawn(
    name: str,
    cmd: list[str],
    log_path: Path,
    pid_dir: Path,
    *,
    env: dict[str, str] | None = None,
    bound: bool = False,
) -> tuple[subprocess.Popen[bytes], ManagedProcess]:
    """Start `cmd` in a new session with stdout+stderr to `log_path`; write its PID file.

    The process (and all it starts) is marked as owned by `pid_dir`'s directory. `bound`: it
    also dies with the calling thread, for processes that must not outlive the harness
    (instances; start them through a Spawner), unlike a cluster `eoschaos cluster up` leaves
    running."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid_dir.mkdir(parents=True, exist_ok=True)
    marked = {
        **(os.environ if env is None else env),
        OWNER_DIR: str(pid_dir.parent.resolve()),
        PARENT_PID: str(os.getpid()),
    }
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=marked,
            preexec_fn=_die_with_parent() if bound else None,
        )
    stat = proc_stat(popen.pid)
    managed = ManagedProcess(
        name=name,
        pid=popen.pid,
        start_ticks=stat[1] if stat else 0,
        cmd=cmd,
        log=str(log_path),
    )
    record = json.dumps(asdict(managed))
    tmp = pid_dir / f".{name}.json.tmp"
    tmp.write_text(record)
    tmp.rename(pid_dir / f"{name}.json")
    with open(pid_dir / HISTORY_FILE, "a") as history:
        history.write(record + "\n")
    return popen, managed


def read_history(pid_dir: Path) -> list[ManagedProcess]:
    """Every process ever started for this run dir, including restarted and stopped ones."""
    path = pid_dir / HISTORY_FILE
    if not path.exists():
        return []
    return [ManagedProcess(**json.loads(line)) for line in path.read_text().splitlines() if line]


def still_alive(pid_dir: Path) -> list[ManagedProcess]:
    """Processes started for this run dir that are alive now: after a stop, there must be none."""
    return [proc for proc in read_history(pid_dir) if proc.alive()]


def read_pid_files(pid_dir: Path) -> list[ManagedProcess]:
    if not pid_dir.is_dir():
        return []
    found = []
    for path in sorted(pid_dir.glob("*.json")):
        try:
            found.append(ManagedProcess(**json.loads(path.read_text())))
        except (ValueError, TypeError):
            continue  # a torn write of a process that never started; nothing to stop
    return found


def strays(owner: Path) -> list[ManagedProcess]:
    """Live processes marked as owned by `owner` or a directory below it, whether or not a
    PID file names them; never this process."""
    root = owner.resolve()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        marker = _marker(environ)
        if marker is None or not Path(marker).is_relative_to(root):
            continue
        stat = proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        cmd = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        found.append(ManagedProcess(Path(marker).name, pid, stat[1], cmd[:-1] or cmd, ""))
    return found


def _marker(environ: bytes) -> str | None:
    prefix = f"{OWNER_DIR}=".encode()
    for variable in environ.split(b"\0"):
        if variable.startswith(prefix):
            return variable[len(prefix) :].decode(errors="replace")
    return None


def stop_strays(owner: Path, timeout: float = 5.0) -> list[ManagedProcess]:
    """SIGTERM (and SIGCONT) every stray of `owner`, SIGKILL those left after `timeout`;
    return them. One by one, not by group: a stray's group may be another's."""
    found = strays(owner)
    for sig in (signal.SIGTERM, signal.SIGCONT):
        for proc in found:
            _signal_one(proc, sig)
    deadline = time.monotonic() + timeout
    while any(proc.alive() for proc in found) and time.monotonic() < deadline:
        time.sleep(0.05)
    for proc in found:
        _signal_one(proc, signal.SIGKILL)
    for proc in found:
        wait_dead(proc, 30)
    return found


def _signal_one(proc: ManagedProcess, sig: signal.Signals) -> None:
    if proc.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)


def remove_pid_file(pid_dir: Path, name: str) -> None:
    (pid_dir / f"{name}.json").unlink(missing_ok=True)


def signal_group(proc: ManagedProcess, sig: signal.Signals) -> bool:
    """Send `sig` to the process group of `proc` if it is still ours; False if it is gone."""
    if not proc.alive():
        return False
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_dead(proc: ManagedProcess, timeout: float, popen: subprocess.Popen | None = None) -> bool:
    """True once the process is gone. For our own child, gone means reaped: a JVM's main
    thread shows as a zombie in /proc while its other threads still exit, and its exit status
    (which the supervisor records) is only there once the whole process has ended."""
    deadline = time.monotonic() + timeout
    if popen is not None:
        try:
            popen.wait(max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return False
        return True
    while time.monotonic() < deadline:
        if not proc.alive():
            return True
        time.sleep(0.05)
    return not proc.alive()


def kill(proc: ManagedProcess, popen: subprocess.Popen | None = None) -> None:
    """SIGKILL the group and wait until the process is really gone."""
    signal_group(proc, signal.SIGKILL)
    wait_dead(proc, 30, popen)


def terminate(proc: ManagedProcess, timeout: float, popen: subprocess.Popen | None = None) -> bool:
    """SIGTERM (plus SIGCONT, in case it is paused), then SIGKILL after `timeout` seconds.

    Returns True if the process exited on SIGTERM, False if it had to be killed.
    """
    if not signal_group(proc, signal.SIGTERM):
        return True
    signal_group(proc, signal.SIGCONT)
    if wait_dead(proc, timeout, popen):
        return True
    kill(proc, popen)
    return False
