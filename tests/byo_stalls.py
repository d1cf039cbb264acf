"""A bring-your-own pipeline that stops short on input partition 1, for the lost-or-unseen
scenarios: it copies every record of the other partitions and commits its offsets to the group.

After STALL_AFTER records of partition 1 it either stops fetching that partition (default: the
records after them are unseen, the group's committed offset stays at the first of them), or,
with --skip, goes on consuming and committing partition 1 without writing those records (lost:
the group committed past them). Run by `eoschaos run --workload byo --command
"python tests/byo_stalls.py [--skip]"` with one instance.
"""

from __future__ import annotations

import os
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

STALLED_PARTITION = 1
STALL_AFTER = 50
COMMIT_EVERY = 100


def main() -> None:
    skip = "--skip" in sys.argv[1:]
    env = os.environ
    bootstrap, source = env["EOSCHAOS_BOOTSTRAP_SERVERS"], env["EOSCHAOS_INPUT_TOPIC"]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": env["EOSCHAOS_GROUP_ID"],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    consumer.subscribe([source])
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 3}
    )
    output = env["EOSCHAOS_OUTPUT_TOPIC"]
    taken, uncommitted = 0, 0
    while True:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            if uncommitted:  # idle: what was copied is written, then its offsets committed
                producer.flush()
                consumer.commit(asynchronous=False)
                uncommitted = 0
            continue
        uncommitted += 1
        if message.partition() == STALLED_PARTITION:
            taken += 1
            if taken > STALL_AFTER and skip:
                continue  # consumed, and committed with the rest: never written
        producer.produce(
            output, key=message.key(), value=message.value(), partition=message.partition()
        )
        producer.poll(0)
        if message.partition() == STALLED_PARTITION and taken == STALL_AFTER and not skip:
            consumer.pause([TopicPartition(source, STALLED_PARTITION)])
        if uncommitted >= COMMIT_EVERY:
            producer.flush()
            consumer.commit(asynchronous=False)
            uncommitted = 0


if __name__ == "__main__":
    main()
