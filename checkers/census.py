"""A small summary of the whole history, taken before the checks.

Grouping reads by (reader, topic, partition) and every other kind as a whole gives a few rows
whatever the number of records; from them come the readers and how far each got, the event
count and time span. The end-state rows, fault events, instance starts and exits and a Flink
job's checkpoint events, a handful per partition, fault, incarnation or checkpoint, are
collected whole. Later plans use this as
constants (the reader list becomes conditional aggregation columns) instead of re-scanning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.history_io import History
from eoschaos.contract.history import (
    CHECKPOINT_KIND,
    FINAL_COMMITTED,
    FINAL_UNCOMMITTED,
    INSTANCE_KIND,
    LOG_BATCH_KIND,
)

MAX_ROWS_KEPT = 100_000  # end rows, fault, instance and checkpoint events kept: far above any run
KEPT_FIELDS = (
    "f",
    "type",
    "time",
    "topic",
    "partition",
    "offset",
    "lso",
    "txn_id",
    "params",
    "target",
    "error",
    "instance",
    "incarnation",
    "count",
)


@dataclass
class Census:
    events: int
    start: float | None  # first event's time
    end: float | None  # last event's time
    readers: list[str]  # every reader in the history, sorted
    records: dict[str, dict[str, int]]  # reader -> topic -> records read
    acked_sends: int  # send events of type ok
    first_offsets: dict[tuple[str, str, int], int]  # (reader, topic, partition) -> lowest offset
    last_offsets: dict[tuple[str, str, int], int]  # (reader, topic, partition) -> highest offset
    end_rows: list[dict[str, Any]]  # the end-state writer's rows
    faults: list[dict[str, Any]]  # fault events in time order
    # f -> rows of the brokers' logs (batch, aborted, txn-state, offset-commit)
    log_rows: dict[str, int]
    indexed_reads: int = 0  # reads of records that name their place in their transaction
    checkpoints: list[dict[str, Any]] = field(default_factory=list)  # a Flink job's, in order
    exits: list[dict[str, Any]] = field(default_factory=list)  # instances' exits, in time order

    @property
    def has_final_committed(self) -> bool:
        return FINAL_COMMITTED in self.readers

    def drained(self, topic: str) -> list[str]:
        """Downstream readers that got at least as far as the final committed scan on every
        partition of `topic`: only they must have seen every committed transaction whole."""
        final = {
            partition: offset
            for (reader, t, partition), offset in self.last_offsets.items()
            if reader == FINAL_COMMITTED and t == topic
        }
        if not final:
            return []
        return [
            name
            for name in self.readers
            if name != FINAL_UNCOMMITTED
            and all(
                self.last_offsets.get((name, topic, partition), -1) >= last
                for partition, last in final.items()
            )
        ]

    def records_of(self, reader: str, topic: str) -> int:
        return self.records.get(reader, {}).get(topic, 0)

    def end_rows_of(self, f: str) -> list[dict[str, Any]]:
        return [row for row in self.end_rows if row["f"] == f]


def take_census(history: History) -> Census:
    """Two small collects: per (kind, process, topic, partition) counts -- reads grouped by
    reader and partition, log rows by what they are (f, in the process column), every other
    kind as a whole -- and the end, fault, instance and checkpoint rows."""
    reads = history.kind("read").groupBy("kind", "process", "topic", "partition")
    others = history.events.filter(F.col("kind") != "read").groupBy(
        "kind",
        F.when(F.col("kind") == LOG_BATCH_KIND, F.col("f")).alias("process"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
    )
    aggregates = [
        F.count(F.lit(1)).alias("events"),
        F.count(F.when(F.col("type") == "ok", 1)).alias("ok"),
        F.min("offset").alias("first"),
        F.max("offset").alias("last"),
        F.min("time").alias("start"),
        F.max("time").alias("end"),
        F.count("txn_index").alias("indexed"),
    ]
    rows = reads.agg(*aggregates).unionByName(others.agg(*aggregates)).collect()
    kept = (
        history.events.filter(F.col("kind").isin("end", "fault", INSTANCE_KIND, CHECKPOINT_KIND))
        .select("kind", *KEPT_FIELDS)
        .limit(MAX_ROWS_KEPT)
        .collect()
    )
    records: dict[str, dict[str, int]] = {}
    first_offsets, last_offsets = {}, {}
    for row in rows:
        if row["kind"] == "read" and row["process"] is not None:
            by_topic = records.setdefault(row["process"], {})
            by_topic[row["topic"]] = by_topic.get(row["topic"], 0) + row["events"]
            if row["last"] is not None:
                place = (row["process"], row["topic"], row["partition"])
                first_offsets[place], last_offsets[place] = row["first"], row["last"]
    starts = [row["start"] for row in rows if row["start"] is not None]
    ends = [row["end"] for row in rows if row["end"] is not None]
    return Census(
        events=sum(row["events"] for row in rows),
        acked_sends=sum(row["ok"] for row in rows if row["kind"] == "send"),
        start=min(starts, default=None),
        end=max(ends, default=None),
        readers=sorted(records),
        records=records,
        first_offsets=first_offsets,
        last_offsets=last_offsets,
        end_rows=[row.asDict() for row in kept if row["kind"] == "end"],
        faults=sorted(
            (row.asDict() for row in kept if row["kind"] == "fault"),
            key=lambda event: event["time"] or 0.0,
        ),
        log_rows={row["process"]: row["events"] for row in rows if row["kind"] == LOG_BATCH_KIND},
        indexed_reads=sum(row["indexed"] for row in rows if row["kind"] == "read"),
        checkpoints=sorted(
            (row.asDict() for row in kept if row["kind"] == CHECKPOINT_KIND),
            key=lambda event: event["time"],
        ),
        exits=sorted(
            (row.asDict() for row in kept if row["kind"] == INSTANCE_KIND and row["f"] == "exit"),
            key=lambda event: event["time"] or 0.0,
        ),
    )
