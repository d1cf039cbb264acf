"""Stranding a connection below TCP (clusters/packet_drop.py) on real sockets and real iptables:
what it holds, what it lets pass, and that nothing is left behind."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from eoschaos.chaos.schedule import FaultEvent
from eoschaos.clusters import packet_drop
from eoschaos.contract.errors import EoschaosError
from eoschaos.run import check_packet_drop

END_TXN, METADATA = 26, 3
needs_iptables = pytest.mark.skipif(
    packet_drop.unavailable() is not None, reason=f"{packet_drop.unavailable()}"
)


def _request(api_key: int, payload: bytes = b"x" * 30) -> bytes:
    """A Kafka-framed request: size, API key, version, correlation id, then the rest."""
    body = struct.pack(">hhi", api_key, 0, 7) + payload
    return struct.pack(">i", len(body)) + body


class Server:
    """A loopback server that keeps what each connection sent, in arrival order."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with conn:
            while chunk := conn.recv(65536):
                self.received.append(chunk)

    def got(self, data: bytes, within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if data in b"".join(self.received):
                return True
            time.sleep(0.02)
        return False


@pytest.fixture
def server():
    server = Server()
    yield server
    server.sock.close()


@pytest.fixture
def tag(tmp_path: Path):
    tag = packet_drop.tag_for(tmp_path)
    yield tag
    packet_drop.release_tagged(tag)


def test_a_rule_for_one_api_key_matches_the_key_after_the_request_size():
    rule = packet_drop.StrandedConnection(40000, 20040, "eoschaos:/r", END_TXN).rule()
    assert rule[rule.index("--u32") + 1] == "0>>22&0x3C@12>>26&0x3C@4>>16=0x1a"
    assert rule[rule.index("--sport") + 1 :][:3] == ["40000", "--dport", "20040"]
    assert "--u32" not in packet_drop.StrandedConnection(40000, 20040, "eoschaos:/r").rule()


def test_the_established_connections_to_a_port_are_found_by_their_client_ports(server):
    client = socket.create_connection(("127.0.0.1", server.port))
    try:
        assert packet_drop.established_client_ports(server.port) == [client.getsockname()[1]]
    finally:
        client.close()


@needs_iptables
def test_a_stranded_endtxn_lands_after_release_while_a_new_connection_passes(server, tag):
    old = socket.create_connection(("127.0.0.1", server.port))
    stranded = packet_drop.strand(server.port, tag, api_key=END_TXN)
    assert [c.client_port for c in stranded] == [old.getsockname()[1]]
    old.sendall(_request(END_TXN, b"stale-commit"))
    old.close()  # the client gave up on it; its kernel still holds the bytes
    assert not server.got(b"stale-commit", within=1.0)
    with socket.create_connection(("127.0.0.1", server.port)) as new:
        new.sendall(_request(END_TXN, b"retried-commit"))
        assert server.got(b"retried-commit", within=2.0)
    assert packet_drop.unsent_bytes(stranded) > 0
    packet_drop.release(stranded)
    assert server.got(b"stale-commit", within=15.0)  # at the next retransmission
    arrived = b"".join(server.received)
    assert arrived.index(b"retried-commit") < arrived.index(b"stale-commit")


@needs_iptables
def test_a_stranded_connection_passes_requests_of_other_api_keys(server, tag):
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        packet_drop.strand(server.port, tag, api_key=END_TXN)
        client.sendall(_request(METADATA, b"metadata"))
        assert server.got(b"metadata", within=2.0)


@needs_iptables
def test_releasing_a_run_dirs_rules_lifts_them_and_only_them(server, tmp_path):
    mine, other = tmp_path / "mine", tmp_path / "other"
    with socket.create_connection(("127.0.0.1", server.port)):
        packet_drop.strand(server.port, packet_drop.tag_for(mine))
        packet_drop.strand(server.port, packet_drop.tag_for(other))
        assert packet_drop.release_tagged(packet_drop.tag_for(mine)) == 1
        assert packet_drop.release_tagged(packet_drop.tag_for(mine)) == 0
        assert packet_drop.release_tagged(packet_drop.tag_for(other)) == 1


def test_a_packet_dropping_fault_without_iptables_is_refused_with_one_line(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EoschaosError) as refused:
        check_packet_drop([FaultEvent(3.0, "stale-endtxn", "instance:0", 12.0, {})])
    assert str(refused.value) == (
        "fault stale-endtxn drops packets with iptables, and iptables is not installed; run as "
        "root (or with CAP_NET_ADMIN), or leave stale-endtxn out of --faults"
    )


@needs_iptables
def test_stopping_a_run_dir_lifts_the_rules_a_killed_run_left(server, tmp_path):
    from eoschaos.clusters.registry import stop_run_dir

    with socket.create_connection(("127.0.0.1", server.port)):
        packet_drop.strand(server.port, packet_drop.tag_for(tmp_path), api_key=END_TXN)
        stop_run_dir(tmp_path)  # what `eoschaos cleanup RUN_DIR` and a cluster's stop call
        assert packet_drop.release_tagged(packet_drop.tag_for(tmp_path)) == 0
