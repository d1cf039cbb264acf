"""Loopback port plan of a cluster: each node's real listeners and the proxies in front of them.

Every listener that a fault may cut gets its own Toxiproxy proxy, so a node has six ports: three
where the JVM listens and three proxy ports that everyone else (clients, peers, controllers)
is told to use. Ports come from one contiguous block so a user can reserve it with --base-port.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Literal

from eoschaos.errors import EoschaosError

Link = Literal["client", "internal", "controller"]
LINKS: tuple[Link, ...] = ("client", "internal", "controller")
_PORTS_PER_NODE = 10
# Below Linux's ephemeral range (32768-60999 by default): a port there can be taken by any
# outgoing connection between the check and the JVM's bind.
_AUTO_BASE_RANGE = range(20000, 32000, 200)


@dataclass(frozen=True)
class NodePorts:
    """Real listener ports (bound by the JVM) and proxy ports (advertised to everyone)."""

    real: dict[str, int]
    proxy: dict[str, int]


@dataclass(frozen=True)
class PortPlan:
    toxiproxy_api: int
    nodes: dict[int, NodePorts]

    def all_ports(self) -> list[int]:
        ports = [self.toxiproxy_api]
        for node in self.nodes.values():
            ports += list(node.real.values()) + list(node.proxy.values())
        return ports


def layout(base: int, node_ids: list[int]) -> PortPlan:
    """Deterministic layout: API at `base`, node i at base + 10*i + {0..5}."""
    nodes = {}
    for node_id in node_ids:
        first = base + _PORTS_PER_NODE * node_id
        nodes[node_id] = NodePorts(
            proxy={link: first + i for i, link in enumerate(LINKS)},
            real={link: first + 3 + i for i, link in enumerate(LINKS)},
        )
    return PortPlan(toxiproxy_api=base, nodes=nodes)


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def plan_ports(node_ids: list[int], base: int | None) -> PortPlan:
    """A plan whose every port is free on 127.0.0.1.

    With an explicit `base`, a busy port is the user's to resolve; without one, the first free
    block from 20000 up is taken.
    """
    if base is not None:
        plan = layout(base, node_ids)
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
        plan = layout(candidate, node_ids)
        if not any(port_in_use(p) for p in plan.all_ports()):
            return plan
    raise EoschaosError("no free block of ports on 127.0.0.1 in 20000-32000; pass --base-port")
