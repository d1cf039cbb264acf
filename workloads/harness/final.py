"""After the run (faults healed, processors stopped): the final scans and the end state.

Writers `final-committed` and `final-uncommitted` read both topics from the beginning to the
end a reader of their isolation can reach (read_committed: the LSO, so an open transaction
never makes the scan hang; read_uncommitted: the high watermark), one `read` event per
record. Writer `end-state` records the log end and LSO of every partition, the group's
committed offsets, and every transaction of this run still open (Kafka's TransactionsCommand).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from eoschaos.clusters.admin import run_tool
from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract.history import (
    END_AGGREGATES,
    END_STATE,
    FINAL_SCAN_BY_ISOLATION,
    HistoryWriter,
)
from eoschaos.workloads.harness.offsets import admin_for, end_offsets, group_offsets, partition_ids
from eoschaos.workloads.harness.reader import IdSource, Position, TopicReader

# Transaction states of TransactionsCommand `list` that mean "no transaction in progress".
GROUP_OFFSET_ATTEMPTS = 3
CLOSED_TRANSACTION_STATES = frozenset({"Empty", "CompleteCommit", "CompleteAbort", "Dead"})


@dataclass(frozen=True)
class ScanResult:
    writer: str
    targets: dict[Position, int]
    reached: dict[Position, int]

    @property
    def complete(self) -> bool:
        return all(self.reached[pos] >= end for pos, end in self.targets.items())


def wait_settled(
    bootstrap: str, topics: list[str], timeout: float, progress: Callable[[str], None]
) -> bool:
    """Wait until no partition of `topics` has an open transaction (LSO == high watermark).

    A transaction abandoned by a killed instance whose transactional.id nobody reuses (mode
    no-fencing) stays open until its coordinator aborts it after transaction.timeout.ms; the
    end state should show what stays open after that, not what was about to be aborted.
    """
    admin = admin_for(bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        open_partitions = []
        for topic in topics:
            high = end_offsets(admin, topic, committed=False)
            stable = end_offsets(admin, topic, committed=True)
            open_partitions += [(topic, p) for p in sorted(high) if stable[p] < high[p]]
        if not open_partitions:
            return True
        if time.monotonic() > deadline:
            progress(f"transactions still open at the end on {sorted(open_partitions)}")
            return False
        progress(f"waiting for open transactions on {len(open_partitions)} partitions to end")
        time.sleep(1.0)


def final_scan(
    bootstrap: str,
    run_dir: Path,
    topics: list[str],
    isolation: str,
    timeout: float,
    progress: Callable[[str], None],
    *,
    ids: dict[str, IdSource] | None = None,
    together: tuple[str, ...] = (),
) -> ScanResult:
    """Read `topics` from the beginning to the end offsets of `isolation`, as of now; `ids`:
    where each topic's records name their id, `together`: topics an id belongs in once
    across (TopicReader)."""
    admin = admin_for(bootstrap)
    committed = isolation == "read_committed"
    targets = {
        (topic, p): end
        for topic in topics
        for p, end in end_offsets(admin, topic, committed=committed).items()
    }
    writer = FINAL_SCAN_BY_ISOLATION[isolation]
    with HistoryWriter(run_dir, writer) as history:
        reader = TopicReader(
            bootstrap,
            history,
            {t: partition_ids(admin, t) for t in topics},
            isolation,
            ids=ids,
            # ids count up from 0 and the scan reads no more records than its end offsets
            repeats_below=sum(targets.values()),
            together=together,
        )
        try:
            reached = reader.drain(targets, timeout, progress)
        finally:
            reader.close()
    result = ScanResult(writer, targets, reached)
    if not result.complete:
        short = sorted(pos for pos, end in targets.items() if reached[pos] < end)
        progress(f"{writer} stopped short of the end on {short}")
    return result


def open_transactions(
    dist: KafkaDistribution, bootstrap: str, txn_ids: set[str] | None
) -> list[dict[str, str]]:
    """Rows of `TransactionsCommand list` for `txn_ids` (None: any) whose state is not a
    closed one. A pipeline that derives its own transactional ids (Kafka Streams) leaves the
    harness no list to filter by; the run's cluster then answers for all of them.

    The tool prints a header line (TransactionalId, Coordinator, ProducerId,
    TransactionState) and one whitespace-separated row per transactional id.
    """
    out = run_tool(
        dist,
        "org.apache.kafka.tools.TransactionsCommand",
        ["--bootstrap-server", bootstrap, "list"],
    )
    lines = [line.split() for line in out.splitlines() if line.strip()]
    if not lines or "TransactionalId" not in lines[0]:
        raise RuntimeError(f"unexpected TransactionsCommand output: {out[:300]!r}")
    header = lines[0]
    rows = [dict(zip(header, row, strict=False)) for row in lines[1:]]
    return [
        row
        for row in rows
        if (txn_ids is None or row.get("TransactionalId") in txn_ids)
        and row.get("TransactionState") not in CLOSED_TRANSACTION_STATES
    ]


def _group_offsets_retrying(
    bootstrap: str, group: str, topics: tuple[str, ...]
) -> dict[tuple[str, int], int | None]:
    for _ in range(GROUP_OFFSET_ATTEMPTS - 1):
        try:
            return group_offsets(bootstrap, group, topics)
        except RuntimeError:
            time.sleep(1.0)
    return group_offsets(bootstrap, group, topics)


def record_end_state(
    bootstrap: str,
    run_dir: Path,
    dist: KafkaDistribution,
    *,
    input_topics: tuple[str, ...],
    output_topics: tuple[str, ...],
    group: str,
    txn_ids: set[str] | None,
) -> None:
    """The end state: each topic's log end and LSO per partition (the outputs' with the
    dead-letter topics), the group's committed input offsets, and the transactions still
    open. Every part is read before any is written, and then all rows go to disk in one
    write: a run killed while the end state is being read
    (the open-transactions tool is a JVM that takes seconds) leaves no end state rather than
    part of one, so its re-check says the run is unfinished instead of judging a history
    whose missing open transactions look like none."""
    admin = admin_for(bootstrap)
    rows: list[tuple[str, dict[str, Any]]] = []
    for topic in (*input_topics, *output_topics):
        high = end_offsets(admin, topic, committed=False)
        stable = end_offsets(admin, topic, committed=True)
        rows += [
            ("log-end", {"topic": topic, "partition": p, "offset": high[p], "lso": stable[p]})
            for p in sorted(high)
        ]
    committed = _group_offsets_retrying(bootstrap, group, input_topics)
    # A group that committed nothing at all is a pipeline that keeps its offsets elsewhere
    # (Spark's checkpoint): no rows, and the checkers say the check does not apply.
    if any(offset is not None for offset in committed.values()):
        for (topic, p), offset in committed.items():
            rows.append(("group-offset", {"topic": topic, "partition": p, "offset": offset}))
    for row in open_transactions(dist, bootstrap, txn_ids):
        params = json.dumps(row, sort_keys=True)
        rows.append(("open-txn", {"txn_id": row["TransactionalId"], "params": params}))
    # the writer's first periodic flush comes 0.5 s after it opens: these rows take
    # microseconds, so close() writes them all at once
    with HistoryWriter(run_dir, END_STATE) as history:
        for f, fields in rows:
            history.record("end", "ok", f, **fields)


def committed_records(bootstrap: str, topic: str, timeout: float) -> Iterator[Message]:
    """Every committed record of `topic`, from the beginning to its LSO as of the call, in
    partition order; stops early (short) after `timeout` seconds."""
    ends = end_offsets(admin_for(bootstrap), topic, committed=True)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eoschaos-final-{uuid.uuid4().hex[:8]}",  # required, never used
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            positions = {
                tp.partition: tp.offset
                for tp in consumer.position([TopicPartition(topic, p) for p in ends])
            }
            if all(positions.get(p, -1) >= end for p, end in ends.items() if end > 0):
                return
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    yield message
    finally:
        consumer.close()


def last_values(bootstrap: str, topic: str, timeout: float) -> dict[str, Message]:
    """The last committed record of every key of `topic` (a table's current state)."""
    latest: dict[str, Message] = {}
    for message in committed_records(bootstrap, topic, timeout):
        if message.key() is not None:
            latest[message.key().decode(errors="replace")] = message
    return latest


def record_aggregates(
    bootstrap: str, run_dir: Path, topic: str, buckets: int, timeout: float
) -> int:
    """Writer `end-aggregates`: the last committed value of every key of an aggregate topic
    (key = a decimal key, value = JSON), one `end` row f=`aggregate` each, with params
    {"key", "buckets", "value"}. Read after the run settled, to the LSO. Returns the keys."""
    latest = last_values(bootstrap, topic, timeout)
    with HistoryWriter(run_dir, END_AGGREGATES) as history:
        for key, message in sorted(latest.items()):
            params = {"key": key, "buckets": buckets, "value": json.loads(message.value())}
            history.record(
                "end",
                "ok",
                "aggregate",
                topic=topic,
                partition=message.partition(),
                offset=message.offset(),
                params=json.dumps(params, sort_keys=True),
            )
    return len(latest)
