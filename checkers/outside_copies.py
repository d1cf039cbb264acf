"""Input that a transaction consumed, whose output it did not write: a tear only the logs show.

A consume-transform-produce transaction commits its input's offsets with the output of that
input (KIP-98, KIP-447). From the brokers' logs, each committed transactional offset commit
says which input records its transaction consumed (from the group's committed offset before
it to its own), and each output batch header says who wrote a record and whether in a
transaction. Where the output holds copies of the input, every input record so consumed
with a copy in the final committed scan must have a copy written transactionally by the
producer that committed its offsets. A record whose every copy another producer wrote, or
no transaction did, was written outside the transaction that consumed it: a side output (a
dead letter, an error handler's producer) that the transaction's abort does not undo, so a
retry writes it again. It shows on every such record, fault or none. delivery.torn-transaction
counts one per transaction (eoschaos.checkers.log_findings).

Both placements (an input record in its commit's range, an output record in its batch) are
range joins on broadcast ranges by offset bucket, as the reads of the output are placed in
their batches (log_findings.placed_reads): the ranges of a group's partition never overlap,
nor do a partition's batches, and both grow with transactions and batches (and the offsets
the groups committed over, a row per BUCKET of them), not with the records read. One scan of
the final committed reads places both sides without a shuffle; the records then meet their
copies by id in one aggregation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.log_findings import placed_reads
from eoschaos.checkers.log_transactions import COMMIT, COMMITTED_FATES, data_batches
from eoschaos.contract.history import FINAL_COMMITTED

if TYPE_CHECKING:
    from eoschaos.checkers.history_io import History

EXAMPLE_IDS = 5  # ids each torn transaction's example lists


def outside_copies(history: History, log: DataFrame, log_txns: DataFrame) -> DataFrame:
    """Per committed transaction of the logs' table (`log_txns`) that consumed input records
    whose every committed copy was written outside it: txn_id, txn_seq, how many (`ids`), and
    the first few as examples, each with its input place and its copies' writers."""
    topics = history.topics
    scan = history.kind("read").where(
        (F.col("process") == FINAL_COMMITTED)
        & F.col("id").isNotNull()
        & F.col("topic").isin(*topics.inputs, *topics.written)
    )
    place = F.struct("topic", "partition", "offset")
    placed = _in_ranges(
        _in_ranges(scan, _commit_ranges(log_txns)), _batch_ranges(log, topics.written)
    )
    transactional = F.col("batch.transactional")
    consumer = F.when(
        F.col("commit").isNotNull(),
        F.struct("commit.txn_id", "commit.txn_seq", "commit.producer_id", place.alias("input")),
    )
    copy = F.when(
        F.col("topic").isin(*topics.written),
        F.struct(
            "topic",
            "partition",
            "offset",
            F.col("batch.producer_id").alias("producer_id"),
            transactional.alias("transactional"),
        ),
    )
    per_id = (
        placed.groupBy("id")
        .agg(
            F.array_distinct(F.collect_list(consumer)).alias("consumers"),
            F.sort_array(F.collect_list(copy)).alias("copies"),
        )
        .where(F.size("copies") > 0)
        .select("id", "copies", F.explode("consumers").alias("c"))
        .where(
            ~F.exists(
                "copies", lambda c: F.coalesce(_writer(c) == F.col("c.producer_id"), F.lit(False))
            )
            & F.forall("copies", lambda c: c["transactional"].isNotNull())
        )
    )
    example = F.struct("id", F.col("c.input").alias("input"), "copies")
    return per_id.groupBy("c.txn_id", "c.txn_seq").agg(
        F.count(F.lit(1)).alias("ids"),
        F.slice(F.sort_array(F.collect_list(example)), 1, EXAMPLE_IDS).alias("examples"),
    )


def _writer(copy: Column) -> Column:
    """Who wrote a copy in a transaction: its batch's producer, null outside any transaction
    or where no recorded batch holds it."""
    return F.when(copy["transactional"], copy["producer_id"])


def _commit_ranges(log_txns: DataFrame) -> DataFrame:
    """The input each committed transaction's offset commits consumed, per group: from the
    group's committed offset before the commit (null: the start) up to its own, exclusive."""
    return (
        log_txns.where(F.col("fate").isin(*COMMITTED_FATES))
        .select("txn_id", "txn_seq", "producer_id", F.explode("offsets").alias("c"))
        .where(F.col("c.fate") == COMMIT)
        .select(
            "c.topic",
            "c.partition",
            F.coalesce("c.previous", F.lit(0)).alias("first_offset"),
            (F.col("c.offset") - 1).alias("last_offset"),
            F.struct("txn_id", "txn_seq", "producer_id").alias("commit"),
        )
        .where(F.col("first_offset") <= F.col("last_offset"))
    )


def _batch_ranges(log: DataFrame, written: tuple[str, ...]) -> DataFrame:
    """The written topics' data batches (`data_batches`): their producer, and whether
    in a transaction."""
    return data_batches(log, written).select(
        "topic",
        "partition",
        F.col("offset").alias("first_offset"),
        "last_offset",
        F.struct("producer_id", "transactional").alias("batch"),
    )


def _in_ranges(rows: DataFrame, ranges: DataFrame) -> DataFrame:
    """`rows` (topic, partition, offset) each with the struct of every range of `ranges`
    (topic, partition, first and last offset, and one struct) holding its offset, or null where
    none does (`placed_reads`, keeping every row)."""
    return placed_reads(rows, ranges, how="left").drop("first_offset", "last_offset")
