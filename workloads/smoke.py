"""The smallest transactional workload: one committed and one aborted transaction, read back.

Used by the demo and the cluster tests to prove the cluster does transactions and
read_committed isolation through the proxies, before any real pipeline runs.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoschaos.clusters import admin


@dataclass(frozen=True)
class SmokeResult:
    committed: list[str]
    aborted: list[str]
    read_committed: list[str]

    @property
    def isolation_holds(self) -> bool:
        """read_committed returned exactly the committed values, nothing of the aborted ones."""
        return sorted(self.read_committed) == sorted(self.committed)


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    admin.create_topics(
        AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}),
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication)],
        30,
    )


def transactional_producer(bootstrap: str, transactional_id: str | None = None) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id or f"smoke-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 30000,
            "message.timeout.ms": 20000,
            "log_level": 3,  # retries while a broker is down are expected, not news
        }
    )
    producer.init_transactions(30)
    return producer


def produce_transaction(producer: Producer, topic: str, values: list[str], *, commit: bool) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value.encode())
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)  # the records reach the log, so aborting them means something
        producer.abort_transaction(30)


def read_all(
    bootstrap: str, topic: str, isolation: str, expect_at_least: int, timeout: float
) -> list[str]:
    """Read `topic` from the beginning until `expect_at_least` values or `timeout` seconds."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"smoke-reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        values: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(values) < expect_at_least:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            values.append(msg.value().decode())
        # a short extra drain: anything beyond what we expected is the interesting part
        drain_until = time.monotonic() + 1.0
        while time.monotonic() < drain_until:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                values.append(msg.value().decode())
        return values
    finally:
        consumer.close()


def run_smoke(bootstrap: str, topic: str) -> SmokeResult:
    """Commit five records and abort five on an empty `topic`, then read it read_committed."""
    committed = [f"committed-{i}" for i in range(5)]
    aborted = [f"aborted-{i}" for i in range(5)]
    producer = transactional_producer(bootstrap)
    produce_transaction(producer, topic, committed, commit=True)
    produce_transaction(producer, topic, aborted, commit=False)
    seen = read_all(bootstrap, topic, "read_committed", len(committed), timeout=30)
    return SmokeResult(committed=committed, aborted=aborted, read_committed=seen)
