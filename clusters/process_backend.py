"""A KRaft cluster of JVM processes on loopback, every listener behind its own Toxiproxy proxy.

Run-directory layout (kept after stop, for forensics):

    cluster.json              what `cluster up` printed, plus ports; written when ready
    pids/<name>.json          one per live process (toxiproxy, node-<id>)
    toxiproxy.log
    nodes/<id>/server.properties, nodes/<id>/data/, nodes/<id>/logs/{server.log,stdout.log}
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eoschaos.clusters import admin, processes
from eoschaos.clusters.base import BROKER_JVM, ClusterBase, ClusterInfo, new_cluster_id
from eoschaos.clusters.broker_config import ClusterSpec, broker_properties, render_properties
from eoschaos.clusters.kafka_dist import KafkaDistribution, class_archive
from eoschaos.clusters.ports import layout
from eoschaos.clusters.registry import register_run_dir, stop_run_dir
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import java_binary
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import CLUSTER_FILE


def build_class_archive(dist: KafkaDistribution, toxiproxy_bin: Path, work_dir: Path) -> Path:
    """Record the classes a broker loads into a CDS archive; later broker JVMs map it.

    Three JVMs starting at once on two cores spend most of their first seconds loading and
    verifying classes; sharing an archive cut cluster-ready time by about a quarter (see
    docs/benchmarks.md). The training run is a one-node cluster taken through the same
    readiness probe (transactions, group commits), then stopped cleanly so the JVM dumps.
    """
    target = class_archive(dist)
    if target.exists():
        return target
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    cluster = ProcessCluster(
        work_dir,
        ClusterSpec(brokers=1, kafka_version=dist.version),
        dist,
        toxiproxy_bin,
        progress=lambda _m: None,
        extra_jvm_args=[f"-XX:ArchiveClassesAtExit={partial}"],
    )
    cluster.start()
    stop_run_dir(cluster.run_dir, timeout=120.0)
    if partial.exists():
        partial.rename(target)
    return target


# How Kafka's SocketServer says a listener's port was taken (3.9 and 4.x alike).
BIND_FAILURE = re.compile(r"failed to bind to (\S+?):? Address already in use")
LOG_TAIL_BYTES = 256 << 10


def port_taken(server_log: Path) -> str | None:
    """The host:port a broker could not bind, from the tail of its server.log, if that is
    why it died."""
    try:
        with server_log.open("rb") as log:
            log.seek(max(0, server_log.stat().st_size - LOG_TAIL_BYTES))
            tail = log.read().decode("utf-8", "replace")
    except OSError:
        return None
    found = BIND_FAILURE.search(tail)
    return found.group(1) if found else None


class ProcessCluster(ClusterBase):
    """A cluster whose nodes are local JVM processes.

    Use as a context manager, or call `start()` and `stop()`; `attach()` re-opens a cluster
    started by another process (e.g. by `eoschaos cluster up`).
    """

    backend = "process"
    start_timeout_s = 120.0

    def __init__(
        self,
        run_dir: Path,
        spec: ClusterSpec,
        dist: KafkaDistribution,
        toxiproxy_bin: Path,
        progress: Callable[[str], None] = progress_to_stderr,
        extra_jvm_args: list[str] | None = None,
        class_sharing: bool = True,
    ) -> None:
        super().__init__(run_dir, spec, dist, toxiproxy_bin, progress)
        self.extra_jvm_args = extra_jvm_args or []
        self.class_sharing = class_sharing

    # ----------------------------------------------------------------- lifecycle

    def _start(self) -> None:
        register_run_dir(self.run_dir)  # `eoschaos cleanup` finds it if this process dies
        self._start_toxiproxy()
        self._start_kafka_proxy()
        self._create_proxies()
        self._format_log_dirs(new_cluster_id())
        for node_id in self.spec.node_ids:
            self.start_node(node_id)
        self._say(f"started {len(self.spec.node_ids)} brokers; waiting for registration")

    def _watchdog_progress(self, message: str) -> None:
        for name, popen in self._popens.items():
            if name.startswith("node-") and popen.poll() is not None:
                logs = self.node_dir(int(name.split("-")[1])) / "logs"
                taken = port_taken(logs / "server.log")
                if taken:
                    raise admin.ClusterNotReady(
                        f"{name} could not listen on {taken}: another process took that port "
                        "after eoschaos found it free; run again (eoschaos picks a free block "
                        f"of ports) or stop what holds it; see {logs / 'server.log'}"
                    )
                raise admin.ClusterNotReady(
                    f"{name} exited with code {popen.returncode} during start; "
                    f"see {logs / 'stdout.log'}"
                )
        self._say(message)

    def stop(self) -> None:
        """Stop every process of this cluster (brokers first). Data and logs stay."""
        stopped = stop_run_dir(self.run_dir)
        for popen in self._popens.values():
            popen.poll()
        self._popens.clear()
        if stopped:
            self._say(f"stopped {', '.join(stopped)}; logs and data kept in {self.run_dir}")

    @classmethod
    def attach(
        cls, run_dir: Path, progress: Callable[[str], None] = progress_to_stderr
    ) -> ProcessCluster:
        """Re-open a ready cluster from its run directory (started by another process)."""
        path = run_dir / CLUSTER_FILE
        if not path.is_file():
            raise EoschaosError(
                f"{run_dir} is not a ready eoschaos cluster (no {CLUSTER_FILE}); "
                "pass the run_dir printed by `eoschaos cluster up`"
            )
        data: dict[str, Any] = json.loads(path.read_text())
        info = ClusterInfo(**data)
        spec = ClusterSpec(
            brokers=len(info.broker_ids),
            kafka_version=info.kafka_version,
            base_port=info.base_port,
            instance_lanes=info.instance_lanes,
            protocol_proxy=bool(info.kafka_proxy_api),
        )
        dist = KafkaDistribution(version=info.kafka_version, libs=Path(info.kafka_libs))
        cluster = cls(run_dir, spec, dist, Path(), progress)
        cluster.plan = layout(
            info.base_port, info.broker_ids, info.instance_lanes, spec.protocol_proxy
        )
        cluster.info = info
        return cluster

    # ----------------------------------------------------------------- processes

    def _write_node_config(self, node_id: int) -> None:
        assert self.plan is not None
        node_dir = self.node_dir(node_id)
        (node_dir / "logs").mkdir(parents=True, exist_ok=True)
        props = broker_properties(self.spec, self.plan, node_id, node_dir / "data")
        (node_dir / "server.properties").write_text(render_properties(props))

    def _broker_command(self, node_id: int) -> list[str]:
        archive = class_archive(self.dist)
        sharing = (
            [f"-XX:SharedArchiveFile={archive}"] if self.class_sharing and archive.exists() else []
        )
        return [
            java_binary(),
            *BROKER_JVM,
            *sharing,
            *self.extra_jvm_args,
            *self.dist.logging_args(self.node_dir(node_id) / "logs"),
            "-cp",
            self.dist.classpath,
            "kafka.Kafka",
            str(self.node_dir(node_id) / "server.properties"),
        ]

    def _node_proc(self, node_id: int) -> processes.ManagedProcess | None:
        path = self.pid_dir / f"node-{node_id}.json"
        if not path.exists():
            return None
        return next(
            p for p in processes.read_pid_files(self.pid_dir) if p.name == f"node-{node_id}"
        )

    def node_alive(self, node_id: int) -> bool:
        proc = self._node_proc(node_id)
        return proc is not None and proc.alive()

    def node_pid(self, node_id: int) -> int | None:
        proc = self._node_proc(node_id)
        return proc.pid if proc is not None and proc.alive() else None

    # ----------------------------------------------------------------- node operations

    def start_node(self, node_id: int) -> None:
        """Start (or restart) node `node_id` on its existing data dir."""
        if self.node_alive(node_id):
            raise RuntimeError(f"node {node_id} is already running")
        log = self.node_dir(node_id) / "logs" / "stdout.log"
        popen, _ = processes.spawn(
            f"node-{node_id}", self._broker_command(node_id), log, self.pid_dir
        )
        self._popens[f"node-{node_id}"] = popen

    def kill_node(self, node_id: int) -> None:
        """kill -9: no controlled shutdown, no flush; the data dir stays for the restart."""
        proc = self._node_proc(node_id)
        if proc is None:
            return
        processes.kill(proc, self._popens.get(proc.name))
        processes.remove_pid_file(self.pid_dir, proc.name)

    def stop_node(self, node_id: int, timeout: float = 30.0) -> bool:
        """Clean stop (SIGTERM, controlled shutdown). True if it exited before `timeout`."""
        proc = self._node_proc(node_id)
        if proc is None:
            return True
        clean = processes.terminate(proc, timeout, self._popens.get(proc.name))
        processes.remove_pid_file(self.pid_dir, proc.name)
        return clean

    def pause_node(self, node_id: int) -> None:
        """SIGSTOP: the JVM keeps its sockets open but answers nothing (a GC-pause-like fault)."""
        proc = self._node_proc(node_id)
        if proc is None or not processes.signal_group(proc, signal.SIGSTOP):
            raise RuntimeError(f"node {node_id} is not running")

    def resume_node(self, node_id: int) -> None:
        proc = self._node_proc(node_id)
        if proc is None or not processes.signal_group(proc, signal.SIGCONT):
            raise RuntimeError(f"node {node_id} is not running")
