"""Mode alos: the usual at-least-once pipeline, no transactions at all (a known-bad mode).

An idempotent producer writes the output; every ~2 s the consumer commits, per partition,
the offset just past the longest prefix of input records whose output was acknowledged.
Nothing ties output and offsets together, so a crash between the two duplicates output.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from eoschaos.contract.history import HistoryWriter
from eoschaos.workloads.harness.lineage import TransactionTag, lineage_headers, transform
from eoschaos.workloads.kip447.config import ProcessorConfig
from eoschaos.workloads.kip447.group_member import GroupMember, offsets_field

COMMIT_INTERVAL_S = 2.0
REVOKE_FLUSH_TIMEOUT_S = 10.0


class Undeliverable(Exception):
    """An output record failed for good: committing past it would lose its input."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass
class _Consumed:
    """One consumed input record; `acked` turns true on its output's delivery report."""

    offset: int
    acked: bool = False


class _AckedPrefix:
    """Per input partition, the consumed records in offset order, until their output is acked;
    and the offset just past the acked prefix, versus the offset last committed."""

    def __init__(self) -> None:
        self._pending: dict[int, deque[_Consumed]] = {}
        self._committable: dict[int, int] = {}
        self._committed: dict[int, int] = {}

    def consumed(self, partition: int, offset: int) -> _Consumed:
        record = _Consumed(offset)
        self._pending.setdefault(partition, deque()).append(record)
        return record

    def uncommitted(self, partitions: set[int] | None = None) -> dict[int, int]:
        """Move past acked records; return the committable offsets not yet committed."""
        for partition, queue in self._pending.items():
            while queue and queue[0].acked:
                self._committable[partition] = queue.popleft().offset + 1
        return {
            partition: offset
            for partition, offset in sorted(self._committable.items())
            if (partitions is None or partition in partitions)
            and self._committed.get(partition) != offset
        }

    def committed(self, offsets: dict[int, int]) -> None:
        self._committed.update(offsets)

    def forget(self, partitions: set[int]) -> None:
        for partition in partitions:
            for table in (self._pending, self._committable, self._committed):
                table.pop(partition, None)


class AtLeastOnceProcessor:
    def __init__(
        self,
        config: ProcessorConfig,
        history: HistoryWriter,
        instance: int,
        incarnation: int,
        stop: threading.Event,
    ) -> None:
        self._config = config
        self._history = history
        self._stop = stop
        self._identity: dict[str, Any] = {"instance": instance, "incarnation": incarnation}
        self._acked = _AckedPrefix()
        self._failed: str | None = None
        self._producer = Producer(
            {
                "bootstrap.servers": config.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                **config.settings.client_logging(),
            }
        )
        self._member = GroupMember(
            config, history, self._identity, on_revoke=self._revoked, on_lost=self._lost
        )

    def run(self) -> None:
        """Process until stop is requested; raises Undeliverable if output failed for good."""
        self._member.subscribe()
        last_commit = time.monotonic()
        try:
            while not self._stop.is_set():
                records = self._member.consume()
                if records:
                    self._produce(records)
                self._producer.poll(0)
                if self._failed:
                    raise Undeliverable(self._failed)
                if time.monotonic() - last_commit >= COMMIT_INTERVAL_S:
                    self._commit_acked()
                    last_commit = time.monotonic()
        finally:
            self._member.close()  # revokes everything: flush and commit what was acked
            self._producer.flush(REVOKE_FLUSH_TIMEOUT_S)

    def _produce(self, records: list[Message]) -> None:
        tag = TransactionTag(generation=self._member.generation(), fate="none", **self._identity)
        consumed: dict[int, int] = {}
        for record in records:
            consumed_record = self._acked.consumed(record.partition(), record.offset())
            headers = lineage_headers(
                tag, record.topic(), record.partition(), record.offset(), int(record.key())
            )
            while True:
                try:
                    self._producer.produce(
                        self._config.pipeline.output_topic,
                        key=record.key(),
                        value=transform(record.value()),
                        headers=headers,
                        on_delivery=lambda error, _msg, c=consumed_record: self._delivered(
                            error, c
                        ),
                    )
                    break
                except BufferError:
                    self._producer.poll(0.1)
            consumed[record.partition()] = record.offset() + 1
        self._history.record(
            "txn",
            "ok",
            "produce",
            generation=tag.generation,
            fate="none",
            count=len(records),
            offsets=[{"partition": p, "offset": o} for p, o in sorted(consumed.items())],
            **self._identity,
        )

    def _delivered(self, error: KafkaError | None, record: _Consumed) -> None:
        if error is None:
            record.acked = True
        elif self._failed is None:
            print(f"output of input offset {record.offset} undeliverable: {error}", file=sys.stderr)
            self._failed = error.name()

    def _commit_acked(self, partitions: set[int] | None = None) -> None:
        due = self._acked.uncommitted(partitions)
        if not due:
            return
        offsets = [TopicPartition(self._config.pipeline.input_topic, p, o) for p, o in due.items()]
        fields: dict[str, Any] = {
            "generation": self._member.generation(),
            "fate": "none",
            "offsets": offsets_field(offsets),
            **self._identity,
        }
        self._history.record("txn", "invoke", "commit-offsets", **fields)
        try:
            self._member.commit(offsets)
        except KafkaException as exc:
            error = exc.args[0].name()
            self._history.record("txn", "fail", "commit-offsets", error=error, **fields)
            return
        self._acked.committed(due)
        self._history.record("txn", "ok", "commit-offsets", **fields)

    def _revoked(self, partitions: list[TopicPartition]) -> None:
        """Before giving partitions away, commit what was acked (the usual pattern)."""
        revoked = {tp.partition for tp in partitions}
        self._producer.flush(REVOKE_FLUSH_TIMEOUT_S)
        if self._failed is None:
            self._commit_acked(revoked)
        self._acked.forget(revoked)

    def _lost(self, partitions: list[TopicPartition]) -> None:
        """A lost assignment belongs to someone else already: commit nothing for it."""
        self._acked.forget({tp.partition for tp in partitions})
