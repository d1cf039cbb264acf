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
marker there was written. Each read of the output is placed in the batch holding its offset (a
broadcast join of the batches on (topic, partition, offset bucket): batches never overlap,
where the ranges of producers writing one partition at once do); a read whose time is before
its batch's marker time, or of a batch no marker closed, read uncommitted data. Both times
are this machine's wall clock (brokers and readers share it, on both backends), and a read's
time is taken after the poll returned, so a read before the marker is never a late record.

fencing.older-epoch-commit: once a transactional id was initialised again (InitProducerId: a
new producer session at a higher epoch), no transaction of an older epoch of it may commit.
The coordinator enforces that; a commit it recorded anyway is a fencing failure, whatever the
client.

The transaction table has a row per transaction (thousands), so its checks -- torn, older-epoch
and hanging -- are judged on the driver from one collect, with no plan per check; the reads'
check joins the millions of reads to the output's batches in Spark.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.census import Census
from eoschaos.checkers.findings import Found, explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.checkers.log_transactions import (
    ABORT,
    ABORTING,
    COMMIT,
    COMMITTED_FATES,
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

# Offsets per bucket of a range join: a read meets only its bucket's ranges. Small, so that a
# read meets two or three batches, not the forty a bucket of 1024 held at 25 records a batch
# (the join's candidates, each filtered, were its cost); a batch spanning several buckets is a
# row in each, so the ranges grow with the offsets written over 64.
BUCKET = 64


def judge_log_transactions(
    log_txns: DataFrame,
    pieces: DataFrame,
    torn: bool | None,
    outside: DataFrame | None = None,
    offsets_in_transactions: bool = True,
) -> tuple[list[dict[str, Any]], list[Found]]:
    """The logs' transaction table (`transaction_table`), collected once (a row per
    transaction), and what the checks of whole transactions find on it on the driver:
    older-epoch commits, hanging transactions (with the output's unmarked pieces, among
    `pieces`: `output_pieces`) and, where `torn` is set (whether the output holds copies of
    the input), torn ones, with the transactions that consumed input whose copies others
    wrote (`outside`: `outside_copies`, a row per such transaction); without
    `offsets_in_transactions` only by their markers."""
    table = [row.asDict(recursive=True) for row in log_txns.collect()]
    unmarked = [row.asDict() for row in pieces.filter(F.col("fate") == OPEN).collect()]
    found = older_epoch_found(table) + unfinished_found(table) + unmarked_found(unmarked)
    if torn is not None:
        elsewhere = {
            (row["txn_id"], row["txn_seq"]): row.asDict(recursive=True)
            for row in (outside.collect() if outside is not None else [])
        }
        found += torn_found(table, torn, elsewhere, offsets_in_transactions)
    return table, found


# The example fields that name a transaction -> the column of the logs' tables holding each
_NAMES = {"txn_id": "txn_id", "producer_id": "producer_id", "producer_epoch": "epoch"}


def _transaction() -> dict[str, Column]:
    """The example fields that name a transaction, as every row here carries them."""
    return {field: F.col(column) for field, column in _NAMES.items()}


def _named(row: dict[str, Any]) -> dict[str, Any]:
    """`_transaction`'s fields of a collected row."""
    return {field: row[column] for field, column in _NAMES.items()}


def _table_transaction(txn: dict[str, Any]) -> dict[str, Any]:
    """The fields naming a transaction of the logs' table (collected): `_named` and its
    number among its id's transactions (`log_txn_seq`), which the lineage finds it by."""
    return _named(txn) | {"log_txn_seq": txn["txn_seq"]}


def _committed(txn: dict[str, Any]) -> bool:
    return txn["fate"] in COMMITTED_FATES


def torn_found(
    txns: list[dict[str, Any]],
    output_is_copies: bool,
    outside: dict[tuple[str, int], dict[str, Any]] | None = None,
    offsets_in_transactions: bool = True,
) -> list[Found]:
    """One anomaly per torn transaction of the logs' table (collected), with what tore it;
    `outside`: (txn_id, txn_seq) -> the input it consumed whose copies it did not write.

    A pipeline that keeps its input offsets in checkpoints of its own (Flink) commits none in
    its transactions and commits its group's offsets outside them, as its design says: its
    transactions are judged by their markers alone."""
    found = []
    for txn in txns:
        elsewhere = (outside or {}).get((txn["txn_id"], txn["txn_seq"]))
        fates = {*txn["output_fates"], *txn["offset_fates"]}
        wrote = (txn["output_committed"] or 0) > 0
        split = COMMIT in fates and ABORT in fates
        by_offsets = offsets_in_transactions and _committed(txn)
        no_offsets = by_offsets and wrote and not txn["offsets_committed"] > 0
        no_output = by_offsets and not wrote and (txn["input_advanced"] or 0) > 0
        elsewhere = elsewhere if by_offsets else None
        if split:
            how = "its markers disagree: COMMIT in some partitions, ABORT in others"
        elif no_offsets:
            how = "it committed output but no offsets of the input"
        elif no_output and output_is_copies:
            how = "it committed input offsets but no output for that input"
        elif elsewhere and output_is_copies:
            how = (
                f"it committed input offsets over {elsewhere['ids']} records whose copies it "
                "did not write: another producer, or none in a transaction, wrote them"
            )
        else:
            continue
        example = _table_transaction(txn) | {
            "began": txn["began"],
            "completed": txn["completed"],
            "fate": txn["fate"],
            "torn": how,
            "output": txn["output"],
            "offsets": txn["offsets"],
        }
        if elsewhere:
            example["written_outside"] = elsewhere["examples"]
        found.append(Found(TORN_TRANSACTION.name, txn["began"], example, txn["txn_id"]))
    return found


def older_epoch_found(txns: list[dict[str, Any]]) -> list[Found]:
    """One anomaly per committed transaction of the logs' table (collected) decided after its
    id's newer session (a higher epoch) began, with that session's epoch and start."""
    found = []
    for txn in txns:
        newer, epoch = txn["session_epoch"], txn["epoch"]
        if not (_committed(txn) and newer is not None and epoch is not None and newer > epoch):
            continue
        prepared = None if txn["prepared_ms"] is None else txn["prepared_ms"] / 1000
        example = _table_transaction(txn) | {
            "began": txn["began"],
            "prepared": prepared,
            "newer_epoch": newer,
            "newer_started": txn["session_started"],
        }
        found.append(Found(OLDER_EPOCH_COMMIT.name, prepared, example, txn["txn_id"]))
    return found


_UNFINISHED = {
    OPEN: "the coordinator never decided it",
    COMMITTING: "decided COMMIT but never completed",
    ABORTING: "decided ABORT but never completed",
}


def unfinished_found(txns: list[dict[str, Any]]) -> list[Found]:
    """liveness.hanging-transaction, sub-count "coordinator": one anomaly per transaction of
    the logs' table (collected) the coordinator left unfinished."""
    return [
        Found(
            HANGING_TRANSACTION.name,
            txn["began"],
            _table_transaction(txn)
            | {"began": txn["began"], "partitions": txn["partitions"], "hanging": hanging},
            "coordinator",
        )
        for txn in txns
        if (hanging := _UNFINISHED.get(txn["fate"]))
    ]


def unmarked_found(pieces: list[dict[str, Any]]) -> list[Found]:
    """liveness.hanging-transaction, sub-count "partition": one anomaly per partition's output
    no marker closed (Kafka's hanging transaction, KIP-664), from the output's OPEN pieces
    (of `output_pieces`, collected: a producer's unmarked batches of a partition are one
    piece)."""
    return [
        Found(
            HANGING_TRANSACTION.name,
            piece["first_time"],
            _named(piece)
            | {
                "began": piece["first_time"],
                "topic": piece["topic"],
                "partition": piece["partition"],
                "first_offset": piece["first_offset"],
                "last_offset": piece["last_offset"],
                "records": piece["records"],
                "hanging": "its batches in this partition have no marker after them",
            },
            "partition",
        )
        for piece in pieces
    ]


def downstream_readers(census: Census) -> list[str]:
    """Every reader but the final scans, which read after the run and, one of them,
    uncommitted data on purpose."""
    return [name for name in census.readers if name not in FINAL_SCANS]


def downstream_reads(history: History, census: Census, topics: tuple[str, ...]) -> DataFrame:
    """The reads of `topics` by the downstream readers (`downstream_readers`)."""
    return (
        history.kind("read")
        .filter(F.col("topic").isin(*topics) & F.col("process").isin(downstream_readers(census)))
        .select(
            F.col("process").alias("reader"),
            "topic",
            "partition",
            "offset",
            "id",
            "time",
            "isolation",
        )
    )


def buckets(first: str, last: str) -> Column:
    """The offset buckets of the range from column `first` to `last`, a row each (exploded)."""
    return F.explode(F.sequence(F.floor(F.col(first) / BUCKET), F.floor(F.col(last) / BUCKET)))


def placed_reads(reads: DataFrame, batches: DataFrame, how: str = "inner") -> DataFrame:
    """Each read of `reads` (topic, partition, offset) with the batch of `batches`
    (`output_batches`, or any ranges by topic, partition, first and last offset) whose offset
    range holds it: a broadcast join of the ranges on (topic, partition, offset bucket). `how`
    "left" keeps a read no range holds, with nulls."""
    placing = ("topic", "partition")
    ranges = batches.select(
        *[
            F.col(name).alias(f"range_{name}") if name in placing else name
            for name in batches.columns
        ],
        buckets("first_offset", "last_offset").alias("bucket"),
    )
    holds = (
        (F.col("topic") == F.col("range_topic"))
        & (F.col("partition") == F.col("range_partition"))
        & (F.floor(F.col("offset") / BUCKET) == F.col("bucket"))
        & F.col("offset").between(F.col("first_offset"), F.col("last_offset"))
    )
    return reads.join(F.broadcast(ranges), holds, how).drop(
        "bucket", *[f"range_{name}" for name in placing]
    )


def uncommitted_offset_findings(reads: DataFrame, batches: DataFrame) -> DataFrame:
    """One anomaly row per read of `reads` (downstream readers' reads of the output: reader,
    topic, partition, offset, id, time) of a record its transaction had not committed by then, per
    the output's batches and their markers (`output_batches`); sub-counts per reader."""
    # a read of an aborted record is aborted-offset-read
    placed = placed_reads(reads, batches.filter(F.col("fate") != ABORT))
    early = F.col("marker_ms").isNull() | (F.col("time") * 1000 < F.col("marker_ms"))
    return explode_findings(
        placed,
        finding(
            early,
            UNCOMMITTED_OFFSET_READ.name,
            F.col("time"),
            F.col("reader"),
            reader=F.col("reader"),
            topic=F.col("topic"),
            partition=F.col("partition"),
            offset=F.col("offset"),
            id=F.col("id"),
            read_at=F.col("time"),
            committed_at=F.col("marker_ms") / 1000,
            **_transaction(),
        ),
    )


def name_transactions(pieces: DataFrame, examples: list[dict[str, Any]]) -> None:
    """Add to each example of a record (its `topic`, `partition` and `offset`) the
    transaction that wrote it, per the output's pieces (`output_pieces`): transactional id,
    producer id, epoch and the fate its marker gave it. Collects only the ranges holding the
    examples; an example of a topic the pieces do not cover (the input) is left as it is."""
    wanted = [e for e in examples if "topic" in e and "offset" in e]
    if not wanted:
        return
    holds = [
        (F.col("topic") == e["topic"])
        & (F.col("partition") == e["partition"])
        & F.lit(e["offset"]).between(F.col("first_offset"), F.col("last_offset"))
        for e in wanted
    ]
    ranges = pieces.filter(functools.reduce(operator.or_, holds)).collect()
    for example in wanted:
        for piece in ranges:
            same = (piece["topic"], piece["partition"]) == (example["topic"], example["partition"])
            if same and piece["first_offset"] <= example["offset"] <= piece["last_offset"]:
                example.update(
                    txn_id=piece["txn_id"],
                    producer_id=piece["producer_id"],
                    producer_epoch=piece["epoch"],
                    txn_fate=piece["fate"],
                )
