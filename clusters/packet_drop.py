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
    probe = subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "iptables cannot be used here (it needs root: CAP_NET_ADMIN)"
    return None


def established_client_ports(proxy_port: int) -> list[int]:
    """Source ports of the established connections to `proxy_port` on this host, seen from
    the client's side (their remote port is the proxy's)."""
    ports = set()
    for table in TCP_TABLES:
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state == ESTABLISHED and int(remote.rsplit(":", 1)[1], 16) == proxy_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return sorted(ports)


def unsent_bytes(connection: StrandedConnection) -> int:
    """Bytes the client's kernel still holds for the connection (sent, not acknowledged):
    what the proxy will get late. 0 once the connection is gone."""
    return sum(unsent for _state, unsent in _client_sockets(connection))


def dropped_packets(connection: StrandedConnection) -> int:
    """How many packets the connection's rule has dropped so far: more than 0 means the
    connection holds a stranded request (a rule of `api_key` drops nothing before one)."""
    listed = subprocess.run(
        ["iptables", "-L", "OUTPUT", "-v", "-x", "-n"], capture_output=True, text=True
    )
    ports = f"spt:{connection.client_port} dpt:{connection.proxy_port}"
    return sum(
        int(line.split()[0])
        for line in listed.stdout.splitlines()
        if ports in line and connection.tag in line
    )


def given_up(connection: StrandedConnection) -> bool:
    """The client closed the connection while its kernel still holds bytes for it: it has
    given the stranded request up and retries it elsewhere."""
    return any(state != ESTABLISHED and unsent for state, unsent in _client_sockets(connection))


def _client_sockets(connection: StrandedConnection) -> list[tuple[str, int]]:
    """(state, unsent bytes) of the client's socket of `connection`, if it still exists."""
    found = []
    for table in TCP_TABLES:
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.rsplit(":", 1)[1], 16) == connection.client_port and (
                int(remote.rsplit(":", 1)[1], 16) == connection.proxy_port
            ):
                found.append((fields[3], int(fields[4].split(":")[0], 16)))
    return found


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
    if unavailable() is not None:
        return 0
    listed = subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True, text=True)
    lifted = 0
    for line in listed.stdout.splitlines():
        words = shlex.split(line)
        if words[:1] == ["-A"] and any(word.startswith(prefix) for word in words):
            _iptables("-D", words[1:], missing_ok=True)
            lifted += 1
    return lifted


def _iptables(action: str, rule: list[str], missing_ok: bool = False) -> None:
    result = subprocess.run(["iptables", action, *rule], capture_output=True, text=True)
    if result.returncode != 0 and not missing_ok:
        raise RuntimeError(f"iptables {action} {' '.join(rule)}: {result.stderr.strip()}")
