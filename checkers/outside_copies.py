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
as-of lookups: the ranges and batches of a partition never overlap, so each row takes the
last range or batch starting at or before its offset in one sort of the partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

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
    scan = history.kind("read").where(F.col("process") == FINAL_COMMITTED)
    consumed = _consumed(scan.where(F.col("topic").isin(*topics.inputs)), log_txns)
    copies = _written_by(
        scan.where(F.col("topic").isin(*topics.written) & F.col("id").isNotNull()),
        data_batches(log, topics.written),
    )
    inside = F.coalesce(F.col("writer") == F.col("producer_id"), F.lit(False))
    per_id = (
        consumed.join(copies, "id")
        .groupBy("txn_id", "txn_seq", "producer_id", "id", "input")
        .agg(
            F.max(inside).alias("inside"),
            F.min(F.col("transactional").isNotNull()).alias("placed"),
            F.sort_array(F.collect_list("copy")).alias("copies"),
        )
        .where(~F.col("inside") & F.col("placed"))
    )
    example = F.struct("id", "input", "copies")
    return per_id.groupBy("txn_id", "txn_seq").agg(
        F.count(F.lit(1)).alias("ids"),
        F.slice(F.sort_array(F.collect_list(example)), 1, EXAMPLE_IDS).alias("examples"),
    )


def _consumed(inputs: DataFrame, log_txns: DataFrame) -> DataFrame:
    """Each input record of the final scan with the committed transaction whose offset
    commit covered it (per group: two groups consuming one topic each have their chain)."""
    commits = (
        log_txns.where(F.col("fate").isin(*COMMITTED_FATES))
        .select("txn_id", "txn_seq", "producer_id", F.explode("offsets").alias("c"))
        .where(F.col("c.fate") == COMMIT)
        .select(
            "c.group",
            "c.topic",
            "c.partition",
            F.coalesce("c.previous", F.lit(0)).alias("offset"),
            F.struct("txn_id", "txn_seq", "producer_id", F.col("c.offset").alias("end")).alias(
                "range"
            ),
        )
    )
    groups = commits.select("group", "topic").distinct()
    records = inputs.select("topic", "partition", "offset", "id").join(F.broadcast(groups), "topic")
    placed = _as_of(records, commits, ("group", "topic", "partition"), "range")
    return placed.where(F.col("offset") < F.col("range.end")).select(
        "range.txn_id",
        "range.txn_seq",
        "range.producer_id",
        "id",
        F.struct("topic", "partition", "offset").alias("input"),
    )


def _written_by(copies: DataFrame, batches: DataFrame) -> DataFrame:
    """Each output record of the final scan with its batch's (`batches`: `data_batches`)
    producer (`writer`, null for a batch outside any transaction) and whether a batch was
    found for it (`transactional` null: none recorded holds its offset, so it is not judged)."""
    headers = batches.select(
        "topic",
        "partition",
        "offset",
        F.struct("last_offset", "producer_id", "transactional").alias("batch"),
    )
    placed = _as_of(
        copies.select("topic", "partition", "offset", "id"),
        headers,
        ("topic", "partition"),
        "batch",
    )
    held = F.col("offset") <= F.col("batch.last_offset")
    transactional = F.when(held, F.col("batch.transactional"))
    return placed.select(
        "id",
        transactional.alias("transactional"),
        F.when(transactional, F.col("batch.producer_id")).alias("writer"),
        F.struct(
            "topic",
            "partition",
            "offset",
            F.when(held, F.col("batch.producer_id")).alias("producer_id"),
            transactional.alias("transactional"),
        ).alias("copy"),
    )


def _as_of(rows: DataFrame, spans: DataFrame, keys: tuple[str, ...], span: str) -> DataFrame:
    """`rows` with the last of `spans` (a struct column `span`, at `offset`) starting at or
    before each row's offset in the same `keys`: one shuffle and sort of both sides."""
    marked = spans.select(*keys, "offset", F.lit(0).alias("side"), span).unionByName(
        rows.withColumn("side", F.lit(1)).withColumn(
            span, F.lit(None).cast(spans.schema[span].dataType)
        ),
        allowMissingColumns=True,
    )
    so_far = (
        Window.partitionBy(*keys)
        .orderBy("offset", "side")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    last: Column = F.last(span, ignorenulls=True).over(so_far)
    return marked.withColumn(span, last).where(F.col("side") == 1).drop("side")
