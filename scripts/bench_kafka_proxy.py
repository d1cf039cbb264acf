"""Benchmark: what the Kafka protocol proxy adds to a request's round trip, against Toxiproxy alone.

    .venv/bin/python scripts/bench_kafka_proxy.py [--requests 2000] [--rounds 5]

A 1-broker cluster with the protocol proxy on its client link, reached three ways: straight at
the broker's real listener (the floor), through a Toxiproxy proxy of its own straight to that
listener (Toxiproxy alone, as a cluster without the protocol proxy has it), and through the
cluster's client link (Toxiproxy, then the protocol proxy, idle: no rule). On one connection
per path, raw ApiVersions v0 requests one after another (a request the broker answers itself,
so the path's cost is most of what is timed); the paths take turns in blocks of `--requests`,
`--rounds` times. Prints p50 and p99 per path and what each hop adds. Numbers go to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import tempfile
import time
from pathlib import Path

from eoschaos.clusters import kafka_dist, toxiproxy
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.process_backend import ProcessCluster

REQUEST = struct.pack(">hhih", 18, 0, 7, -1)  # ApiVersions v0, correlation id 7, no client id
FRAME = struct.pack(">i", len(REQUEST)) + REQUEST


def _round_trips(address: str, count: int) -> list[float]:
    """Microseconds per request and answer, `count` times on one connection."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        times = []
        for _ in range(count + 50):  # the first 50 warm the path up, and are left out
            started = time.perf_counter_ns()
            sock.sendall(FRAME)
            (size,) = struct.unpack(">i", reader.read(4))
            reader.read(size)
            times.append((time.perf_counter_ns() - started) / 1000)
        return times[50:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    dist = kafka_dist.resolve(None)
    with tempfile.TemporaryDirectory(prefix="eoschaos-bench-proxy-") as work:
        spec = ClusterSpec(brokers=1, protocol_proxy=True)
        with ProcessCluster(Path(work), spec, dist, toxiproxy.server_binary()) as cluster:
            assert cluster.plan is not None
            real = cluster.plan.nodes[1].real["client"]
            alone = f"127.0.0.1:{_free_port()}"
            cluster.toxiproxy.create_proxy("bench-toxiproxy-alone", alone, f"127.0.0.1:{real}")
            paths = {
                "broker": f"127.0.0.1:{real}",
                "Toxiproxy alone": alone,
                "Toxiproxy + protocol proxy": cluster.client_address(1),
            }
            times: dict[str, list[float]] = {name: [] for name in paths}
            for _ in range(args.rounds):
                for name, address in paths.items():
                    times[name] += _round_trips(address, args.requests)
    print(f"Kafka {dist.version}, {args.rounds} rounds of {args.requests} ApiVersions v0 per path")
    figures = {}
    for name, samples in times.items():
        cuts = statistics.quantiles(samples, n=100)
        figures[name] = (cuts[49], cuts[98])
        print(f"{name:28s} p50 {cuts[49]:7.1f} us  p99 {cuts[98]:7.1f} us")
    for hop, (before, after) in {
        "Toxiproxy": ("broker", "Toxiproxy alone"),
        "the protocol proxy": ("Toxiproxy alone", "Toxiproxy + protocol proxy"),
    }.items():
        p50 = figures[after][0] - figures[before][0]
        p99 = figures[after][1] - figures[before][1]
        print(f"{hop} adds p50 {p50:+.1f} us, p99 {p99:+.1f} us")


if __name__ == "__main__":
    main()
