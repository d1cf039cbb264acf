"""Liveness: after faults healed nothing hangs and everything was consumed, and no instance
gave up on its own along the way.

Judged on the end-state rows and the instances' exits the census collected: a few per partition
or incarnation whatever the number of records, so they are compared on the driver rather than
planned as Spark stages.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.census import Census
from eoschaos.checkers.findings import Tally
from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import GROUP_OFFSETS, INSTANCE_FAILURE, LSO, OPEN_TRANSACTIONS


def liveness_tallies(
    census: Census, input_topics: tuple[str, ...], max_examples: int
) -> dict[str, Tally]:
    open_txns = [
        {"txn_id": row["txn_id"], "params": row["params"]} for row in census.end_rows_of("open-txn")
    ]
    log_end = census.end_rows_of("log-end")
    lso_behind = [
        {
            "topic": row["topic"],
            "partition": row["partition"],
            "lso": row["lso"],
            "high_watermark": row["offset"],
        }
        for row in log_end
        if row["lso"] is not None and row["offset"] is not None and row["lso"] < row["offset"]
    ]
    several = len(input_topics) > 1  # then an example names its topic
    groups_behind = []
    for topic in input_topics:
        group_offsets = committed_offsets(census, topic)
        groups_behind += [
            {
                **({"topic": topic} if several else {}),
                "partition": row["partition"],
                "group_offset": group_offsets.get(row["partition"]),
                "log_end": row["offset"],
            }
            for row in log_end
            if row["topic"] == topic and (group_offsets.get(row["partition"]) or 0) < row["offset"]
        ]
    return {
        OPEN_TRANSACTIONS.name: _tally(open_txns, ["txn_id"], max_examples),
        LSO.name: _tally(lso_behind, ["topic", "partition"], max_examples),
        GROUP_OFFSETS.name: _tally(
            groups_behind, ["topic", "partition"] if several else ["partition"], max_examples
        ),
    }


def instance_failure_tally(
    census: Census, failure_exits: tuple[int, ...], max_examples: int
) -> dict[str, Tally]:
    """Every instance exit whose status is one of `failure_exits` (the workload's statuses for
    "I failed"), first first: the instance, its incarnation, the status and the seconds into
    the run it exited at. A kill by a fault, a fencing or a stop leaves another status."""
    failures = [
        {
            "instance": row["instance"],
            "incarnation": row["incarnation"],
            "status": status,
            "at_s": round(row["time"] - census.start, 1) if census.start is not None else None,
        }
        for row in census.exits
        if (status := _status(row["error"])) in failure_exits
    ]
    return {INSTANCE_FAILURE.name: Tally(count=len(failures), examples=failures[:max_examples])}


def _status(error: str | None) -> int | None:
    """An exit row's status (its `error`: the process's return code as text)."""
    try:
        return int(error) if error is not None else None
    except ValueError:
        return None


def note_stalled_since(history: History, census: Census, groups_behind: Tally) -> None:
    """Since when each partition the group fell behind on stalled: seconds into the run at
    which its first record the group never committed past (at its final committed offset, or
    its first record if it never committed) was acknowledged to the seeder. Added to each
    example as `stalled_since_s` (null: that record's acknowledgement is not in the history).
    One small job over the sends, and only for a run whose group fell behind."""
    first = history.input_topic
    stalled = {
        (e.get("topic", first), e["partition"]): e["group_offset"] or 0
        for e in groups_behind.examples
    }
    if not stalled or census.start is None:
        return
    at_stall = F.lit(False)
    for (topic, partition), offset in stalled.items():
        at_stall |= (
            (F.col("topic") == topic)
            & (F.col("partition") == partition)
            & (F.col("offset") == offset)
        )
    acked = (
        history.kind("send")
        .filter((F.col("type") == "ok") & at_stall)
        .groupBy("topic", "partition")
        .agg(F.min("time").alias("time"))
        .collect()
    )
    since = {
        (row["topic"], row["partition"]): round(row["time"] - census.start, 1) for row in acked
    }
    for example in groups_behind.examples:
        example["stalled_since_s"] = since.get((example.get("topic", first), example["partition"]))


def committed_offsets(census: Census, input_topic: str) -> dict[int, int | None]:
    """The group's committed offset of each partition of `input_topic` at the end (None:
    never committed), from the end state's group-offset rows."""
    return {
        row["partition"]: row["offset"]
        for row in census.end_rows_of("group-offset")
        if row["topic"] in (input_topic, None)
    }


def _tally(anomalies: list[dict[str, Any]], order: list[str], max_examples: int) -> Tally:
    ordered = sorted(anomalies, key=lambda a: [(a[key] is None, a[key] or 0) for key in order])
    return Tally(count=len(anomalies), examples=ordered[:max_examples])
