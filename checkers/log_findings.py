"""Checks of whole transactions from the brokers' logs, for any transactional pipeline.

delivery.torn-transaction: a consume-transform-produce transaction is one unit -- its output
and its input's offsets commit together or not at all (KIP-98, KIP-447). From the logs'
transaction table (eoschaos.checkers.log_transactions), a transaction the coordinator
committed is torn when it committed output but no offsets of the input (a pipeline that
commits its offsets outside its transaction: after a crash between the two, its input is
consumed again or skipped), when it committed offsets that moved an input partition forward
but wrote no output (an output of copies has a record for every input record consumed), or
when its markers disagree (COMMIT in one partition, ABORT in another).

fencing.older-epoch-commit: once a transactional id was initialised again (InitProducerId: a
new producer session at a higher epoch), no transaction of an older epoch of it may commit.
The coordinator enforces that; a commit it recorded anyway is a fencing failure, whatever the
client.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.log_transactions import (
    ABORT,
    COMMIT,
    COMMITTING,
    TXN_KEY,
    attributed,
    data_pieces,
    offset_commits,
    session_starts,
)
from eoschaos.contract.checks import OLDER_EPOCH_COMMIT, TORN_TRANSACTION


def _with_advance(commits: DataFrame) -> DataFrame:
    """Each commit with how far it moved its group's committed offset of the partition, in
    the order the commits took effect (null for the first and for one that did not)."""
    chain = Window.partitionBy("group", "topic", "partition").orderBy("log_partition", "at")
    took_effect = F.col("fate") == COMMIT
    before = F.last(F.when(took_effect, F.col("offset")), ignorenulls=True).over(
        chain.rowsBetween(Window.unboundedPreceding, -1)
    )
    return commits.withColumn("advanced", F.when(took_effect, F.col("offset") - before))


def transaction_parts(
    log: DataFrame, txns: DataFrame, input_topic: str, output_topic: str
) -> DataFrame:
    """The coordinator's transactions with what the logs show each did: committed and aborted
    output pieces on the output topic (with their ranges), and offset commits of the input
    topic (with how far each moved the group's offset)."""
    output = attributed(data_pieces(log).filter(F.col("topic") == output_topic), txns)
    commits = attributed(
        _with_advance(offset_commits(log).filter(F.col("topic") == input_topic)).filter(
            "transactional"
        ),
        txns,
    )
    range_ = F.struct("partition", "first_offset", "last_offset", "records", "fate")
    by_output = output.groupBy(*TXN_KEY).agg(
        F.sum(F.when(F.col("fate") == COMMIT, F.col("records"))).alias("output_committed"),
        F.count(F.when(F.col("fate") == ABORT, 1)).alias("output_aborted_pieces"),
        F.collect_set("fate").alias("output_fates"),
        F.sort_array(F.collect_list(range_)).alias("output"),
    )
    commit = F.struct("group", "partition", "offset", "advanced", "fate")
    by_commits = commits.groupBy(*TXN_KEY).agg(
        F.count(F.when(F.col("fate") == COMMIT, 1)).alias("offsets_committed"),
        F.sum(F.when(F.col("fate") == COMMIT, F.col("advanced"))).alias("input_advanced"),
        F.collect_set("fate").alias("offset_fates"),
        F.sort_array(F.collect_list(commit)).alias("offsets"),
    )
    return txns.join(by_output, TXN_KEY, "left").join(by_commits, TXN_KEY, "left")


def torn_findings(parts: DataFrame, output_is_copies: bool) -> DataFrame:
    """One anomaly row per torn transaction, with what tore it."""
    committed = F.col("fate").isin(COMMIT, COMMITTING)
    fates = F.array_distinct(
        F.concat(
            F.coalesce("output_fates", F.array().cast("array<string>")),
            F.coalesce("offset_fates", F.array().cast("array<string>")),
        )
    )
    wrote = F.coalesce("output_committed", F.lit(0)) > 0
    committed_offsets = F.coalesce("offsets_committed", F.lit(0)) > 0
    no_offsets = committed & wrote & ~committed_offsets
    no_output = committed & ~wrote & (F.coalesce("input_advanced", F.lit(0)) > 0)
    split = F.array_contains(fates, COMMIT) & F.array_contains(fates, ABORT)
    how = (
        F.when(split, "its markers disagree: COMMIT in some partitions, ABORT in others")
        .when(no_offsets, "it committed output but no offsets of the input")
        .otherwise("it committed input offsets but no output for that input")
    )
    torn = split | no_offsets
    if output_is_copies:
        torn = torn | no_output
    return explode_findings(
        parts,
        finding(
            torn,
            TORN_TRANSACTION.name,
            F.col("began"),
            F.col("txn_id"),
            txn_id=F.col("txn_id"),
            producer_id=F.col("producer_id"),
            producer_epoch=F.col("epoch"),
            began=F.col("began"),
            completed=F.col("completed"),
            fate=F.col("fate"),
            torn=how,
            output=F.col("output"),
            offsets=F.col("offsets"),
        ),
    )


def older_epoch_findings(log: DataFrame, txns: DataFrame) -> DataFrame:
    """One anomaly row per committed transaction prepared after its id's newer session began,
    with that session's epoch and start."""
    newer = session_starts(log).withColumnsRenamed(
        {"epoch": "newer_epoch", "started": "newer_started"}
    )
    zombie = (F.col("newer_epoch") > F.col("epoch")) & (
        F.col("newer_started") * 1000 < F.col("prepared_ms")
    )
    older = (
        txns.filter(F.col("fate").isin(COMMIT, COMMITTING))
        .join(F.broadcast(newer), ["txn_id", "producer_id"])
        .filter(zombie)
        .groupBy(*TXN_KEY, "producer_id", "epoch", "began", "prepared_ms")
        .agg(F.min_by("newer_epoch", "newer_started").alias("newer_epoch"), F.min("newer_started"))
        .withColumnRenamed("min(newer_started)", "newer_started")
    )
    return explode_findings(
        older,
        finding(
            F.lit(True),
            OLDER_EPOCH_COMMIT.name,
            F.col("prepared_ms") / 1000,
            F.col("txn_id"),
            txn_id=F.col("txn_id"),
            producer_id=F.col("producer_id"),
            producer_epoch=F.col("epoch"),
            began=F.col("began"),
            prepared=F.col("prepared_ms") / 1000,
            newer_epoch=F.col("newer_epoch"),
            newer_started=F.col("newer_started"),
        ),
    )
