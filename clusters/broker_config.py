"""server.properties of each node: KRaft, proxied listeners (eoschaos.clusters.ports),
EOS-grade durability.

Topology: the first three nodes (or all, if fewer) are combined broker+controller nodes and
form the controller quorum; further nodes are brokers only. Combined mode gives a real
three-voter quorum without three extra JVMs, which a 2-core machine cannot afford, and it is how
small production clusters run: killing a broker also costs the quorum a voter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eoschaos.clusters.ports import PortPlan, controller_link, lane_link

MAX_VOTERS = 3
INTERNAL_TOPIC_PARTITIONS = 10


@dataclass(frozen=True)
class ClusterSpec:
    """What the user asked for."""

    brokers: int = 3
    kafka_version: str | None = None
    base_port: int | None = None
    broker_overrides: dict[str, str] = field(default_factory=dict)
    # a client listener of its own per workload instance (eoschaos.clusters.ports), so the nemesis
    # can cut one instance off from the cluster (fault isolate-instance)
    instance_lanes: int = 0
    # eoschaos' Kafka protocol proxy on every client link (eoschaos.clusters.kafka_proxy), for
    # the faults that act on chosen requests
    protocol_proxy: bool = False

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    @property
    def voter_ids(self) -> list[int]:
        return self.node_ids[:MAX_VOTERS]

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    @property
    def min_insync_replicas(self) -> int:
        return min(2, self.replication_factor)


def controller_listener(source: int) -> str:
    """The name of the controller listener node `source` reaches a voter by."""
    return f"CONTROLLER_FROM_{source}"


def broker_properties(
    spec: ClusterSpec,
    plan: PortPlan,
    node_id: int,
    data_dir: Path,
    *,
    bind_host: str = "127.0.0.1",
    peer_proxy_host: str = "127.0.0.1",
) -> dict[str, str]:
    """`bind_host`: where the node listens; `peer_proxy_host`: where the proxies of the
    inter-broker and controller listeners listen (a container reaches the host's proxies at its
    network's gateway, not at 127.0.0.1). Client proxies are always on 127.0.0.1."""
    ports = plan.nodes[node_id]
    # Its own controller listener first: a node reaches the controllers by the first name, and
    # a KRaft 3.9+ follower looks the leader's advertised endpoint up under that name.
    own_first = [node_id, *(n for n in spec.node_ids if n != node_id)]
    voters = ",".join(
        f"{v}@{peer_proxy_host}:{plan.nodes[v].proxy[controller_link(node_id)]}"
        for v in spec.voter_ids
    )
    is_voter = node_id in spec.voter_ids
    lanes = [lane_link(n) for n in range(spec.instance_lanes)]
    listeners = [
        f"CLIENT://{bind_host}:{ports.real['client']}",
        f"INTERNAL://{bind_host}:{ports.real['internal']}",
        *(f"{lane.upper()}://{bind_host}:{ports.real[lane]}" for lane in lanes),
    ]
    # A client is told the addresses of the listener it asked on: one bootstrapped through a
    # lane's proxies stays on that lane for every broker it then talks to.
    advertised = [
        f"CLIENT://127.0.0.1:{ports.proxy['client']}",
        f"INTERNAL://{peer_proxy_host}:{ports.proxy['internal']}",
        *(f"{lane.upper()}://127.0.0.1:{ports.proxy[lane]}" for lane in lanes),
    ]
    if is_voter:
        # A listener per source node, each advertised at that pair's proxy (eoschaos.clusters.
        # ports): whoever asks a voter for its controller endpoint under its own name is sent
        # to its own proxy, so a cut of that pair holds the Raft fetches too.
        for source in own_first:
            link = controller_link(source)
            listeners.append(f"{controller_listener(source)}://{bind_host}:{ports.real[link]}")
            advertised.append(
                f"{controller_listener(source)}://{peer_proxy_host}:{ports.proxy[link]}"
            )
    controller_names = [controller_listener(n) for n in (own_first if is_voter else [node_id])]
    rf = str(spec.replication_factor)
    min_isr = str(spec.min_insync_replicas)
    props = {
        "node.id": str(node_id),
        "process.roles": "broker,controller" if is_voter else "broker",
        "controller.quorum.voters": voters,
        "controller.listener.names": ",".join(controller_names),
        "listeners": ",".join(listeners),
        # Everyone — clients and peers — is told the proxy address, never the real port.
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(
            f"{name}:PLAINTEXT"
            for name in ("CLIENT", "INTERNAL", *controller_names, *(lane.upper() for lane in lanes))
        ),
        "inter.broker.listener.name": "INTERNAL",
        "log.dirs": str(data_dir),
        "num.partitions": "3",
        "default.replication.factor": rf,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": str(INTERNAL_TOPIC_PARTITIONS),
        "unclean.leader.election.enable": "false",
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "100",
        # A dead follower leaves the ISR after 10 s instead of 30 s; faults heal faster.
        "replica.lag.time.max.ms": "10000",
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "6000",
        "controlled.shutdown.enable": "true",
        # Faster re-election after a split vote or a killed leader (defaults: 1000 ms / 2000 ms).
        "controller.quorum.election.backoff.max.ms": "300",
    }
    props.update(spec.broker_overrides)
    return props


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in props.items())
