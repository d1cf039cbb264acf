"""Benchmark: `cluster up` to ready, and kill -9 of a broker to rejoined with no URPs.

    .venv/bin/python scripts/bench_cluster.py [--runs 5] [--kafka-version V] [--no-class-sharing]

Prints one line per run and the medians; numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from eoschaos.clusters import kafka_dist, toxiproxy
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.workloads.smoke import create_topic


def one_run(version: str, class_sharing: bool, work: Path) -> tuple[float, float]:
    dist = kafka_dist.resolve(version)
    cluster = ProcessCluster(
        work,
        ClusterSpec(brokers=3),
        dist,
        toxiproxy.server_binary(),
        progress=lambda _m: None,
        class_sharing=class_sharing,
    )
    started = time.monotonic()
    cluster.start()
    ready = time.monotonic() - started
    try:
        create_topic(cluster.bootstrap, "bench", partitions=6, replication=3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10_000):
            producer.produce("bench", value=str(i).encode())
        producer.flush(60)
        victim = cluster.partition_leader("bench", 0)
        started = time.monotonic()
        cluster.kill_node(victim)
        cluster.start_node(victim)
        cluster.wait_healthy(timeout=120)
        restart = time.monotonic() - started
    finally:
        cluster.stop()
    return ready, restart


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kafka-version", default=kafka_dist.DEFAULT_KAFKA_VERSION)
    parser.add_argument("--no-class-sharing", action="store_true")
    args = parser.parse_args()
    readies, restarts = [], []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="eoschaos-bench-") as work:
            ready, restart = one_run(args.kafka_version, not args.no_class_sharing, Path(work))
        readies.append(ready)
        restarts.append(restart)
        print(f"run {i + 1}: ready {ready:.1f}s, kill -9 to rejoined {restart:.1f}s", flush=True)
    print(
        f"Kafka {args.kafka_version}, class sharing {'off' if args.no_class_sharing else 'on'}: "
        f"ready median {statistics.median(readies):.1f}s (max {max(readies):.1f}s), "
        f"restart median {statistics.median(restarts):.1f}s (max {max(restarts):.1f}s)"
    )


if __name__ == "__main__":
    main()
