"""One Cluster protocol, and what every backend shares.

The nemesis and the run driver see a cluster only through `Cluster`. Both backends
(process_backend: JVMs on loopback; containers_backend: one container per node) derive from
`ClusterBase`, which holds everything between the clients and the nodes — every listener
behind its own Toxiproxy proxy (ports.py), the start sequence and its readiness wait, the
cluster facts (cluster.json), links and toxics, and the "who leads what" questions. A backend
owns only its nodes' lifecycle. An operation one backend alone can do is a method of that
backend only (ProcessCluster.attach, ContainerCluster.disconnect_node), never one that raises
in the other.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from confluent_kafka import KafkaError, KafkaException

from eoschaos.clusters import admin, processes
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.kafka_dist import KafkaDistribution, java_major_version
from eoschaos.clusters.kafka_proxy import KafkaProxyAPI, proxy_binary
from eoschaos.clusters.ports import (
    Link,
    PortPlan,
    controller_link,
    is_controller_link,
    lane_link,
    plan_ports,
)
from eoschaos.clusters.toxiproxy import ToxiproxyAPI
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import java_binary
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import CLUSTER_FILE

BROKER_JVM = [
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
    kafka_proxy_api: str = ""  # the protocol proxy's, if the cluster has one


def new_cluster_id() -> str:
    """A random KRaft cluster id, never starting with '-' (the storage tool would read an option).

    Kafka's own Uuid.randomUuid() retries for the same reason.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class Cluster(Protocol):
    """What the nemesis and the run driver use of a cluster, whatever its backend."""

    run_dir: Path
    spec: ClusterSpec
    dist: KafkaDistribution
    info: ClusterInfo | None

    @property
    def bootstrap(self) -> str: ...
    def start(self, timeout: float | None = None) -> ClusterInfo: ...
    def stop(self) -> None: ...
    def client_address(self, node_id: int) -> str: ...
    def instance_bootstrap(self, instance: int) -> str: ...
    def client_links(self) -> list[Link]: ...
    def peer_links(self, node_id: int) -> list[tuple[int, Link]]: ...
    def node_alive(self, node_id: int) -> bool: ...
    def start_node(self, node_id: int) -> None: ...
    def kill_node(self, node_id: int) -> None: ...
    def stop_node(self, node_id: int, timeout: float = 30.0) -> bool: ...
    def pause_node(self, node_id: int) -> None: ...
    def resume_node(self, node_id: int) -> None: ...
    def wait_healthy(self, timeout: float = 60.0) -> admin.Health: ...
    def set_link_enabled(self, node_id: int, link: Link, enabled: bool) -> None: ...
    def add_toxic(
        self,
        node_id: int,
        link: Link,
        toxic_type: str,
        *,
        stream: str = "downstream",
        attributes: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> str: ...
    def remove_toxic(self, node_id: int, link: Link, name: str) -> None: ...
    def heal_network(self) -> None: ...
    @property
    def kafka_proxy(self) -> KafkaProxyAPI: ...
    def partition_leader(self, topic: str, partition: int) -> int: ...
    def transaction_coordinator(self, transactional_id: str) -> int: ...
    def group_coordinator(self, group_id: str) -> int: ...
    def data_dirs(self) -> dict[int, Path]: ...
    def active_controller(self) -> int: ...
    def quorum_leader_seen_by(self, node_id: int) -> int: ...


class ClusterBase(ABC):
    """A KRaft cluster behind Toxiproxy; subclasses say how a node runs."""

    backend: ClassVar[str]
    start_timeout_s: ClassVar[float]

    def __init__(
        self,
        run_dir: Path,
        spec: ClusterSpec,
        dist: KafkaDistribution,
        toxiproxy_bin: Path,
        progress: Callable[[str], None] = progress_to_stderr,
    ) -> None:
        self.run_dir = run_dir.resolve()
        self.spec = spec
        self.dist = dist
        self.toxiproxy_bin = toxiproxy_bin
        self.progress = progress
        self.plan: PortPlan | None = None
        self.info: ClusterInfo | None = None
        self._popens: dict[str, subprocess.Popen] = {}
        self._t0 = time.monotonic()

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> ClusterBase:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid_dir(self) -> Path:
        return self.run_dir / "pids"

    def node_dir(self, node_id: int) -> Path:
        return self.run_dir / "nodes" / str(node_id)

    def data_dirs(self) -> dict[int, Path]:
        """Each node's log.dirs on this machine (both backends keep them under node_dir)."""
        return {node_id: self.node_dir(node_id) / "data" for node_id in self.spec.node_ids}

    def start(self, timeout: float | None = None) -> ClusterInfo:
        """Start Toxiproxy and all nodes, wait until ready; on any failure stop what started."""
        self._t0 = time.monotonic()
        if self.dist.major >= 4 and java_major_version(java_binary()) < 17:
            raise EoschaosError(f"Kafka {self.dist.version} needs Java 17+; set JAVA_HOME to one")
        self.plan = plan_ports(
            self.spec.node_ids,
            self.spec.base_port,
            self.spec.instance_lanes,
            self.spec.protocol_proxy,
        )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start()
            return self._await_ready(timeout or self.start_timeout_s)
        except BaseException:
            self._say("start failed; stopping everything that was started")
            self.stop()
            raise

    @abstractmethod
    def _start(self) -> None:
        """Create Toxiproxy, the proxies and the nodes, and start the nodes."""

    @abstractmethod
    def stop(self) -> None:
        """Stop (or remove) everything of this cluster; logs and data stay in run_dir."""

    def _await_ready(self, timeout: float) -> ClusterInfo:
        """Every node registered, the internal topics usable, nothing under-replicated; then
        the facts, finalized feature levels included, go to cluster.json."""
        assert self.plan is not None
        deadline = time.monotonic() + timeout
        expected = set(self.spec.node_ids)
        admin.wait_healthy(self.bootstrap, expected, timeout, self._watchdog_progress)
        self._say("brokers registered; creating and probing the internal topics")
        # The feature levels were fixed when the log dirs were formatted: Kafka's tool (a JVM
        # of its own) reads them while the probe waits on the brokers.
        with ThreadPoolExecutor(max_workers=1) as pool:
            reading = pool.submit(admin.finalized_features, self.dist, self.bootstrap)
            self._probe_internal_topics(deadline)
            admin.wait_healthy(
                self.bootstrap,
                expected,
                max(5.0, deadline - time.monotonic()),
                self._watchdog_progress,
            )
            features = reading.result()
        self.info = ClusterInfo(
            run_dir=str(self.run_dir),
            backend=self.backend,
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
            kafka_proxy_api=self.kafka_proxy.url if self.spec.protocol_proxy else "",
        )
        (self.run_dir / CLUSTER_FILE).write_text(json.dumps(asdict(self.info), indent=2) + "\n")
        self._say(
            f"ready: Kafka {self.dist.version} ({self.backend} backend), metadata.version "
            f"{self.info.metadata_version}, transaction.version {self.info.transaction_version}"
        )
        return self.info

    def _probe_internal_topics(self, deadline: float) -> None:
        """admin.probe_internal_topics, once more if librdkafka dropped its bootstrap connection
        under the request (_DESTROY_BROKER: seen when it swaps bootstrap handles for the brokers
        that metadata names, right after the brokers registered)."""
        for attempt in (1, 2):
            try:
                admin.probe_internal_topics(
                    self.bootstrap,
                    self.spec.replication_factor,
                    max(10.0, deadline - time.monotonic()),
                )
                return
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._DESTROY_BROKER or attempt == 2:
                    raise

    @abstractmethod
    def _watchdog_progress(self, message: str) -> None:
        """Report start progress; fail fast if a node died instead of waiting for the timeout."""

    def _say(self, message: str) -> None:
        self.progress(f"{time.monotonic() - self._t0:5.1f}s {message}")

    def _start_toxiproxy(self) -> None:
        assert self.plan is not None
        cmd = [str(self.toxiproxy_bin), "-host", "127.0.0.1", "-port", str(self.plan.toxiproxy_api)]
        popen, _ = processes.spawn("toxiproxy", cmd, self.run_dir / "toxiproxy.log", self.pid_dir)
        self._popens["toxiproxy"] = popen
        self.toxiproxy.wait_ready(timeout=15)

    def _start_kafka_proxy(self) -> None:
        """The protocol proxy, if the spec asks for it, with a lane per node and client link
        (named as the link's Toxiproxy proxy) in front of the node's real listener."""
        assert self.plan is not None
        if self.plan.kafka_proxy_api is None:
            return
        cmd = [str(proxy_binary()), "-api", f"127.0.0.1:{self.plan.kafka_proxy_api}"]
        popen, _ = processes.spawn(
            "kafka-proxy", cmd, self.run_dir / "kafka-proxy.log", self.pid_dir
        )
        self._popens["kafka-proxy"] = popen
        self.kafka_proxy.wait_ready(timeout=15)
        for node_id, ports in self.plan.nodes.items():
            for link, port in ports.protocol.items():
                self.kafka_proxy.add_lane(
                    self.proxy_name(node_id, link),
                    listen=f"127.0.0.1:{port}",
                    upstream=f"127.0.0.1:{ports.real[link]}",
                )

    def _format_log_dirs(self, cluster_id: str) -> None:
        """Format every node's KRaft log dir on the host (the same dirs every backend uses)."""
        for node_id in self.spec.node_ids:
            self._write_node_config(node_id)
        self._say(
            f"formatting {len(self.spec.node_ids)} KRaft log dirs (Kafka {self.dist.version})"
        )
        with ThreadPoolExecutor(max_workers=len(self.spec.node_ids)) as pool:
            list(pool.map(lambda n: self._format(n, cluster_id), self.spec.node_ids))

    @abstractmethod
    def _write_node_config(self, node_id: int) -> None: ...

    def _peer_proxy_host(self) -> str:
        """Where the nodes reach their peers' proxies."""
        return "127.0.0.1"

    def _create_proxies(self) -> None:
        """A proxy per node and link: client links on loopback, peer links where the nodes
        reach them; every upstream is the node's real listener port on loopback, or the
        protocol proxy's lane in front of it."""
        assert self.plan is not None
        client_links = self.client_links()
        for node_id, ports in self.plan.nodes.items():
            for link in self.proxied_links(node_id):
                host = "127.0.0.1" if link in client_links else self._peer_proxy_host()
                upstream = ports.protocol.get(link, ports.real[link])
                self.toxiproxy.create_proxy(
                    self.proxy_name(node_id, link),
                    listen=f"{host}:{ports.proxy[link]}",
                    upstream=f"127.0.0.1:{upstream}",
                )

    def _format(self, node_id: int, cluster_id: str) -> None:
        props = self.node_dir(node_id) / "server.properties"
        cmd = [
            java_binary(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",  # a short-lived tool
            *self.dist.logging_args(self.node_dir(node_id) / "logs"),
            "-cp",
            self.dist.classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(props),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise admin.ClusterNotReady(
                f"formatting node {node_id} failed: {(proc.stdout + proc.stderr).strip()[-400:]}"
            )

    # ----------------------------------------------------------------- addresses and links

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
        return [link for link in links if voter or not is_controller_link(link)]

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

    @property
    def kafka_proxy(self) -> KafkaProxyAPI:
        """The protocol proxy's API; a cluster started without it has none."""
        assert self.plan is not None
        if self.plan.kafka_proxy_api is None:
            raise EoschaosError(
                "this cluster has no Kafka protocol proxy; start it with "
                "ClusterSpec(protocol_proxy=True) for faults that act on chosen requests"
            )
        return KafkaProxyAPI("127.0.0.1", self.plan.kafka_proxy_api)

    # ----------------------------------------------------------------- node operations

    @abstractmethod
    def node_alive(self, node_id: int) -> bool: ...

    @abstractmethod
    def node_pid(self, node_id: int) -> int | None:
        """The broker JVM's PID on the host, while it runs."""

    @abstractmethod
    def start_node(self, node_id: int) -> None:
        """Start (or restart) node `node_id` on its existing data dir."""

    @abstractmethod
    def kill_node(self, node_id: int) -> None:
        """kill -9: no controlled shutdown, no flush; the data dir stays for the restart."""

    @abstractmethod
    def stop_node(self, node_id: int, timeout: float = 30.0) -> bool:
        """Clean stop (SIGTERM, controlled shutdown). True if it exited before `timeout`."""

    @abstractmethod
    def pause_node(self, node_id: int) -> None:
        """Freeze the node: its sockets stay open, nothing answers (a GC-pause-like fault)."""

    @abstractmethod
    def resume_node(self, node_id: int) -> None: ...

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
        """Re-enable every proxy, remove every toxic and protocol rule."""
        self.toxiproxy.reset()
        if self.spec.protocol_proxy:
            self.kafka_proxy.reset()

    # ----------------------------------------------------------------- who does what

    def partition_leader(self, topic: str, partition: int) -> int:
        return admin.partition_leader(self.bootstrap, topic, partition)

    def transaction_coordinator(self, transactional_id: str) -> int:
        return admin.transaction_coordinator(self.bootstrap, transactional_id)

    def group_coordinator(self, group_id: str) -> int:
        return admin.group_coordinator(self.bootstrap, group_id)

    def active_controller(self) -> int:
        return admin.active_controller(self.dist, self.bootstrap)

    def quorum_leader_seen_by(self, node_id: int) -> int:
        """The Raft leader node `node_id` follows (-1: none), from its own quorum-state file:
        no request, so a node cut off by a fault cannot stall the question (an admin tool asking
        through the cluster waits 30 s on a silently cut node)."""
        state = self.data_dirs()[node_id] / admin.METADATA_LOG_DIR / "quorum-state"
        return int(json.loads(state.read_text())["leaderId"])
