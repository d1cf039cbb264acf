"""Directories whose host processes were started and not yet stopped -- a cluster's (brokers,
Toxiproxy) and a workload's (its instances) -- the registry `eoschaos cleanup` reads after a
crash, and how such a directory is stopped."""

from __future__ import annotations

import hashlib
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eoschaos.clusters import processes
from eoschaos.contract.host import cache_root
from eoschaos.contract.rundir import CLUSTER_FILE

# A node whose peers have all exited cannot finish its controlled shutdown: it waits on a
# quorum that left. It gets this long, not the whole stop timeout, before SIGKILL.
LAST_NODE_GRACE_S = 1.0


def is_run_dir(path: Path) -> bool:
    return (path / CLUSTER_FILE).is_file() or (path / "pids").is_dir()


def _active_registry() -> Path:
    return cache_root() / "active-runs"


def _registry_entry(run_dir: Path) -> Path:
    digest = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]
    return _active_registry() / digest


def register_run_dir(run_dir: Path) -> None:
    _active_registry().mkdir(parents=True, exist_ok=True)
    _registry_entry(run_dir).write_text(str(run_dir))


def unregister_run_dir(run_dir: Path) -> None:
    _registry_entry(run_dir).unlink(missing_ok=True)


def registered_run_dirs() -> list[Path]:
    """Dirs whose processes were started and not yet stopped (a crash leaves them here),
    workloads before clusters: instances go before the brokers they talk to."""
    if not _active_registry().is_dir():
        return []
    found = [Path(p.read_text().strip()) for p in sorted(_active_registry().iterdir())]
    return sorted(found, key=lambda run_dir: (run_dir / CLUSTER_FILE).is_file())


def registered_within(path: Path) -> list[Path]:
    """The registered run dirs inside `path` (a matrix output holds one per cluster)."""
    root = path.resolve()
    return [run_dir for run_dir in registered_run_dirs() if run_dir.resolve().is_relative_to(root)]


def stop_run_dir(run_dir: Path, timeout: float = 5.0) -> list[str]:
    """Stop every process recorded in `run_dir`, brokers before Toxiproxy, then any process
    still marked as the run dir's (what they started, or one that left its group); return
    their names."""
    pid_dir = run_dir / "pids"
    procs = processes.read_pid_files(pid_dir)
    nodes = [p for p in procs if p.name != "toxiproxy"]
    rest = [p for p in procs if p.name == "toxiproxy"]
    stopped = []
    _stop_nodes(nodes, timeout)
    with ThreadPoolExecutor(max_workers=max(1, len(rest))) as pool:
        list(pool.map(lambda p: processes.terminate(p, timeout), rest))
    for group in (nodes, rest):
        for proc in group:
            processes.remove_pid_file(pid_dir, proc.name)
            stopped.append(proc.name)
    for stray in processes.stop_strays(run_dir, timeout):
        stopped.append(stray.describe())
    unregister_run_dir(run_dir)
    return stopped


def _stop_nodes(nodes: list[processes.ManagedProcess], timeout: float) -> None:
    """SIGTERM (and SIGCONT, for a paused one) to every node at once; SIGKILL to any left after
    `timeout`, or to the last one once it has been alone for LAST_NODE_GRACE_S."""
    live = [proc for proc in nodes if processes.signal_group(proc, signal.SIGTERM)]
    for proc in live:
        processes.signal_group(proc, signal.SIGCONT)
    deadline = time.monotonic() + timeout
    alone_since: float | None = None
    while live and time.monotonic() < deadline:
        live = [proc for proc in live if proc.alive()]
        if len(live) == 1 and len(nodes) > 1:
            alone_since = alone_since or time.monotonic()
            if time.monotonic() - alone_since >= LAST_NODE_GRACE_S:
                break
        time.sleep(0.05)
    for proc in live:
        processes.kill(proc)
