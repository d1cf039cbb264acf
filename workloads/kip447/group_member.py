"""A processor's input side: one member of the consumer group, recording every rebalance.

The assignment strategy is cooperative-sticky, as in librdkafka's examples/transactions.c:
incremental (KIP-429) rebalances move only the partitions that change owner, so the other
members keep processing — and keep committing transactions — while an instance joins,
leaves, or comes back as a zombie. It also separates a clean revoke from a *lost*
assignment (session timed out), which is exactly the zombie case.

transactions.c keeps a transaction open across polls, so its rebalance callback commits the
open transaction on revoke and aborts it when the assignment is lost. Here, as in Kafka's
ExactlyOnceMessageProcessor, every transaction begins and ends between two consume() calls,
and rebalance callbacks only run inside consume(): no transaction is ever open when one runs,
so the callbacks have nothing to commit or abort and only record the event.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from eoschaos.contract.history import HistoryWriter
from eoschaos.workloads.harness.lineage import group_generation
from eoschaos.workloads.kip447.config import ProcessorConfig

BATCH_MAX_RECORDS = 200
BATCH_TIMEOUT_S = 0.5
HEARTBEAT_INTERVAL_MS = 1500
COMMITTED_TIMEOUT_S = 10.0
REWIND_DEADLINE_S = 60.0

RebalanceHook = Callable[[list[TopicPartition]], None]


def offsets_field(partitions: list[TopicPartition]) -> list[dict[str, int]]:
    """TopicPartitions as the history's `offsets` array."""
    return [{"partition": tp.partition, "offset": tp.offset} for tp in partitions]


class GroupMember:
    """The consumer of one processor incarnation: subscribe, consume, positions, rewind."""

    def __init__(
        self,
        config: ProcessorConfig,
        history: HistoryWriter,
        identity: dict[str, object],
        *,
        on_revoke: RebalanceHook | None = None,
        on_lost: RebalanceHook | None = None,
    ) -> None:
        self._topic = config.pipeline.input_topic
        self._history = history
        self._identity = identity  # instance, incarnation, txn_id: on every event
        self._on_revoke_hook = on_revoke
        self._on_lost_hook = on_lost
        self.consumer = Consumer(
            {
                "bootstrap.servers": config.bootstrap,
                "group.id": config.pipeline.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": config.settings.session_timeout_ms,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                **config.settings.client_logging(),
            }
        )

    def subscribe(self) -> None:
        self.consumer.subscribe(
            [self._topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
        )

    def generation(self) -> int:
        return group_generation(self.consumer.consumer_group_metadata())

    def consume(self) -> list[Message]:
        """One batch of input records; consumer errors are informational (transactions.c)."""
        records = []
        for message in self.consumer.consume(BATCH_MAX_RECORDS, BATCH_TIMEOUT_S):
            if message.error():
                print(f"consumer error: {message.error()}", file=sys.stderr)
            else:
                records.append(message)
        return records

    def positions(self) -> list[TopicPartition]:
        """The consume position of every assigned partition that has one (Java's example)."""
        assigned = self.consumer.assignment()
        if not assigned:
            return []
        return [tp for tp in self.consumer.position(assigned) if tp.offset >= 0]

    def rewind(self) -> None:
        """Seek every assigned partition back to its committed offset (transactions.c's
        rewind_consumer), so the records of an aborted transaction are processed again.

        The committed-offset fetch of a read_committed consumer waits while a transaction
        with offsets for the partition is pending (KIP-447), so it is retried until it answers.
        """
        assigned = self.consumer.assignment()
        if not assigned:
            return
        deadline = time.monotonic() + REWIND_DEADLINE_S
        while True:
            try:
                committed = self.consumer.committed(assigned, timeout=COMMITTED_TIMEOUT_S)
                break
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise
                print(f"rewind: committed offsets not available yet: {exc}", file=sys.stderr)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def commit(self, offsets: list[TopicPartition]) -> None:
        """A plain (non-transactional) synchronous offset commit."""
        self.consumer.commit(offsets=offsets, asynchronous=False)

    def close(self) -> None:
        """Leave the group (a clean revoke of everything assigned)."""
        self.consumer.close()

    def _record(self, f: str, partitions: list[TopicPartition]) -> None:
        self._history.record(
            "rebalance",
            "ok",
            f,
            partitions=sorted(tp.partition for tp in partitions),
            generation=self.generation(),
            **self._identity,
        )

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("assign", partitions)

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("revoke", partitions)
        if self._on_revoke_hook:
            self._on_revoke_hook(partitions)

    def _lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("lost", partitions)
        if self._on_lost_hook:
            self._on_lost_hook(partitions)
