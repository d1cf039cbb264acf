"""Processes eoschaos starts: own process group, a PID file in the run dir, safe signalling.

Every server runs in its own session so Ctrl-C at the terminal reaches only eoschaos (which then
stops them in order) and so a later `eoschaos cluster down` or `cleanup` from another process can
signal the whole group. A PID file records the kernel start time of the process as well, so a
recycled PID is never mistaken for ours.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

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


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) from /proc, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def process_alive(pid: int, start_ticks: int | None = None) -> bool:
    """True if `pid` runs and is not a zombie (a zombie answers kill(0) but is dead)."""
    stat = _proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return start_ticks is None or stat[1] == start_ticks


def spawn(
    name: str,
    cmd: list[str],
    log_path: Path,
    pid_dir: Path,
    *,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], ManagedProcess]:
    """Start `cmd` in a new session with stdout+stderr to `log_path`; write its PID file."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid_dir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    stat = _proc_stat(popen.pid)
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
