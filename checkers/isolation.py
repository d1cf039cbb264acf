"""read_committed isolation: what readers saw versus what was committed, and in which order.

Two passes over the reads:
- per offset (inconsistent-offsets, order): every read of both topics is shuffled once by
  (topic, partition), sorted by offset and grouped by it with one conditional column per
  reader; a window over each partition in offset order then finds, per reader, offsets read
  out of order (a later offset read earlier), offsets read twice, and committed offsets it
  stepped over inside the range it read;
- per transaction (aborted, uncommitted, fractured): what each downstream reader saw of each
  transaction, from eoschaos.checkers.transactions.transaction_reads, collected (a row per
  reader and transaction) and judged on the driver.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.checkers.census import Census
from eoschaos.checkers.codes import code_of, looked_up, name_of
from eoschaos.checkers.findings import Found, explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.checkers.transactions import PARTITION_SHIFT, TXN_KEY
from eoschaos.contract.checks import (
    ABORTED_OFFSET_READ,
    ABORTED_READ,
    FRACTURED_READ,
    INCONSISTENT_OFFSETS,
    ORDER,
    UNCOMMITTED_READ,
)
from eoschaos.contract.history import FINAL_COMMITTED, FINAL_SCANS

# place = topic code << 56 | partition << PARTITION_SHIFT | offset: a topic's code is its index
# in the run's topics (History.topics.all: input 0 and output 1 in a one-topic run), below 2^7
TOPIC_SHIFT = 56


def offset_findings(history: History, census: Census) -> DataFrame:
    """Anomaly rows of isolation.inconsistent-offsets, isolation.order and
    isolation.aborted-offset-read."""
    names = census.readers
    # The window below needs each topic-partition whole and in offset order, so the reads
    # are shuffled and sorted that way once; grouping by offset then streams over the
    # sorted rows (a sort aggregate: first() is order-sensitive, so the sort is kept).
    # (pk, place) in this order throughout: the aggregate's output is then already in the
    # window's order, where (place, pk) made Spark sort every offset's row a second time.
    reads = offset_reads(history, names).repartition("pk").sortWithinPartitions("pk", "place")
    by_reader = []
    for index in range(len(names)):
        mine = F.col("reader") == index
        by_reader += [
            F.count(F.when(mine, 1)).alias(f"n{index}"),
            F.min(F.when(mine, F.col("time"))).alias(f"t{index}"),
            F.first(F.when(mine, F.col("id")), ignorenulls=True).alias(f"id{index}"),
        ]
    per_offset = reads.groupBy("pk", "place").agg(
        F.min("id").alias("id_min"), F.max("id").alias("id_max"), *by_reader
    )
    before = Window.partitionBy("pk").orderBy("place").rowsBetween(Window.unboundedPreceding, -1)
    context = []
    for index, name in enumerate(names):
        read_here = F.when(F.col(f"n{index}") > 0, F.col("place"))
        context += [
            F.last(F.col(f"t{index}"), ignorenulls=True).over(before).alias(f"prev_t{index}"),
            F.last(read_here, ignorenulls=True).over(before).alias(f"prev_place{index}"),
            _bound(census, history, name, "first").alias(f"lo{index}"),
            _bound(census, history, name, "last").alias(f"hi{index}"),
        ]
    context.append(_final_lso(census, history).alias("lso"))
    ordered = per_offset.select(
        "*",
        F.shiftright("place", TOPIC_SHIFT).alias("t"),
        F.col("pk")
        .bitwiseAND((1 << (TOPIC_SHIFT - PARTITION_SHIFT)) - 1)
        .cast("int")
        .alias("partition"),
        _offset_of("place").alias("offset"),
        *context,
    )
    topic = name_of(F.col("t"), history.topics.all)
    where = {"topic": topic, "partition": F.col("partition"), "offset": F.col("offset")}
    rank = F.col("partition") * 1e12 + F.col("offset")  # examples in place order
    candidates = [
        finding(
            F.col("id_min") != F.col("id_max"),
            INCONSISTENT_OFFSETS.name,
            rank,
            **where,
            ids=F.struct(*[F.col(f"id{i}").alias(name) for i, name in enumerate(names)]),
        )
    ]
    final = names.index(FINAL_COMMITTED) if FINAL_COMMITTED in names else None
    for index, name in enumerate(names):
        n, who = F.col(f"n{index}"), F.lit(name)
        candidates += [
            finding(n > 1, ORDER.name, rank, "repeat", reader=who, **where, reads=n),
            finding(
                F.col(f"t{index}") < F.col(f"prev_t{index}"),
                ORDER.name,
                rank,
                "backwards",
                reader=who,
                topic=topic,
                partition=F.col("partition"),
                offset=_offset_of(f"prev_place{index}"),
                after=F.col("offset"),
            ),
        ]
        if final is not None and name not in FINAL_SCANS:
            # After the run every transaction has ended (the end state waits for it), so below
            # the LSO whatever the committed scan skipped is an aborted record or a marker
            candidates.append(
                finding(
                    (n > 0) & (F.col(f"n{final}") == 0) & (F.col("offset") < F.col("lso")),
                    ABORTED_OFFSET_READ.name,
                    rank,
                    reader=who,
                    **where,
                    id=F.col(f"id{index}"),
                )
            )
        if final is not None and index != final:
            candidates.append(
                finding(
                    (F.col(f"n{final}") > 0)
                    & (n == 0)
                    & (F.col("offset") > F.col(f"lo{index}"))
                    & (F.col("offset") < F.col(f"hi{index}")),
                    ORDER.name,
                    rank,
                    "skip",
                    reader=who,
                    **where,
                    id=F.col(f"id{final}"),
                )
            )
    return explode_findings(ordered, *candidates)


def offset_reads(history: History, names: list[str]) -> DataFrame:
    """Every read of both topics as the per-offset pass shuffles it: (place, reader, id, time,
    pk), the reader as its index in `names`. Its shuffle by pk alone is the floor of the pass
    (scripts/bench_checkers.py times it)."""
    topic_code = code_of("topic", {topic: code for code, topic in enumerate(history.topics.all)})
    reader_code = code_of("process", {name: index for index, name in enumerate(names)})
    return (
        history.kind("read")
        .select(
            topic_code.alias("t"), "partition", "offset", "id", "time", reader_code.alias("reader")
        )
        .filter(F.col("t").isNotNull())
        .select(
            (
                F.shiftleft(F.col("t").cast("long"), TOPIC_SHIFT)
                + F.shiftleft(F.col("partition").cast("long"), PARTITION_SHIFT)
                + F.col("offset")
            ).alias("place"),
            "reader",
            "id",
            "time",
        )
        .withColumn("pk", _topic_partition())
    )


def _topic_partition() -> Column:
    return F.shiftright("place", PARTITION_SHIFT)


def _offset_of(place: str) -> Column:
    return F.col(place).bitwiseAND((1 << PARTITION_SHIFT) - 1)


def _final_lso(census: Census, history: History) -> Column:
    """The end state's last stable offset of this row's topic-partition (null without one)."""
    codes = {topic: code for code, topic in enumerate(history.topics.all)}
    lsos = {
        (codes[row["topic"]] << (TOPIC_SHIFT - PARTITION_SHIFT)) + row["partition"]: row["lso"]
        for row in census.end_rows_of("log-end")
        if row["topic"] in codes and row["lso"] is not None
    }
    return looked_up(F.col("pk"), lsos, "long")


def _bound(census: Census, history: History, reader: str, which: str) -> Column:
    """The first or last offset `reader` read in this row's topic-partition (census figures),
    as a literal map lookup: a reader stepping over a committed record is only judged within
    the range it read."""
    offsets = census.first_offsets if which == "first" else census.last_offsets
    codes = {topic: code for code, topic in enumerate(history.topics.all)}
    bounds = {
        (codes[topic] << (TOPIC_SHIFT - PARTITION_SHIFT)) + partition: offset
        for (name, topic, partition), offset in offsets.items()
        if name == reader and topic in codes
    }
    return looked_up(F.col("pk"), bounds, "long")


def transaction_read_found(txn_reads: list[dict[str, Any]], drained: list[str]) -> list[Found]:
    """aborted-read, uncommitted-read and fractured-read, from what each downstream reader saw
    of each transaction (eoschaos.checkers.transactions.transaction_reads, collected: a row per
    reader and transaction)."""
    found = []
    for row in txn_reads:
        reader, aborted = row["process"], bool(row["aborted"])
        txn = {name: row[name] for name in [*TXN_KEY, "txn_id"]}
        if aborted:
            read = row["first_read"]
            example = {"reader": reader, **_read_example(read), **txn, "reads": row["seen"]}
            found.append(Found(ABORTED_READ.name, _read_rank(read), example, reader, row["seen"]))
        elif (early := row["before_commit"]) > 0:
            read = row["early_read"]
            example = {
                "reader": reader,
                **_read_example(read),
                **txn,
                "commit_invoked": row["commit_invoked"],
                "reads": early,
            }
            found.append(Found(UNCOMMITTED_READ.name, _read_rank(read), example, reader, early))
        size, seq = row["txn_size"], row["txn_seq"]
        if reader in drained and not aborted and size is not None and row["seen"] < size:
            example = {"reader": reader, **txn, "txn_size": size, "seen": row["seen"]}
            order = None if seq is None or row["instance"] is None else seq * 1e4 + row["instance"]
            found.append(Found(FRACTURED_READ.name, order, example, reader))
    return found


def _read_rank(read: dict[str, Any] | None) -> float | None:
    """A read's place as one sortable number: partition, then offset."""
    return None if read is None else read["partition"] * 1e13 + read["offset"]


def _read_example(read: dict[str, Any] | None) -> dict[str, Any]:
    return {name: read[name] if read else None for name in ("partition", "offset", "id", "time")}
