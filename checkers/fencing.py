"""Fencing: once a newer owner of an input partition committed, the older owner must not; and
a request the client gave up on must not commit a later transaction.

Ownership is the consumer-group generation a transaction ran under (KIP-447 fences commits of
a stale generation). A zombie write is a transaction whose records made it into the final
committed output although its commit was invoked after a transaction of a higher generation on
one of its input partitions had committed. It is judged on the driver, over the transactions
(thousands, collected once): per input partition, the earliest commit of every higher
generation, then one lookup per transaction.

A stale commit is the coordinator's PrepareCommit of a transactional id (its own log, writer
LOG_BATCHES f TXN_STATE) while no client of that id had a commit call in flight: an EndTxn
the client had timed out and retried, landing later in the next transaction (KAFKA-17754).
A client on transaction version 2 bumps its epoch per transaction and the stale request is
fenced; on version 1 it commits whatever the client has written so far.
"""

from __future__ import annotations

import bisect
from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.findings import Found
from eoschaos.checkers.history_io import History
from eoschaos.checkers.log_transactions import PREPARE_COMMIT
from eoschaos.checkers.transactions import TXN_KEY
from eoschaos.contract.checks import STALE_COMMIT, ZOMBIE_WRITE
from eoschaos.contract.history import FINAL_COMMITTED, LOG_BATCH_KIND, TXN_STATE

# The coordinator's times are whole milliseconds, the client's are not.
CLOCK_SLACK_S = 0.002
# A call's bounds and a prepare in one time order; at one instant a call opens before a
# prepare, and a prepare comes before a call ends (the bounds are inclusive).
OPENS, PREPARES, ENDS = 0, 1, 2


def zombie_found(txn_reads: list[dict[str, Any]], txns: list[dict[str, Any]]) -> list[Found]:
    """fencing.zombie-write, one anomaly per zombie transaction.

    txn_reads: eoschaos.checkers.transactions.transaction_reads, collected; its final-committed
    rows are the transactions whose records are in the committed output. txns: the
    transaction table, collected, whose committed transactions are the possible newer owners
    (and so are the output's own). Per input partition, the commits sorted by generation, each
    with the earliest commit of it and all higher generations (a running minimum from the
    top), so each transaction finds the earliest newer commit by one binary search."""
    in_output = [
        row
        for row in txn_reads
        if row["process"] == FINAL_COMMITTED and row["generation"] is not None
    ]
    commits: dict[int, list[tuple]] = {}  # partition -> (generation, (at, generation, partition))
    for txn in in_output + txns:
        if txn["committed_at"] is not None and txn["generation"] is not None:
            for partition in txn["partitions"] or []:
                newer = (txn["committed_at"], txn["generation"], partition)
                commits.setdefault(partition, []).append((txn["generation"], newer))
    earliest_from: dict[int, tuple[list[int], list[tuple]]] = {}
    for partition, by_generation in commits.items():
        by_generation.sort()
        running: list[tuple] = []
        for _, newer in reversed(by_generation):
            running.append(min(running[-1], newer) if running else newer)
        earliest_from[partition] = ([g for g, _ in by_generation], running[::-1])
    zombies: dict[tuple, tuple[dict[str, Any], tuple]] = {}
    for row in in_output:
        for partition in row["partitions"] or []:
            generations, earliest = earliest_from.get(partition, ([], []))
            higher = bisect.bisect_right(generations, row["generation"])
            if higher == len(generations) or row["commit_invoked"] is None:
                continue
            newer = earliest[higher]
            key = tuple(row[name] for name in TXN_KEY)
            if newer[0] < row["commit_invoked"] and (key not in zombies or newer < zombies[key][1]):
                zombies[key] = (row, newer)
    return [
        Found(
            ZOMBIE_WRITE.name,
            row["commit_invoked"],
            {name: row[name] for name in [*TXN_KEY, "txn_id", "generation"]}
            | {
                "commit_invoked": row["commit_invoked"],
                "records": row["seen"],
                "src_partition": newer[2],
                "newer_generation": newer[1],
                "newer_committed": newer[0],
            },
        )
        for row, newer in zombies.values()
    ]


def stale_commit_found(history: History) -> list[Found]:
    """fencing.stale-commit: one anomaly per PrepareCommit the coordinator wrote for a
    transactional id of the client history outside every commit call of that id (from its
    invoke to the same process's next commit event; to the end if there is none: a process
    that died mid-commit).

    The commit calls and the prepares (a few per transaction) come back in one collect; per
    transactional id, in time order, each call opens (+1) and ends (-1), and a prepare finds
    none open -- a running count, not a test of every prepare against every call."""
    state = F.get_json_object("params", "$.state")
    none = F.lit(None)
    calls = (
        history.kind("txn")
        .filter(F.col("f") == "commit")
        .select(
            "process",
            "txn_id",
            "time",
            "type",
            none.cast("int").alias("producer_epoch"),
            none.cast("string").alias("partitions"),
        )
    )
    prepares = (
        history.kind(LOG_BATCH_KIND)
        .filter((F.col("f") == TXN_STATE) & (state == PREPARE_COMMIT))
        .select(
            none.cast("string").alias("process"),
            "txn_id",
            "time",
            F.lit(PREPARE_COMMIT).alias("type"),
            F.get_json_object("params", "$.producer_epoch").cast("int").alias("producer_epoch"),
            F.get_json_object("params", "$.partitions").alias("partitions"),
        )
    )
    by_process: dict[str, list[dict[str, Any]]] = {}
    steps: dict[str | None, list[tuple[float, int, dict[str, Any] | None]]] = {}
    for row in calls.unionByName(prepares).collect():
        if row["type"] == PREPARE_COMMIT:
            steps.setdefault(row["txn_id"], []).append((row["time"], PREPARES, row.asDict()))
        else:
            by_process.setdefault(row["process"], []).append(row.asDict())
    for events in by_process.values():
        events.sort(key=lambda event: event["time"])
        for event, after in zip(events, [*events[1:], None], strict=True):
            if event["type"] == "invoke":
                bounds = steps.setdefault(event["txn_id"], [])
                bounds.append((event["time"] - CLOCK_SLACK_S, OPENS, None))
                if after is not None:
                    bounds.append((after["time"] + CLOCK_SLACK_S, ENDS, None))
    found = []
    for txn_id, in_order in steps.items():
        if not any(step == OPENS for _, step, _ in in_order):
            continue  # an id no client of the history ran
        in_order.sort(key=lambda bound: bound[:2])
        calls_open = 0
        for time, step, prepare in in_order:
            calls_open += {OPENS: 1, ENDS: -1}.get(step, 0)
            if prepare is not None and calls_open == 0:
                example = {
                    "txn_id": txn_id,
                    "prepared_at": time,
                    "producer_epoch": prepare["producer_epoch"],
                    "partitions": prepare["partitions"],
                }
                found.append(Found(STALE_COMMIT.name, time, example))
    return found
