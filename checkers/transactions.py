"""What happened to each transaction, and which readers saw how much of it.

A transaction is (instance, incarnation, txn_seq): txn_seq restarts with every incarnation and
in eos mode the transactional.id is the same across incarnations, so neither txn_id nor txn_seq
alone identifies one. The transaction table has one row per transaction (thousands, not
millions): it is broadcast into the one pass over downstream reads, whose result (a row per
reader and transaction) the aborted, uncommitted, fractured and zombie checks share, and it is
collected once for the statistics, the agreement and the timeline's bars.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.history_io import History
from eoschaos.contract.history import FINAL_UNCOMMITTED, HUNG_ERROR_PREFIX

TXN_KEY = ["instance", "incarnation", "txn_seq"]
PARTITION_SHIFT = 40  # a read's place: partition << 40 | offset, one sortable long
# Errors by which a broker or group coordinator rejects an older owner (fencing at work).
REJECTION_ERRORS = (
    "ILLEGAL_GENERATION|UNKNOWN_MEMBER_ID|_FENCED|PRODUCER_FENCED|INVALID_PRODUCER_EPOCH"
)
CONSUMING_STEPS = ("produce", "send-offsets", "commit-offsets")


def _step(f: str, type_: str) -> Column:
    return (F.col("f") == f) & (F.col("type") == type_)


def rejected_attempt() -> Column:
    """A txn event that shows fencing rejecting an attempt."""
    return F.col("type").isin("fail", "info") & (
        F.coalesce(F.col("error"), F.lit("")).rlike(REJECTION_ERRORS) | (F.col("f") == "fenced")
    )


def transaction_table(history: History) -> DataFrame:
    """One row per transaction: its fate, commit times, generation, input partitions and the
    records it produced.

    aborted: known not committed -- begin's intended fate was abort, or an abort was invoked,
    or the commit failed, and no commit succeeded. A commit whose outcome is unknown (info,
    process killed) is not aborted: it may well have committed. (Records whose fate header
    says abort are judged aborted where they are read, in transaction_reads.)
    """
    consumed = F.when(F.col("f").isin(*CONSUMING_STEPS), F.col("offsets.partition"))
    return (
        history.kind("txn")
        .groupBy(*TXN_KEY)
        .agg(
            F.max("txn_id").alias("txn_id"),
            F.min("time").alias("began"),  # its first and last event: its bar on the timeline
            F.max("time").alias("ended"),
            F.max(F.when(F.col("f") == "begin", F.col("fate"))).alias("begin_fate"),
            F.coalesce(
                F.max(F.when(_step("commit", "invoke"), F.col("generation"))),
                F.max("generation"),
            ).alias("generation"),
            F.max(F.when(_step("produce", "ok"), F.col("count"))).alias("produced"),
            F.min(F.when(_step("commit", "invoke"), F.col("time"))).alias("commit_invoked"),
            F.min(F.when(_step("commit", "ok"), F.col("time"))).alias("committed_at"),
            F.max(_step("commit", "fail")).alias("commit_failed"),
            F.max(_step("abort", "invoke")).alias("abort_invoked"),
            F.sum(rejected_attempt().cast("int")).alias("rejected"),
            F.max((F.col("type") == "info") & F.col("error").startswith(HUNG_ERROR_PREFIX)).alias(
                "hung"
            ),
            F.array_distinct(F.flatten(F.collect_list(consumed))).alias("partitions"),
        )
        .withColumn(
            "aborted",
            F.col("committed_at").isNull()
            & (
                (F.coalesce(F.col("begin_fate"), F.lit("")) == "abort")
                | F.col("abort_invoked")
                | F.col("commit_failed")
            ),
        )
    )


def outcome(txn: dict[str, Any]) -> str:
    """How a transaction of the table (collected) ended, as its client knows: committed,
    aborted, unknown (its commit was called and its client never learned the outcome: a
    timeout, a killed process) or open (no commit was called)."""
    if txn["committed_at"] is not None:
        return "committed"
    if txn["aborted"]:
        return "aborted"
    return "unknown" if txn["commit_invoked"] is not None else "open"


def outcome_counts(txns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transaction table (collected) counted by transactional id and outcome: a row per
    combination that occurs (a few per transactional id), however long the run. The
    verdict's statistics and the per-id agreement with the brokers' logs are sums of it.
    `real`: a transaction (txn_seq set), not a step recorded outside one."""
    counts: dict[tuple, list[int]] = {}
    for txn in txns:
        ended = outcome(txn)
        key = (
            txn["txn_id"],
            txn["txn_seq"] is not None,
            ended == "committed",
            txn["aborted"],
            ended == "unknown",
            (txn["rejected"] or 0) > 0,
            bool(txn["hung"]),
        )
        entry = counts.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += txn["rejected"] or 0
    fields = ("txn_id", "real", "committed", "aborted", "unknown", "fenced", "hung")
    return [
        dict(zip(fields, key, strict=True)) | {"transactions": n, "rejected": rejected}
        for key, (n, rejected) in counts.items()
    ]


def transaction_stats(counts: list[dict[str, Any]]) -> dict[str, int]:
    """How many transactions ended each way, and the rejected attempts (`outcome_counts`)."""
    real = [row for row in counts if row["real"]]
    stats = {
        outcome: sum(row["transactions"] for row in real if row[outcome])
        for outcome in ("committed", "aborted", "fenced", "unknown", "hung")
    }
    return {
        "total": sum(row["transactions"] for row in real),
        **stats,
        "rejected_attempts": sum(row["rejected"] for row in counts),
    }


def transaction_reads(history: History, txns: DataFrame) -> DataFrame:
    """(reader, transaction) -> what that reader saw of it, for every reader that must see only
    committed data: one pass over their reads of the output topic, each read joined to its
    transaction's outcome (broadcast), so reads before the commit are counted exactly and one
    offending read per transaction is kept as the example.

    Two levels: per (reader, transaction, source partition) with fixed-width aggregates only
    (a hash aggregate that shrinks the reads ~txn_size times before any shuffle), then per
    (reader, transaction) on those few rows, where the set of source partitions is built."""
    outcome = txns.select(
        *TXN_KEY,
        "aborted",
        "commit_invoked",
        "committed_at",
        F.col("generation").alias("owner_generation"),
    )
    reads = history.kind("read").filter(
        F.col("topic").isin(*history.topics.written) & (F.col("process") != FINAL_UNCOMMITTED)
    )
    place = F.shiftleft(F.col("partition").cast("long"), PARTITION_SHIFT) + F.col("offset")
    early_place = F.when(F.col("time") < F.col("commit_invoked"), place)
    per_source = (
        reads.join(F.broadcast(outcome), TXN_KEY, "left")
        .groupBy("process", *TXN_KEY, "src_partition")
        .agg(
            F.count(F.lit(1)).alias("seen"),
            F.max("txn_size").alias("txn_size"),
            F.coalesce(F.max("owner_generation"), F.max("generation")).alias("generation"),
            (F.max(F.col("fate") == "abort") | F.max("aborted")).alias("aborted"),
            F.max("commit_invoked").alias("commit_invoked"),
            F.max("committed_at").alias("committed_at"),
            F.count(early_place).alias("before_commit"),
            *_first_read(place, "first"),
            *_first_read(early_place, "early"),
        )
    )
    per_txn = per_source.groupBy("process", *TXN_KEY).agg(
        F.sum("seen").alias("seen"),
        F.max("txn_size").alias("txn_size"),
        F.max("generation").alias("generation"),
        F.max("aborted").alias("aborted"),
        F.max("commit_invoked").alias("commit_invoked"),
        F.max("committed_at").alias("committed_at"),
        F.sum("before_commit").alias("before_commit"),
        *[
            F.first(f"{prefix}_{field}", ignorenulls=True).alias(f"{prefix}_{field}")
            for prefix in ("first", "early")
            for field in ("place", "id", "time")
        ],
        F.collect_set("src_partition").alias("src_partitions"),
    )
    consumed = txns.select(*TXN_KEY, "txn_id", F.col("partitions").alias("consumed"))
    return per_txn.join(F.broadcast(consumed), TXN_KEY, "left").select(
        "*",
        F.array_union(
            F.coalesce("consumed", F.array().cast("array<int>")), F.col("src_partitions")
        ).alias("partitions"),
        *[_read_struct(prefix).alias(f"{prefix}_read") for prefix in ("first", "early")],
    )


def _first_read(place: Column, prefix: str) -> list[Column]:
    """One read among those where `place` is set: its place, id and time. first() skips the
    same nulls in all three, so they come from the same read, and costs a fraction of min_by."""
    return [
        F.first(place, ignorenulls=True).alias(f"{prefix}_place"),
        F.first(F.when(place.isNotNull(), F.col("id")), ignorenulls=True).alias(f"{prefix}_id"),
        F.first(F.when(place.isNotNull(), F.col("time")), ignorenulls=True).alias(f"{prefix}_time"),
    ]


def _read_struct(prefix: str) -> Column:
    place = F.col(f"{prefix}_place")
    return F.when(
        place.isNotNull(),
        F.struct(
            F.shiftright(place, PARTITION_SHIFT).cast("int").alias("partition"),
            place.bitwiseAND((1 << PARTITION_SHIFT) - 1).alias("offset"),
            F.col(f"{prefix}_id").alias("id"),
            F.col(f"{prefix}_time").alias("time"),
        ),
    )
