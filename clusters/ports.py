"""Loopback port plan of a cluster: each node's real listeners and the proxies in front of them.

Every connection a fault may cut goes through a Toxiproxy proxy of its own. A node listens on
real ports that nobody is told; everyone is told proxy addresses:

- `client`: clients reach the node through one proxy;
- `internal`: peers fetch from the node (replication) through one proxy;
- `controller-from-<n>`: node n reaches this node's controller (Raft, broker heartbeats)
  through a proxy of its own, one per node, in front of a controller listener of its own. Each
  node's `controller.quorum.voters` names the proxies "from" itself, so a fault can cut a node's
  controller traffic in *both* directions — what it sends and what is sent to it — without
  touching any other pair of nodes. One real listener per pair, not one shared, because a Raft
  follower on KRaft 3.9+ reconnects to the address the *leader* advertises for the follower's
  controller listener name (KIP-853): with a listener per pair, each advertised at that pair's
  proxy (eoschaos.clusters.broker_config), the follower is sent back through its own proxy.

A cluster may also put eoschaos' Kafka protocol proxy (eoschaos.clusters.kafka_proxy) on every
client link, between the link's Toxiproxy proxy and the real listener: one more port per client
link, and its API just after Toxiproxy's.

A cluster may also have *instance lanes*: one more client listener (and proxy) per workload
instance on every node, so the nemesis can cut one instance off from every broker while the
other clients — the other instances, the seeder, the observer — still reach them all.

Ports come from one contiguous block so a user can reserve it with --base-port.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from eoschaos.contract.errors import EoschaosError

# a key of NodePorts.proxy and NodePorts.real: client, internal, controller-from-<n>, lane<n>
Link = str
_CONTROLLER_LINK_PREFIX = "controller-from-"
_BLOCK = 10  # a node's ports start on a multiple of this
# Below Linux's ephemeral range (32768-60999 by default): a port there can be taken by any
# outgoing connection between the check and the JVM's bind.
_AUTO_BASE_RANGE = range(20000, 32000, 200)


@dataclass(frozen=True)
class NodePorts:
    """Real listener ports (bound by the JVM) and proxy ports (advertised to everyone), both by
    link: each proxy's upstream is the real port of the same link."""

    real: dict[str, int]
    proxy: dict[Link, int]
    # the protocol proxy's listener per client link, upstream of its Toxiproxy proxy (only in a
    # cluster that has the protocol proxy)
    protocol: dict[Link, int] = field(default_factory=dict)


def lane_link(instance: int) -> Link:
    """The link of instance `instance`'s own client listener."""
    return f"lane{instance}"


def controller_link(source: int) -> Link:
    """The link through which node `source` reaches a node's controller."""
    return f"{_CONTROLLER_LINK_PREFIX}{source}"


def is_controller_link(link: Link) -> bool:
    """A link to a node's controller: only voters listen on it."""
    return link.startswith(_CONTROLLER_LINK_PREFIX)


@dataclass(frozen=True)
class PortPlan:
    toxiproxy_api: int
    nodes: dict[int, NodePorts]
    kafka_proxy_api: int | None = None  # the protocol proxy's API, if the cluster has one

    def all_ports(self) -> list[int]:
        ports = [self.toxiproxy_api]
        if self.kafka_proxy_api is not None:
            ports.append(self.kafka_proxy_api)
        for node in self.nodes.values():
            ports += [*node.real.values(), *node.proxy.values(), *node.protocol.values()]
        return ports


def layout(
    base: int, node_ids: list[int], lanes: int = 0, protocol_proxy: bool = False
) -> PortPlan:
    """Deterministic layout: Toxiproxy's API at `base`, the protocol proxy's at base + 1; node i
    at base + stride*i: its client and internal proxies and real ports, a controller proxy and
    real port per node, a proxy and a real port per lane, then the protocol proxy's port per
    client link. The stride is the ports per node rounded up to a multiple of 10."""
    client_links = ["client", *(lane_link(lane) for lane in range(lanes))]
    protocol_ports = len(client_links) if protocol_proxy else 0
    ports_per_node = 4 + 2 * len(node_ids) + 2 * lanes + protocol_ports
    stride = -(-ports_per_node // _BLOCK) * _BLOCK
    nodes = {}
    for node_id in node_ids:
        numbers = iter(range(base + stride * node_id, base + stride * (node_id + 1)))
        proxy = {"client": next(numbers), "internal": next(numbers)}
        real = {"client": next(numbers), "internal": next(numbers)}
        for source in node_ids:
            proxy[controller_link(source)] = next(numbers)
            real[controller_link(source)] = next(numbers)
        for lane in range(lanes):
            proxy[lane_link(lane)] = next(numbers)
            real[lane_link(lane)] = next(numbers)
        protocol = {link: next(numbers) for link in client_links[:protocol_ports]}
        nodes[node_id] = NodePorts(proxy=proxy, real=real, protocol=protocol)
    api = base + 1 if protocol_proxy else None
    return PortPlan(toxiproxy_api=base, nodes=nodes, kafka_proxy_api=api)


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def plan_ports(
    node_ids: list[int], base: int | None, lanes: int = 0, protocol_proxy: bool = False
) -> PortPlan:
    """A plan whose every port is free on 127.0.0.1.

    With an explicit `base`, a busy port is the user's to resolve; without one, the first free
    block from 20000 up is taken.
    """
    if base is not None:
        plan = layout(base, node_ids, lanes, protocol_proxy)
        if min(plan.all_ports()) < 1024 or max(plan.all_ports()) > 65535:
            raise EoschaosError(
                f"--base-port {base} puts ports outside 1024-65535; choose e.g. --base-port 20000"
            )
        busy = [p for p in plan.all_ports() if port_in_use(p)]
        if busy:
            raise EoschaosError(
                f"port {busy[0]} on 127.0.0.1 is already in use; stop what holds it or choose "
                f"another --base-port (this cluster uses {base}..{max(plan.all_ports())})"
            )
        return plan
    for candidate in _AUTO_BASE_RANGE:
        plan = layout(candidate, node_ids, lanes, protocol_proxy)
        if not any(port_in_use(p) for p in plan.all_ports()):
            return plan
    raise EoschaosError("no free block of ports on 127.0.0.1 in 20000-32000; pass --base-port")
