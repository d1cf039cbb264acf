"""Examples of docs/byo.md's `--expect`: expected-output functions, and a pipeline to judge.

`kip447_output` is what the kip447 processor (a copy pipeline: each output record is its input
record with "-ok" appended to the value) must leave in its output topic, key by key.

`counts_per_partition` is what a pipeline counting the records of each input partition must
leave: {"count": n} under key `partition-<p>`. Running this module starts such a counter, a
known-bad one: it keeps its counts in memory only, so whoever takes a partition over (after a
crash, or a rebalance) counts it from zero again, and its final counts come out short.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator

from confluent_kafka import Consumer, Producer

from eoschaos.contract import instance_env
from eoschaos.workloads.harness.expected import InputRecord
from eoschaos.workloads.harness.lineage import transform


def kip447_output(records: Iterator[InputRecord]) -> dict[str, str]:
    return {str(record.id): transform(record.value).decode() for record in records}


def counts_per_partition(records: Iterator[InputRecord]) -> dict[str, dict[str, int]]:
    counts = Counter(record.partition for record in records)
    return {f"partition-{p}": {"count": n} for p, n in counts.items()}


def run_counter() -> None:
    """One instance of the in-memory counter, configured by the EOSCHAOS_* environment."""
    env = os.environ
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    common = {"bootstrap.servers": env[instance_env.BOOTSTRAP_SERVERS], "log_level": 3}
    consumer = Consumer(
        {
            **common,
            "group.id": env[instance_env.GROUP_ID],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = Producer({**common, "acks": "all"})
    output = env[instance_env.OUTPUT_TOPIC]
    consumer.subscribe([env[instance_env.INPUT_TOPIC]])
    counts: Counter[int] = Counter()
    while not stop.is_set():
        batch = [m for m in consumer.consume(500, 0.5) if m.error() is None]
        for message in batch:
            counts[message.partition()] += 1
        for partition in {message.partition() for message in batch}:
            value = json.dumps({"count": counts[partition]})
            producer.produce(output, key=f"partition-{partition}", value=value)
        producer.flush()
        if batch:
            consumer.commit(asynchronous=False)
    consumer.close()


if __name__ == "__main__":
    run_counter()
