"""Benchmark: ready time and broker restart time, containers backend next to the process backend.

    .venv/bin/python scripts/bench_containers.py [--runs 3] [--kafka-version V]
        [--backends containers,process]

Same measurements as scripts/bench_cluster.py: **ready** is `start()` until the cluster is
ready (internal topics probed, feature levels read); **restart** is SIGKILL of the leader of
partition 0 of a 6-partition RF-3 topic holding 10,000 records, `start_node`, and
`wait_healthy` (the node answers for itself, no under-replicated partitions). Backends alternate
run by run so both see the same background load. Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from eoschaos.clusters import kafka_dist, toxiproxy
from eoschaos.clusters.base import ClusterBase
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.containers_backend import ContainerCluster
from eoschaos.clusters.images import build_image
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.workloads.smoke import create_topic


def _quiet(_message: str) -> None:
    pass


def one_run(backend: str, dist: kafka_dist.KafkaDistribution, image: str, work: Path):
    spec = ClusterSpec(brokers=3)
    if backend == "containers":
        cluster: ClusterBase = ContainerCluster(work, spec, dist, image, progress=_quiet)
    else:
        cluster = ProcessCluster(work, spec, dist, toxiproxy.server_binary(), progress=_quiet)
    started = time.monotonic()
    cluster.start()
    ready = time.monotonic() - started
    try:
        create_topic(cluster.bootstrap, "bench", partitions=6, replication=3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
        for i in range(10_000):
            producer.produce("bench", value=str(i).encode())
        producer.flush(60)
        del producer  # its connections would otherwise live on through the restart
        victim = cluster.partition_leader("bench", 0)
        started = time.monotonic()
        cluster.kill_node(victim)
        cluster.start_node(victim)
        cluster.wait_healthy(timeout=180)
        restart = time.monotonic() - started
    finally:
        cluster.stop()
    return ready, restart


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kafka-version", default=kafka_dist.DEFAULT_KAFKA_VERSION)
    parser.add_argument("--backends", default="containers,process")
    args = parser.parse_args()
    dist = kafka_dist.resolve(args.kafka_version)
    backends = args.backends.split(",")
    image = build_image(dist, _quiet) if "containers" in backends else ""
    results: dict[str, list[tuple[float, float]]] = {b: [] for b in backends}
    for i in range(args.runs):
        for backend in backends:
            with tempfile.TemporaryDirectory(prefix="eoschaos-bench-") as work:
                ready, restart = one_run(backend, dist, image, Path(work))
            results[backend].append((ready, restart))
            print(f"run {i + 1} {backend}: ready {ready:.1f}s, restart {restart:.1f}s", flush=True)
    for backend, samples in results.items():
        readies = [r for r, _ in samples]
        restarts = [s for _, s in samples]
        print(
            f"Kafka {dist.version}, {backend}: ready median {statistics.median(readies):.1f}s "
            f"(max {max(readies):.1f}s), restart median {statistics.median(restarts):.1f}s "
            f"(max {max(restarts):.1f}s)"
        )


if __name__ == "__main__":
    main()
