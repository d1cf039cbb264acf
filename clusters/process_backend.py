"""A KRaft cluster of JVM processes on loopback, every listener behind its own Toxiproxy proxy.

Run-directory layout (kept after stop, for forensics):

    cluster.json              what `cluster up` printed, plus ports; written when ready
    pids/<name>.json          one per live process (toxiproxy, node-<id>)
    toxiproxy.log
    nodes/<id>/server.properties, nodes/<id>/data/, nodes/<id>/logs/{server.log,stdout.log}
"""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eoschaos.clusters import admin, processes
from eoschaos.clusters.broker_config import ClusterSpec, broker_properties, render_properties
from eoschaos.clusters.kafka_dist import (
    KafkaDistribution,
    cache_root,
    class_archive,
    java_binary,
    java_major_version,
)
from eoschaos.clusters.ports import (
    Link,
    PortPlan,
    controller_link,
    lane_link,
    layout,
    listener_of,
    plan_ports,
)
from eoschaos.clusters.toxiproxy import ToxiproxyAPI
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import CLUSTER_FILE

_BROKER_JVM = [
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
]


@dataclass
class ClusterInfo:
    """The facts about a running cluster that users and later stages need; saved as cluster.json."""

    run_dir: str
    backend: str
    bootstrap_servers: str
    toxiproxy_api: str
    kafka_version: str
    metadata_version: str
    transaction_version: str
    broker_ids: list[int]
    controller_ids: list[int]
    base_port: int
    kafka_libs: str
    replication_factor: int
    ready_seconds: float
    features: dict[str, str] = field(default_factory=dict)
    instance_lanes: int = 0  # absent from a cluster.json written before lanes existed


def new_cluster_id() -> str:
    """A random KRaft cluster id, never starting with '-' (the storage tool would read an option).

    Kafka's own Uuid.randomUuid() retries for the same reason.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def is_run_dir(path: Path) -> bool:
    return (path / CLUSTER_FILE).is_file() or (path / "pids").is_dir()


def _active_registry() -> Path:
    return cache_root() / "active-runs"


def _registry_entry(run_dir: Path) -> Path:
    digest = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]
    return _active_registry() / digest


def registered_run_dirs() -> list[Path]:
    """Run dirs whose processes were started and not yet stopped (a crash leaves them here)."""
    if not _active_registry().is_dir():
        return []
    return [Path(p.read_text().strip()) for p in sorted(_active_registry().iterdir())]


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


def stop_run_dir(run_dir: Path, timeout: float = 5.0) -> list[str]:
    """Stop every process recorded in `run_dir`, brokers before Toxiproxy; return their names."""
    pid_dir = run_dir / "pids"
    procs = processes.read_pid_files(pid_dir)
    nodes = [p for p in procs if p.name != "toxiproxy"]
    rest = [p for p in procs if p.name == "toxiproxy"]
    stopped = []
    for group in (nodes, rest):
        with ThreadPoolExecutor(max_workers=max(1, len(group))) as pool:
            list(pool.map(lambda p: processes.terminate(p, timeout), group))
        for proc in group:
            processes.remove_pid_file(pid_dir, proc.name)
            stopped.append(proc.name)
    _registry_entry(run_dir).unlink(missing_ok=True)
    return stopped


class ProcessCluster:
    """Start, stop and hurt a cluster whose nodes are local JVM processes.

    Use as a context manager, or call `start()` and `stop()`; `attach()` re-opens a cluster
    started by another process (e.g. by `eoschaos cluster up`).
    """

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
        self.run_dir = run_dir.resolve()
        self.extra_jvm_args = extra_jvm_args or []
        self.class_sharing = class_sharing
        self.spec = spec
        self.dist = dist
        self.toxiproxy_bin = toxiproxy_bin
        self.progress = progress
        self.plan: PortPlan | None = None
        self.info: ClusterInfo | None = None
        self._popens: dict[str, subprocess.Popen] = {}
        self._t0 = time.monotonic()

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> ProcessCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid_dir(self) -> Path:
        return self.run_dir / "pids"

    def node_dir(self, node_id: int) -> Path:
        return self.run_dir / "nodes" / str(node_id)

    @property
    def bootstrap(self) -> str:
        return self._proxy_addresses("client")

    def _proxy_addresses(self, link: Link) -> str:
        """Bootstrap servers through `link`'s proxy on every node."""
        assert self.plan is not None
        return ",".join(f"127.0.0.1:{ports.proxy[link]}" for ports in self.plan.nodes.values())

    def client_address(self, node_id: int) -> str:
        """The proxy address through which clients reach node `node_id` (and only it)."""
        assert self.plan is not None
        return f"127.0.0.1:{self.plan.nodes[node_id].proxy['client']}"

    def instance_bootstrap(self, instance: int) -> str:
        """Bootstrap servers of workload instance `instance`: its own lane if the cluster has
        one for it (the lane's proxies carry only its traffic), else the shared listener."""
        if instance >= self.spec.instance_lanes:
            return self.bootstrap
        return self._proxy_addresses(lane_link(instance))

    def proxied_links(self, node_id: int) -> list[Link]:
        """The node's links that have a proxy: all but the controller's on a broker-only node."""
        assert self.plan is not None
        voter = node_id in self.spec.voter_ids
        links = self.plan.nodes[node_id].proxy
        return [link for link in links if voter or listener_of(link) != "controller"]

    def peer_links(self, node_id: int) -> list[tuple[int, Link]]:
        """Every (node, link) that carries the node's traffic with its peers, both ways: the
        node's inter-broker listener, the controller links the other nodes reach it by, and
        the controller links by which it reaches the other voters."""
        inbound = [(node_id, "internal")]
        if node_id in self.spec.voter_ids:
            inbound += [(node_id, controller_link(n)) for n in self.spec.node_ids if n != node_id]
        outbound = [(v, controller_link(node_id)) for v in self.spec.voter_ids if v != node_id]
        return inbound + outbound

    def client_links(self) -> list[Link]:
        """Every link that carries client traffic: the shared listener and each lane."""
        return ["client", *(lane_link(n) for n in range(self.spec.instance_lanes))]

    @property
    def toxiproxy(self) -> ToxiproxyAPI:
        assert self.plan is not None
        return ToxiproxyAPI("127.0.0.1", self.plan.toxiproxy_api)

    def _say(self, message: str) -> None:
        self.progress(f"{time.monotonic() - self._t0:5.1f}s {message}")

    def start(self, timeout: float = 120.0) -> ClusterInfo:
        """Start Toxiproxy and all nodes, wait until ready; on any failure stop what started."""
        self._t0 = time.monotonic()
        if self.dist.major >= 4 and java_major_version(java_binary()) < 17:
            raise EoschaosError(f"Kafka {self.dist.version} needs Java 17+; set JAVA_HOME to one")
        self.plan = plan_ports(self.spec.node_ids, self.spec.base_port, self.spec.instance_lanes)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _active_registry().mkdir(parents=True, exist_ok=True)
        _registry_entry(self.run_dir).write_text(str(self.run_dir))
        try:
            return self._start(timeout)
        except BaseException:
            self._say("start failed; stopping everything that was started")
            self.stop()
            raise

    def _start(self, timeout: float) -> ClusterInfo:
        assert self.plan is not None
        self._start_toxiproxy()
        self._create_proxies()
        cluster_id = new_cluster_id()
        for node_id in self.spec.node_ids:
            self._write_node_config(node_id)
        self._say(
            f"formatting {len(self.spec.node_ids)} KRaft log dirs (Kafka {self.dist.version})"
        )
        with ThreadPoolExecutor(max_workers=len(self.spec.node_ids)) as pool:
            list(pool.map(lambda n: self._format(n, cluster_id), self.spec.node_ids))
        for node_id in self.spec.node_ids:
            self.start_node(node_id)
        self._say(f"started {len(self.spec.node_ids)} brokers; waiting for registration")
        deadline = time.monotonic() + timeout
        expected = set(self.spec.node_ids)
        admin.wait_healthy(self.bootstrap, expected, timeout, self._watchdog_progress)
        self._say("brokers registered; creating and probing the internal topics")
        admin.probe_internal_topics(
            self.bootstrap, self.spec.replication_factor, max(10.0, deadline - time.monotonic())
        )
        admin.wait_healthy(
            self.bootstrap, expected, max(5.0, deadline - time.monotonic()), self._watchdog_progress
        )
        features = admin.finalized_features(self.dist, self.bootstrap)
        self.info = ClusterInfo(
            run_dir=str(self.run_dir),
            backend="process",
            bootstrap_servers=self.bootstrap,
            toxiproxy_api=self.toxiproxy.url,
            kafka_version=self.dist.version,
            metadata_version=features.get("metadata.version", "unknown"),
            transaction_version=features["transaction.version"],
            broker_ids=self.spec.node_ids,
            controller_ids=self.spec.voter_ids,
            base_port=self.plan.toxiproxy_api,
            kafka_libs=str(self.dist.libs),
            replication_factor=self.spec.replication_factor,
            ready_seconds=round(time.monotonic() - self._t0, 2),
            features=features,
            instance_lanes=self.spec.instance_lanes,
        )
        (self.run_dir / CLUSTER_FILE).write_text(json.dumps(asdict(self.info), indent=2) + "\n")
        self._say(
            f"ready: Kafka {self.dist.version}, metadata.version {self.info.metadata_version}, "
            f"transaction.version {self.info.transaction_version}"
        )
        return self.info

    def _watchdog_progress(self, message: str) -> None:
        """Report progress, and fail fast if a node JVM died instead of waiting for the timeout."""
        for name, popen in self._popens.items():
            if name.startswith("node-") and popen.poll() is not None:
                log = self.node_dir(int(name.split("-")[1])) / "logs" / "stdout.log"
                raise admin.ClusterNotReady(
                    f"{name} exited with code {popen.returncode} during start; see {log}"
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
        )
        dist = KafkaDistribution(version=info.kafka_version, libs=Path(info.kafka_libs))
        cluster = cls(run_dir, spec, dist, Path(), progress)
        cluster.plan = layout(info.base_port, info.broker_ids, info.instance_lanes)
        cluster.info = info
        return cluster

    # ----------------------------------------------------------------- processes

    def _start_toxiproxy(self) -> None:
        assert self.plan is not None
        cmd = [str(self.toxiproxy_bin), "-host", "127.0.0.1", "-port", str(self.plan.toxiproxy_api)]
        popen, _ = processes.spawn("toxiproxy", cmd, self.run_dir / "toxiproxy.log", self.pid_dir)
        self._popens["toxiproxy"] = popen
        self.toxiproxy.wait_ready(timeout=15)

    def _create_proxies(self) -> None:
        assert self.plan is not None
        for node_id, ports in self.plan.nodes.items():
            for link in self.proxied_links(node_id):
                self.toxiproxy.create_proxy(
                    self.proxy_name(node_id, link),
                    listen=f"127.0.0.1:{ports.proxy[link]}",
                    upstream=f"127.0.0.1:{ports.real[listener_of(link)]}",
                )

    def _write_node_config(self, node_id: int) -> None:
        assert self.plan is not None
        node_dir = self.node_dir(node_id)
        (node_dir / "logs").mkdir(parents=True, exist_ok=True)
        props = broker_properties(self.spec, self.plan, node_id, node_dir / "data")
        (node_dir / "server.properties").write_text(render_properties(props))

    def _java(self, node_id: int, main_class: str, args: list[str], *, broker: bool) -> list[str]:
        logs = self.node_dir(node_id) / "logs"
        if broker:
            archive = class_archive(self.dist)
            use = self.class_sharing and archive.exists()
            sharing = [f"-XX:SharedArchiveFile={archive}"] if use else []
            jvm = [*_BROKER_JVM, *sharing, *self.extra_jvm_args]
        else:
            jvm = ["-Xmx256m", "-XX:TieredStopAtLevel=1"]  # a short-lived tool
        return [
            java_binary(),
            *jvm,
            *self.dist.logging_args(logs),
            "-cp",
            self.dist.classpath,
            main_class,
            *args,
        ]

    def _format(self, node_id: int, cluster_id: str) -> None:
        props = self.node_dir(node_id) / "server.properties"
        cmd = self._java(
            node_id,
            "kafka.tools.StorageTool",
            ["format", "-t", cluster_id, "-c", str(props)],
            broker=False,
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise admin.ClusterNotReady(
                f"formatting node {node_id} failed: {(proc.stdout + proc.stderr).strip()[-400:]}"
            )

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
        props = self.node_dir(node_id) / "server.properties"
        cmd = self._java(node_id, "kafka.Kafka", [str(props)], broker=True)
        log = self.node_dir(node_id) / "logs" / "stdout.log"
        popen, _ = processes.spawn(f"node-{node_id}", cmd, log, self.pid_dir)
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

    def restart_node(self, node_id: int, *, clean: bool = False) -> None:
        if clean:
            self.stop_node(node_id)
        else:
            self.kill_node(node_id)
        self.start_node(node_id)

    def wait_healthy(self, timeout: float = 60.0) -> admin.Health:
        """Block until every node answers for itself, and no partition is under-replicated."""
        assert self.plan is not None
        deadline = time.monotonic() + timeout
        for node_id in self.plan.nodes:
            remaining = max(1.0, deadline - time.monotonic())
            admin.wait_answers_for_itself(self.client_address(node_id), node_id, remaining)
        remaining = max(1.0, deadline - time.monotonic())
        return admin.wait_healthy(self.bootstrap, set(self.spec.node_ids), remaining, self._say)

    # ----------------------------------------------------------------- network

    def proxy_name(self, node_id: int, link: Link) -> str:
        return f"node-{node_id}-{link}"

    def set_link_enabled(self, node_id: int, link: Link, enabled: bool) -> None:
        """Disable = fail fast: the proxy closes its listener and drops its connections."""
        self.toxiproxy.set_enabled(self.proxy_name(node_id, link), enabled)

    def add_toxic(
        self,
        node_id: int,
        link: Link,
        toxic_type: str,
        *,
        stream: str = "downstream",
        attributes: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> str:
        return self.toxiproxy.add_toxic(
            self.proxy_name(node_id, link),
            toxic_type,
            stream=stream,
            attributes=attributes,
            name=name,
        )

    def remove_toxic(self, node_id: int, link: Link, name: str) -> None:
        self.toxiproxy.remove_toxic(self.proxy_name(node_id, link), name)

    def heal_network(self) -> None:
        """Re-enable every proxy and remove every toxic."""
        self.toxiproxy.reset()

    # ----------------------------------------------------------------- who does what

    def partition_leader(self, topic: str, partition: int) -> int:
        return admin.partition_leader(self.bootstrap, topic, partition)

    def transaction_coordinator(self, transactional_id: str) -> int:
        return admin.transaction_coordinator(self.bootstrap, transactional_id)

    def group_coordinator(self, group_id: str) -> int:
        return admin.group_coordinator(self.bootstrap, group_id)

    def active_controller(self) -> int:
        return admin.active_controller(self.dist, self.bootstrap)
