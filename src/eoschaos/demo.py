"""`eoschaos demo`: the cluster layer alone, narrated: a real cluster, transactions, a broker kill.

Exit 0 when read_committed isolation held before and after the kill, 1 when it did not.
"""

from __future__ import annotations

import time

from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.workloads.smoke import create_topic, read_all, run_smoke

BEFORE_TOPIC, DURING_TOPIC = "demo-before-kill", "demo-during-kill"


def _say(message: str) -> None:
    print(message, flush=True)


def run_demo(cluster: ProcessCluster) -> int:
    info = cluster.info
    assert info is not None
    _say(
        f"cluster ready in {info.ready_seconds:.1f}s: Kafka {info.kafka_version}, "
        f"metadata.version {info.metadata_version}, transaction.version {info.transaction_version}"
    )
    _say(f"  bootstrap (through Toxiproxy): {info.bootstrap_servers}")
    for topic in (BEFORE_TOPIC, DURING_TOPIC):
        create_topic(cluster.bootstrap, topic, partitions=3, replication=info.replication_factor)

    before = run_smoke(cluster.bootstrap, BEFORE_TOPIC)
    _say(
        f"1. committed {len(before.committed)} records, aborted {len(before.aborted)}; "
        f"read_committed saw {len(before.read_committed)} -> "
        f"{'isolation holds' if before.isolation_holds else 'ISOLATION VIOLATED'}"
    )

    victim = cluster.partition_leader(DURING_TOPIC, 0)
    cluster.kill_node(victim)
    _say(f"2. kill -9 of broker {victim} (leader of {DURING_TOPIC}/0)")
    during = run_smoke(cluster.bootstrap, DURING_TOPIC)
    _say(
        f"   with broker {victim} down: committed {len(during.committed)}, aborted "
        f"{len(during.aborted)}; read_committed saw {len(during.read_committed)} -> "
        f"{'isolation holds' if during.isolation_holds else 'ISOLATION VIOLATED'}"
    )

    started = time.monotonic()
    cluster.start_node(victim)
    cluster.wait_healthy(timeout=120)
    _say(
        f"3. broker {victim} restarted on its data dir and rejoined with no under-replicated "
        f"partitions in {time.monotonic() - started:.1f}s"
    )

    final, expected = [], []
    for topic, result in ((BEFORE_TOPIC, before), (DURING_TOPIC, during)):
        final += read_all(cluster.bootstrap, topic, "read_committed", len(result.committed), 30)
        expected += result.committed
    ok = sorted(final) == sorted(expected) and before.isolation_holds and during.isolation_holds
    _say(
        f"4. final read_committed scan: {len(final)} records, expected {len(expected)} committed "
        f"-> {'PASS' if ok else 'FAIL'}"
    )
    _say(f"logs: {cluster.run_dir}/nodes/<id>/logs/server.log, {cluster.run_dir}/toxiproxy.log")
    return 0 if ok else 1
