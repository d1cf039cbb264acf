"""Stranding a connection: its packets dropped below TCP, so its bytes arrive late.

Toxiproxy keeps one connection's bytes in order and cannot hold one connection while a new one
to the same proxy passes (docs/schedules.md). The kernel can. Packets of an established
connection that iptables drops are retransmitted by the client's kernel with a growing backoff,
also after the client gave the connection up and closed it. They reach the proxy at the first
retransmission after the drop is lifted, while a request the client retried on a new connection
(a new source port) went through long before. That reorders one client's requests the way
KAFKA-17754 needs.

Needs iptables and CAP_NET_ADMIN, which eoschaos does not assume: `unavailable()` says why not.
Each rule carries a comment naming its cluster's run directory, so `eoschaos cleanup` can lift
what a killed run left behind; a stale rule would drop whatever connection reuses its port.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

COMMENT_PREFIX = "eoschaos:"
TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
ESTABLISHED = "01"  # the state column of /proc/net/tcp


# u32 match on a TCP segment whose payload starts a Kafka request of one API key: skip the IP
# header (its IHL), then the TCP header (its data offset); a request's API key is the 16 bits
# after its 4-byte size. A pure ACK has no payload there and does not match.
API_KEY_MATCH = "0>>22&0x3C@12>>26&0x3C@4>>16={api_key:#x}"


@dataclass(frozen=True)
class StrandedConnection:
    """A client's connection to a proxy port, whose client → proxy packets are dropped: all
    of them, or from the first segment that starts a request of `api_key` on (TCP delivers
    nothing past a missing segment, so what follows it on the connection waits too)."""

    client_port: int
    proxy_port: int
    tag: str
    api_key: int | None = None

    def rule(self) -> list[str]:
        match = []
        if self.api_key is not None:
            match = ["-m", "u32", "--u32", API_KEY_MATCH.format(api_key=self.api_key)]
        return [
            "OUTPUT",
            *("-o", "lo", "-p", "tcp"),
            *("--sport", str(self.client_port), "--dport", str(self.proxy_port)),
            *match,
            *("-m", "comment", "--comment", self.tag),
            *("-j", "DROP"),
        ]


def tag_for(run_dir: Path) -> str:
    return f"{COMMENT_PREFIX}{run_dir.resolve()}"


def unavailable() -> str | None:
    """Why connections cannot be stranded here, or None if they can."""
    if shutil.which("iptables") is None:
        return "iptables is not installed"
    if _listed_rules() is None:
        return "iptables cannot be used here (it needs root: CAP_NET_ADMIN)"
    return None


def established_client_ports(proxy_port: int) -> list[int]:
    """Source ports of the established connections to `proxy_port` on this host, seen from
    the client's side (their remote port is the proxy's)."""
    return sorted(
        {
            local
            for local, remote, state, _unsent in _sockets()
            if state == ESTABLISHED and remote == proxy_port
        }
    )


def unsent_bytes(connections: list[StrandedConnection]) -> int:
    """Bytes the clients' kernels still hold for the connections (sent, not acknowledged):
    what the proxy will get late. 0 once the connections are gone."""
    ends = {(c.client_port, c.proxy_port) for c in connections}
    return sum(unsent for local, remote, _state, unsent in _sockets() if (local, remote) in ends)


def given_up(connections: list[StrandedConnection]) -> list[StrandedConnection]:
    """The connections their client closed while its kernel still holds bytes for them: it
    gave the stranded request up and retries it elsewhere."""
    closed = {
        (local, remote)
        for local, remote, state, unsent in _sockets()
        if state != ESTABLISHED and unsent
    }
    return [c for c in connections if (c.client_port, c.proxy_port) in closed]


def holding_a_request(connections: list[StrandedConnection]) -> list[StrandedConnection]:
    """The connections whose rule has dropped a packet: they hold a stranded request (a rule
    of `api_key` drops nothing before one). One listing of the rules' counters for all."""
    listed = subprocess.run(
        ["iptables", "-L", "OUTPUT", "-v", "-x", "-n"], capture_output=True, text=True
    )
    dropped: dict[str, int] = {}
    for line in listed.stdout.splitlines():
        if COMMENT_PREFIX in line and "spt:" in line:
            ports = " ".join(word for word in line.split() if word.startswith(("spt:", "dpt:")))
            dropped[ports] = dropped.get(ports, 0) + int(line.split()[0])
    return [c for c in connections if dropped.get(f"spt:{c.client_port} dpt:{c.proxy_port}", 0)]


def _sockets() -> Iterator[tuple[int, int, str, int]]:
    """(local port, remote port, state, unsent bytes) of every TCP socket on this host."""
    for table in TCP_TABLES:
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            yield (
                int(local.rsplit(":", 1)[1], 16),
                int(remote.rsplit(":", 1)[1], 16),
                fields[3],
                int(fields[4].split(":")[0], 16),
            )


def strand(proxy_port: int, tag: str, api_key: int | None = None) -> list[StrandedConnection]:
    """Drop, from now on, what the established connections to `proxy_port` send it (every
    packet, or from their next request of `api_key` on). New connections pass: their source
    ports differ."""
    stranded = []
    for client_port in established_client_ports(proxy_port):
        connection = StrandedConnection(client_port, proxy_port, tag, api_key)
        _iptables("-I", connection.rule())
        stranded.append(connection)
    return stranded


def release(connections: list[StrandedConnection]) -> None:
    for connection in connections:
        _iptables("-D", connection.rule(), missing_ok=True)


def release_tagged(prefix: str = COMMENT_PREFIX) -> int:
    """Lift every rule whose tag starts with `prefix` (a killed run's leftovers; by default
    every eoschaos rule); returns how many."""
    listed = _listed_rules() if shutil.which("iptables") else None
    lifted = 0
    for line in (listed or "").splitlines():
        words = shlex.split(line)
        if words[:1] == ["-A"] and any(word.startswith(prefix) for word in words):
            _iptables("-D", words[1:], missing_ok=True)
            lifted += 1
    return lifted


def _listed_rules() -> str | None:
    """The OUTPUT chain's rules (`iptables -S`), or None if iptables refuses (not root)."""
    listed = subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True, text=True)
    return listed.stdout if listed.returncode == 0 else None


def _iptables(action: str, rule: list[str], missing_ok: bool = False) -> None:
    result = subprocess.run(["iptables", action, *rule], capture_output=True, text=True)
    if result.returncode != 0 and not missing_ok:
        raise RuntimeError(f"iptables {action} {' '.join(rule)}: {result.stderr.strip()}")
