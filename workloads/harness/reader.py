"""A downstream reader: every partition of some topics from the beginning, one `read` event per
record. The observer reads this way during the run, the final scans after it."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from eoschaos.contract.history import RAW_RECORDS_PER_READER, HistoryWriter, raw_record
from eoschaos.workloads.harness.lineage import lineage_fields

BATCH_MAX_RECORDS = 500
POLL_TIMEOUT_S = 0.2
ISOLATIONS = ("read_committed", "read_uncommitted")

Position = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class IdSource:
    """Where an output record names the input record it came from: `key` (the key is the
    ASCII decimal id, as on the input), `header:NAME` (a header holding the decimal id) or
    `json:PATH` (a dotted field path into a JSON value, e.g. json:source.id)."""

    spec: str = "key"
    option: str = "--id-from"  # the option that gave `spec`, named when it is refused

    def __post_init__(self) -> None:
        kind, _, name = self.spec.partition(":")
        if self.spec != "key" and (kind not in ("header", "json") or not name):
            raise ValueError(
                f"{self.option} {self.spec!r} is not key, header:NAME or json:PATH "
                f"(e.g. {self.option} json:source.id)"
            )

    def extract(self, message: Message) -> int | None:
        return self.find(message.key(), message.value(), message.headers())

    def find(
        self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]] | None
    ) -> int | None:
        """The id in a record's parts; None where there is none."""
        kind, _, name = self.spec.partition(":")
        if kind == "key":
            return _decimal(key)
        if kind == "header":
            values = [raw for header, raw in headers or () if header == name]
            return _decimal(values[-1]) if values else None
        try:
            found: Any = json.loads(value or b"")
            for step in name.split("."):
                found = found[step]
        except (ValueError, KeyError, TypeError, IndexError):
            return None
        return found if isinstance(found, int) and not isinstance(found, bool) else None


KEY_IDS = IdSource("key")  # the seeder's own input: the key is the id, as ASCII decimal


def _decimal(raw: bytes | None) -> int | None:
    return int(raw) if raw is not None and raw.isdigit() else None


class IdSet:
    """Distinct record ids in 0..bound-1, as a bitmap (10M ids in 1.25 MB): how much of the
    input a reader has seen reflected, without keeping the ids themselves."""

    def __init__(self, bound: int) -> None:
        self._bound = bound
        self._bits = bytearray((bound + 7) // 8)
        self.count = 0

    def add(self, record_id: int) -> bool:
        """Add the id; False if it was in the set already (an id out of bounds is never)."""
        if not 0 <= record_id < self._bound:
            return True
        byte, bit = divmod(record_id, 8)
        if self._bits[byte] >> bit & 1:
            return False
        self._bits[byte] |= 1 << bit
        self.count += 1
        return True


class TopicReader:
    """Manually assigned (no group membership, nothing committed), so reading never changes
    what the pipeline sees, and every record of the log is visited once per reader."""

    def __init__(
        self,
        bootstrap: str,
        history: HistoryWriter,
        partitions: dict[str, list[int]],
        isolation: str,
        *,
        seen: IdSet | None = None,
        ids: dict[str, IdSource] | None = None,
        repeats_below: int = 0,
        together: tuple[str, ...] = (),
    ) -> None:
        """`ids`: where each topic's records name their id (the output's: the input record
        they came from); a topic not in it names it by its key. `repeats_below`: ids below it are
        watched per topic (across the `together` topics as if one: the outputs and dead-letter
        topics, where an id belongs once in all), and a record whose id this reader already
        read there is kept as it was -- a duplicate's copy, shown with its example."""
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
        self._history = history
        self.isolation = isolation
        self._seen = seen
        self._ids = ids or {}
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"eoschaos-reader-{uuid.uuid4().hex[:8]}",  # required, never used
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "log_level": 3,
            }
        )
        self._assigned = [
            TopicPartition(topic, p, OFFSET_BEGINNING)
            for topic, ids in partitions.items()
            for p in ids
        ]
        self._consumer.assign(self._assigned)
        self._end_seen: dict[Position, int] = {}  # offset of the last end-of-partition event
        # records kept as they were: those that name no id, and repeats of an id per topic
        self._raw_left = dict.fromkeys(["no id", *partitions], RAW_RECORDS_PER_READER)
        shared = IdSet(repeats_below)
        self._read_ids = {
            topic: shared if topic in together else IdSet(repeats_below) for topic in partitions
        }

    def poll(self) -> int:
        """Read one batch; returns how many records it held."""
        count = 0
        for message in self._consumer.consume(BATCH_MAX_RECORDS, POLL_TIMEOUT_S):
            error = message.error()
            if error is None:
                self._record(message)
                count += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                self._end_seen[(message.topic(), message.partition())] = message.offset()
        return count

    def positions(self) -> dict[Position, int]:
        """Where the reader is per partition; it moves past transaction markers as well."""
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in self._consumer.position(
                [TopicPartition(tp.topic, tp.partition) for tp in self._assigned]
            )
        }

    def drain(
        self,
        targets: dict[Position, int],
        timeout: float,
        progress: Callable[[str], None] | None = None,
    ) -> dict[Position, int]:
        """Read until every partition reaches its target offset or `timeout` passes; return
        the offset reached per partition."""
        deadline = time.monotonic() + timeout
        last_report = time.monotonic()
        while True:
            reached = self._reached(targets)
            behind = {pos: end for pos, end in targets.items() if reached[pos] < end}
            if not behind or time.monotonic() > deadline:
                return reached
            if progress and time.monotonic() - last_report > 5:
                left = sum(end - reached[pos] for pos, end in behind.items())
                progress(
                    f"{self.isolation} reader: {left} offsets left on {len(behind)} partitions"
                )
                last_report = time.monotonic()
            self.poll()

    def close(self) -> None:
        self._consumer.close()

    def _reached(self, targets: dict[Position, int]) -> dict[Position, int]:
        """Per partition the furthest of: the position, the last end-of-partition event, 0 (an
        empty partition has no position until something is fetched)."""
        positions = self.positions()
        return {pos: max(positions.get(pos, -1), self._end_seen.get(pos, -1), 0) for pos in targets}

    def _keep_raw(self, why: str, message: Message, fields: dict[str, Any]) -> None:
        if self._raw_left[why] > 0:
            self._raw_left[why] -= 1
            raw = raw_record(message.key(), message.value(), message.headers())
            fields["params"] = json.dumps(raw)

    def _record(self, message: Message) -> None:
        fields: dict[str, Any] = lineage_fields(message.headers())  # eoschaos.src.id first
        if "id" in fields:
            record_id = fields["id"]
        else:
            record_id = self._ids.get(message.topic(), KEY_IDS).extract(message)
        if record_id is not None:
            fields["id"] = record_id
        if "id" not in fields:
            self._keep_raw("no id", message, fields)  # what a phantom is made of
        else:
            if not self._read_ids[message.topic()].add(fields["id"]):
                self._keep_raw(message.topic(), message, fields)  # a duplicate's later copy
            if self._seen is not None:
                self._seen.add(fields["id"])
        self._history.record(
            "read",
            "ok",
            "poll",
            topic=message.topic(),
            partition=message.partition(),
            offset=message.offset(),
            isolation=self.isolation,
            **fields,
        )
