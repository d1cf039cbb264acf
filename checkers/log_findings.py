"""Checks of whole transactions from the brokers' logs, for any transactional pipeline.

delivery.torn-transaction: a consume-transform-produce transaction is one unit -- its output
and its input's offsets commit together or not at all (KIP-98, KIP-447). From the logs'
transaction table (eoschaos.checkers.log_transactions), a transaction the coordinator
committed is torn when it committed output but no offsets of the input (a pipeline that
commits its offsets outside its transaction: after a crash between the two, its input is
consumed again or skipped), when it committed offsets that moved an input partition forward
but wrote no output (an output of copies has a record for every input record consumed), or
when its markers disagree (COMMIT in one partition, ABORT in another).

liveness.hanging-transaction: after the run every transaction has ended (the end state waits
for it), so the logs must show each one finished: the coordinator completed it, and every
partition it wrote holds a marker after its batches. A transaction the coordinator never
completed, or batches no marker closed (KIP-664), hold read_committed readers back forever.

isolation.uncommitted-offset-read: a read_committed reader may return a transaction's record
only once the partition's last stable offset passed it, which is after the transaction's
marker there was written. Each read of the output is placed in its producer's range by offset
(a broadcast join of the ranges on (partition, offset bucket)); a read whose time is before
that range's marker time, or of a range no marker closed, read uncommitted data. Both times
are this machine's wall clock (brokers and readers share it, on both backends), and a read's
time is taken after the poll returned, so a read before the marker is never a late record.

fencing.older-epoch-commit: once a transactional id was initialised again (InitProducerId: a
new producer session at a higher epoch), no transaction of an older epoch of it may commit.
The coordinator enforces that; a commit it recorded anyway is a fencing failure, whatever the
client.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.census import Census
from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.checkers.log_transactions import (
    ABORT,
    ABORTING,
    COMMIT,
    COMMITTING,
    OPEN,
)
from eoschaos.contract.checks import (
    HANGING_TRANSACTION,
    OLDER_EPOCH_COMMIT,
    TORN_TRANSACTION,
    UNCOMMITTED_OFFSET_READ,
)
from eoschaos.contract.history import FINAL_SCANS

BUCKET = 1024  # offsets per bucket of a range join: a read or batch meets only its bucket's ranges


def _transaction() -> dict[str, Column]:
    """The example fields that name a transaction, as every row here carries them."""
    return {
        "txn_id": F.col("txn_id"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("epoch"),
    }


def _table_transaction() -> dict[str, Column]:
    """The fields naming a transaction of the logs' table: `_transaction` and its number
    among its id's transactions (`log_txn_seq`), which the lineage finds it by."""
    return _transaction() | {"log_txn_seq": F.col("txn_seq")}


def torn_findings(txns: DataFrame, output_is_copies: bool) -> DataFrame:
    """One anomaly row per torn transaction of the logs' table, with what tore it."""
    committed = F.col("fate").isin(COMMIT, COMMITTING)
    fates = F.array_union("output_fates", "offset_fates")
    wrote = F.coalesce("output_committed", F.lit(0)) > 0
    committed_offsets = F.col("offsets_committed") > 0
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
        txns,
        finding(
            torn,
            TORN_TRANSACTION.name,
            F.col("began"),
            F.col("txn_id"),
            **_table_transaction(),
            began=F.col("began"),
            completed=F.col("completed"),
            fate=F.col("fate"),
            torn=how,
            output=F.col("output"),
            offsets=F.col("offsets"),
        ),
    )


def older_epoch_findings(txns: DataFrame) -> DataFrame:
    """One anomaly row per committed transaction decided after its id's newer session (a
    higher epoch) began, with that session's epoch and start."""
    return explode_findings(
        txns,
        finding(
            F.col("fate").isin(COMMIT, COMMITTING) & (F.col("session_epoch") > F.col("epoch")),
            OLDER_EPOCH_COMMIT.name,
            F.col("prepared_ms") / 1000,
            F.col("txn_id"),
            **_table_transaction(),
            began=F.col("began"),
            prepared=F.col("prepared_ms") / 1000,
            newer_epoch=F.col("session_epoch"),
            newer_started=F.col("session_started"),
        ),
    )


def hanging_findings(txns: DataFrame, pieces: DataFrame) -> DataFrame:
    """One anomaly row per transaction the coordinator left unfinished (sub-count
    "coordinator") and per partition's output no marker closed ("partition": Kafka's hanging
    transaction, KIP-664), from the output's pieces (`output_pieces`)."""
    unfinished = explode_findings(
        txns,
        finding(
            F.col("fate").isin(OPEN, COMMITTING, ABORTING),
            HANGING_TRANSACTION.name,
            F.col("began"),
            "coordinator",
            **_table_transaction(),
            began=F.col("began"),
            partitions=F.col("partitions"),
            hanging=F.when(F.col("fate") == OPEN, "the coordinator never decided it")
            .when(F.col("fate") == COMMITTING, "decided COMMIT but never completed")
            .otherwise("decided ABORT but never completed"),
        ),
    )
    unmarked = explode_findings(
        pieces.filter(F.col("fate") == OPEN),
        finding(
            F.lit(True),
            HANGING_TRANSACTION.name,
            F.col("first_time"),
            "partition",
            **_transaction(),
            began=F.col("first_time"),
            partition=F.col("partition"),
            first_offset=F.col("first_offset"),
            last_offset=F.col("last_offset"),
            records=F.col("records"),
            hanging=F.lit("its batches in this partition have no marker after them"),
        ),
    )
    return unfinished.unionByName(unmarked)


def downstream_reads(history: History, census: Census, topic: str) -> DataFrame:
    """The reads of `topic` by downstream readers (every reader but the final scans, which
    read after the run and, one of them, uncommitted data on purpose)."""
    readers = [name for name in census.readers if name not in FINAL_SCANS]
    return (
        history.kind("read")
        .filter((F.col("topic") == topic) & F.col("process").isin(readers))
        .select(F.col("process").alias("reader"), "partition", "offset", "id", "time", "isolation")
    )


def placed_reads(reads: DataFrame, pieces: DataFrame) -> DataFrame:
    """Each read of `reads` (partition, offset) with the piece of `pieces` (`output_pieces`)
    whose offset range holds it: a broadcast join of the ranges on (partition, offset bucket)."""
    ranges = pieces.withColumn(
        "bucket",
        F.explode(
            F.sequence(
                F.floor(F.col("first_offset") / BUCKET), F.floor(F.col("last_offset") / BUCKET)
            )
        ),
    )
    placed = reads.withColumn("bucket", F.floor(F.col("offset") / BUCKET)).join(
        F.broadcast(ranges), ["partition", "bucket"]
    )
    return placed.filter(F.col("offset").between(F.col("first_offset"), F.col("last_offset")))


def uncommitted_offset_findings(reads: DataFrame, pieces: DataFrame) -> DataFrame:
    """One anomaly row per read of `reads` (downstream readers' reads of the output: reader,
    partition, offset, id, time) of a record its transaction had not committed by then, per
    the output's ranges and markers (`output_pieces`); sub-counts per reader."""
    # a read of an aborted record is aborted-offset-read
    placed = placed_reads(reads, pieces.filter(F.col("fate") != ABORT))
    early = F.col("marker_ms").isNull() | (F.col("time") * 1000 < F.col("marker_ms"))
    return explode_findings(
        placed,
        finding(
            early,
            UNCOMMITTED_OFFSET_READ.name,
            F.col("time"),
            F.col("reader"),
            reader=F.col("reader"),
            partition=F.col("partition"),
            offset=F.col("offset"),
            id=F.col("id"),
            read_at=F.col("time"),
            committed_at=F.col("marker_ms") / 1000,
            **_transaction(),
        ),
    )


def name_transactions(pieces: DataFrame, examples: list[dict[str, Any]], topic: str) -> None:
    """Add to each example of a record of `topic` (its `partition` and `offset`) the
    transaction that wrote it, per the output's pieces (`output_pieces`): transactional id,
    producer id, epoch and the fate its marker gave it. Collects only the ranges holding the
    examples."""
    wanted = [e for e in examples if e.get("topic") == topic and "offset" in e]
    if not wanted:
        return
    holds = [
        (F.col("partition") == e["partition"])
        & F.lit(e["offset"]).between(F.col("first_offset"), F.col("last_offset"))
        for e in wanted
    ]
    ranges = pieces.filter(functools.reduce(operator.or_, holds)).collect()
    for example in wanted:
        for piece in ranges:
            if piece["partition"] == example["partition"] and (
                piece["first_offset"] <= example["offset"] <= piece["last_offset"]
            ):
                example.update(
                    txn_id=piece["txn_id"],
                    producer_id=piece["producer_id"],
                    producer_epoch=piece["epoch"],
                    txn_fate=piece["fate"],
                )
