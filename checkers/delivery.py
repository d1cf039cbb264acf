"""Exactly-once delivery: every input record is reflected exactly once in the committed output.

One pass: sends, the final committed input scan and the final committed output scan are
unioned and grouped by record id, and every delivery check is a condition on that one row per
id. A record's place (partition, offset) travels as one long so min/max can tell one copy from
two without collecting lists.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import DUPLICATE, DUPLICATE_INPUT, LOST, PHANTOM, UNSEEN
from eoschaos.contract.history import FINAL_COMMITTED

OFFSET_BITS = 40  # place = partition << 40 | offset: offsets below 2^40, partitions below 2^23


def place(partition: str = "partition", offset: str = "offset") -> Column:
    return F.shiftleft(F.col(partition).cast("long"), OFFSET_BITS) + F.col(offset)


def _partition_of(place_column: str) -> Column:
    return F.shiftright(F.col(place_column), OFFSET_BITS).cast("int")


def _offset_of(place_column: str) -> Column:
    return F.col(place_column).bitwiseAND((1 << OFFSET_BITS) - 1)


def _at(place_column: str) -> Column:
    return F.struct(
        _partition_of(place_column).alias("partition"), _offset_of(place_column).alias("offset")
    )


# Where a row of the delivery pass comes from: every row is (id, source, place, kept), so the
# shuffle carries four narrow columns instead of one mostly-null column per source's field.
SENT, ACKED, INPUT, OUTPUT = 0, 1, 2, 3


def delivery_findings(
    history: History, committed: dict[int, int | None] | None = None
) -> DataFrame:
    """Anomaly rows of the delivery checks. `committed`: the group's final committed offset
    of each input partition (liveness.committed_offsets), which parts a record never
    delivered into lost (the pipeline moved past it) and unseen (it never got there); None
    where the group's offsets are not known, and every such record is lost."""
    acked = F.col("type") == "ok"
    sends = history.kind("send").select(
        "id",
        F.when(acked, ACKED).otherwise(SENT).cast("byte").alias("source"),
        F.when(acked, place()).alias("place"),
        F.lit(False).alias("kept"),
    )
    final_scan = history.kind("read").filter(F.col("process") == FINAL_COMMITTED)
    # `kept`: the reader kept this copy as it was (a repeat of an id: a duplicate's copy)
    scanned = final_scan.select(
        "id",
        F.when(F.col("topic") == history.input_topic, INPUT)
        .when(F.col("topic") == history.output_topic, OUTPUT)
        .cast("byte")
        .alias("source"),
        place().alias("place"),
        F.col("params").isNotNull().alias("kept"),
    ).filter(F.col("source").isNotNull())

    def of(source: int, value: Column | str) -> Column:
        return F.when(F.col("source") == source, value)

    in_place, out_place = of(INPUT, F.col("place")), of(OUTPUT, F.col("place"))
    per_id = (
        sends.unionByName(scanned)
        # Sorted by id, the grouping streams (a sort aggregate, kept by the order-sensitive
        # first()) instead of probing a hash map of millions of ids that does not fit a cache.
        .repartition("id")
        .sortWithinPartitions("id")
        .groupBy("id")
        .agg(
            F.max(F.when(F.col("source") <= ACKED, 1)).alias("sent"),
            F.max(of(ACKED, 1).otherwise(of(SENT, 0))).alias("acked"),  # null: never sent
            F.first(of(ACKED, F.col("place")), ignorenulls=True).alias("ack_place"),
            F.count(in_place).alias("in_n"),
            F.min(in_place).alias("in_first"),
            F.max(in_place).alias("in_last"),
            F.count(out_place).alias("out_n"),
            F.min(out_place).alias("out_first"),
            F.max(out_place).alias("out_last"),
            F.max(of(INPUT, F.col("kept").cast("int"))).alias("in_kept"),
            F.max(of(OUTPUT, F.col("kept").cast("int"))).alias("out_kept"),
        )
        .withColumn("exists", (F.col("acked") == 1) | (F.col("in_n") > 0))
    )
    identity = F.col("id").cast("double")

    def kept_first(kept: str) -> Column:
        """Examples whose copy the reader kept as it was come first, so the report can show
        the record itself (readers keep a bounded number of copies)."""
        return identity + F.when(F.col(kept) == 1, 0.0).otherwise(1e15)

    input_place = F.coalesce("in_first", "ack_place")
    undelivered = F.col("exists") & (F.col("out_n") == 0)
    group_offset = _group_offset(_partition_of("input_place"), committed or {})
    # a partition the group never committed: every record in it is at or above its offset
    unseen = (
        F.lit(False)
        if committed is None
        else _offset_of("input_place") >= F.coalesce(group_offset, F.lit(-1))
    )
    return explode_findings(
        per_id.withColumn("input_place", input_place),
        finding(
            undelivered & ~unseen,
            LOST.name,
            identity,
            id=F.col("id"),
            partition=_partition_of("input_place"),
            offset=_offset_of("input_place"),
            acked=F.col("acked") == 1,
        ),
        finding(
            undelivered & unseen,
            UNSEEN.name,
            identity,
            id=F.col("id"),
            partition=_partition_of("input_place"),
            offset=_offset_of("input_place"),
            group_offset=group_offset,
            acked=F.col("acked") == 1,
        ),
        finding(
            # Each input copy of an id is a record of its own: a duplicate is an output copy
            # beyond them (an input duplicate is the producer's fault, reported below).
            # Output records naming no id at all are one phantom row, not copies of a record.
            (F.col("out_n") > F.greatest(F.col("in_n"), F.lit(1))) & F.col("id").isNotNull(),
            DUPLICATE.name,
            kept_first("out_kept"),
            id=F.col("id"),
            copies=F.col("out_n"),
            first=_at("out_first"),
            last=_at("out_last"),
        ),
        finding(
            (F.col("out_n") > 0) & F.col("sent").isNull() & (F.col("in_n") == 0),
            PHANTOM.name,
            identity,
            id=F.col("id"),
            partition=_partition_of("out_first"),
            offset=_offset_of("out_first"),
            copies=F.col("out_n"),
        ),
        finding(
            F.col("in_first") != F.col("in_last"),
            DUPLICATE_INPUT.name,
            kept_first("in_kept"),
            id=F.col("id"),
            copies=F.col("in_n"),
            first=_at("in_first"),
            last=_at("in_last"),
        ),
    )


def _group_offset(partition: Column, committed: dict[int, int | None]) -> Column:
    """The group's committed offset of `partition` as a literal lookup: a few partitions,
    so a CASE beats a join (null: never committed, or no such partition)."""
    known = sorted((number, value) for number, value in committed.items() if value is not None)
    if not known:
        return F.lit(None).cast("long")
    (first, first_value), *rest = known
    offset = F.when(partition == first, F.lit(first_value))
    for number, value in rest:
        offset = offset.when(partition == number, F.lit(value))
    return offset.cast("long")
