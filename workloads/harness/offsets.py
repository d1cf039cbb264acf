"""Offsets asked of the cluster: a topic's end as a reader of either isolation sees it, and a
group's committed offsets. Used to know when a run caught up and to record the end state."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

ADMIN_TIMEOUT_S = 15.0


def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def partition_ids(admin: AdminClient, topic: str) -> list[int]:
    """The topic's partitions. The broker a client asks may not know a just-created topic
    yet (each broker's metadata cache follows the controller a little behind), so "unknown
    topic" is asked again until ADMIN_TIMEOUT_S."""
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while True:
        described = admin.list_topics(topic=topic, timeout=ADMIN_TIMEOUT_S).topics[topic]
        if described.error is None:
            return sorted(described.partitions)
        not_yet = described.error.code() in (
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError.LEADER_NOT_AVAILABLE,
        )
        if not not_yet or time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic}: {described.error}")
        time.sleep(0.2)


def end_offsets(admin: AdminClient, topic: str, *, committed: bool) -> dict[int, int]:
    """Per partition: the last stable offset (committed=True) or the high watermark.

    A read_committed reader can never get past the LSO; a read_uncommitted one reads to the
    high watermark. The two differ exactly while a transaction is open on the partition.
    An error that means "not yet" (a partition's leader moving: a broker just restarted) is
    asked again until ADMIN_TIMEOUT_S, as a reader would.
    """
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in partition_ids(admin, topic)}
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while True:
        futures = admin.list_offsets(
            request, isolation_level=level, request_timeout=ADMIN_TIMEOUT_S
        )
        try:
            return {tp.partition: f.result().offset for tp, f in futures.items()}
        except KafkaException as exc:
            # a partition's leader moving (a broker just restarted) only means "ask again"
            error = exc.args[0] if exc.args else None
            if not isinstance(error, KafkaError) or not (
                not_yet(error) or error.code() in LEADER_MOVING
            ):
                raise
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def group_offsets(
    bootstrap: str, group: str, topics: tuple[str, ...]
) -> dict[tuple[str, int], int | None]:
    """The group's committed offset per partition of each of `topics` (None: nothing
    committed), in one query.

    Asked in a child process: librdkafka 2.16 can crash (SIGSEGV in rd_kafka_cgrp_op) inside
    list_consumer_group_offsets while the group coordinator moves, and that must not take the
    harness — and the history it is writing — down with it. A crashed query raises; callers
    retry.
    """
    return _in_child(bootstrap, group, ",".join(topics))


def group_lag(
    bootstrap: str, admin: AdminClient, group: str, input_topics: tuple[str, ...]
) -> int | None:
    """How far the group is behind: over every partition it committed offsets for (the inputs,
    and any topic the pipeline consumes internally, e.g. a Streams repartition topic), plus
    the input partitions it never committed, the log end minus the committed offset. None if
    the group committed nothing at all."""
    committed = {k: v for k, v in _in_child(bootstrap, group, "").items() if v is not None}
    if not committed:
        return None
    ends: dict[tuple[str, int], int] = {}
    for topic in {*input_topics, *(t for t, _ in committed)}:
        for p, end in end_offsets(admin, topic, committed=False).items():
            ends[(topic, p)] = end
    return sum(
        end - (committed.get(place) or 0)
        for place, end in ends.items()
        if place in committed or place[0] in input_topics
    )


def _in_child(bootstrap: str, group: str, topics: str) -> dict[tuple[str, int], int | None]:
    child = subprocess.run(
        [sys.executable, "-m", "eoschaos.workloads.harness.offsets", bootstrap, group, topics],
        capture_output=True,
        text=True,
        timeout=ADMIN_TIMEOUT_S * 2,
        check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(
            f"group offset query exited {child.returncode}: {child.stderr.strip()[-300:]}"
        )
    return {(t, int(p)): offset for t, p, offset in json.loads(child.stdout)}


def _query_group_offsets(bootstrap: str, group: str, topics: str) -> list[list]:
    """[topic, partition, offset or None] rows of each of the comma-separated `topics` (topic
    names hold no comma), or of every topic the group committed when it is ""."""
    admin = admin_for(bootstrap)
    partitions = (
        [TopicPartition(t, p) for t in topics.split(",") for p in partition_ids(admin, t)]
        if topics
        else None
    )
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    result = admin.list_consumer_group_offsets(request, request_timeout=ADMIN_TIMEOUT_S)
    return [
        [tp.topic, tp.partition, tp.offset if tp.offset >= 0 else None]
        for tp in result[group].result().topic_partitions
    ]


# The group's coordinator is moving or loading (a broker was just killed or restarted):
# librdkafka does not flag these as retriable on a describe, yet they only mean "ask again".
COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)


# A partition's leader is moving or its broker is down: an offsets query only asks again.
LEADER_MOVING = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._TRANSPORT,
)


def not_yet(error: KafkaError) -> bool:
    """A group query's error that means "not yet": retriable, timed out, coordinator moving."""
    return (
        error.retriable()
        or error.code() == KafkaError._TIMED_OUT
        or error.code() in COORDINATOR_MOVING
    )


def members_with_partitions(
    admin: AdminClient, group: str, timeout: float = ADMIN_TIMEOUT_S
) -> int:
    """How many members hold partitions in a Stable group (0 while it rebalances).

    A describe that times out or finds the coordinator moving also counts as 0: on a loaded
    machine the group coordinator can be slow to answer while the group forms, and that is
    "not yet", not a broken run."""
    try:
        description = admin.describe_consumer_groups([group], request_timeout=timeout)[
            group
        ].result()
    except KafkaException as exc:
        if not_yet(exc.args[0]):
            return 0
        raise
    if description.state != ConsumerGroupState.STABLE:
        return 0
    return sum(1 for member in description.members if member.assignment.topic_partitions)


if __name__ == "__main__":  # the child of _in_child: BOOTSTRAP GROUP TOPICS → JSON rows
    print(json.dumps(_query_group_offsets(*sys.argv[1:4])))
