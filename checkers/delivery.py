"""Exactly-once delivery: every input record is reflected exactly once in the committed output.

One pass: sends, the final committed input scan and the final committed output scan are
unioned and grouped by record id, and every delivery check is a condition on that one row per
id. A record's place (partition, offset) travels as one long so min/max can tell one copy from
two without collecting lists. Where a run names several input or output topics (byo), the
place holds the topic's index among its role's too, and the output side is every output and
dead-letter topic: an id is delivered once across all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.codes import code_of, looked_up, name_of
from eoschaos.checkers.findings import Candidate, explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import DUPLICATE, DUPLICATE_INPUT, LOST, PHANTOM, UNSEEN
from eoschaos.contract.history import FINAL_COMMITTED

# place = (topic index << 16 | partition) << 40 | offset: offsets below 2^40, partitions below
# 2^16, topic indexes (within a role) below 2^7 (MAX_TOPICS_PER_ROLE); the first topic's index
# is 0, so a one-topic run's places are partition << 40 | offset
OFFSET_BITS = 40
PARTITION_BITS = 16


def place(partition: str = "partition", offset: str = "offset") -> Column:
    return F.shiftleft(F.col(partition).cast("long"), OFFSET_BITS) + F.col(offset)


def topic_place(*roles: tuple[str, ...]) -> Column:
    """A read's place among its role's topics (`roles`: each role's, e.g. inputs and outputs):
    place() where each role has one."""
    index = _topic_index(*roles)
    if index is None:
        return place()
    return F.shiftleft(index.cast("long"), OFFSET_BITS + PARTITION_BITS) + place()


def _topic_index(*roles: tuple[str, ...]) -> Column | None:
    """The row's topic's index among its role's topics (0: the first, or a topic of no role,
    whose rows are dropped before their place matters); None where every role has one."""
    if all(len(topics) == 1 for topics in roles):
        return None
    codes = {topic: number for topics in roles for number, topic in enumerate(topics)}
    return F.coalesce(code_of("topic", codes), F.lit(0))


def _partition_of(place_column: str) -> Column:
    return (
        F.shiftright(F.col(place_column), OFFSET_BITS)
        .bitwiseAND((1 << PARTITION_BITS) - 1)
        .cast("int")
    )


def _offset_of(place_column: str) -> Column:
    return F.col(place_column).bitwiseAND((1 << OFFSET_BITS) - 1)


def _at(place_column: str, topics: tuple[str, ...]) -> Column:
    """An example's place as one struct (a duplicate's first and last copy)."""
    return F.struct(*[value.alias(key) for key, value in _placed_on(place_column, topics).items()])


def _placed_on(place_column: str, topics: tuple[str, ...]) -> dict[str, Column]:
    """An example's partition and offset fields (and topic, where its role has several)."""
    fields = {"partition": _partition_of(place_column), "offset": _offset_of(place_column)}
    if len(topics) > 1:
        fields["topic"] = name_of(
            F.shiftright(F.col(place_column), OFFSET_BITS + PARTITION_BITS), topics
        )
    return fields


# Where a row of the delivery pass comes from: every row is (id, source, place, kept), so the
# shuffle carries four narrow columns instead of one mostly-null column per source's field.
# A declared fan-out topic is a source of its own: FAN_OUT + its index.
SENT, ACKED, INPUT, OUTPUT, FAN_OUT = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class _Written:
    """Topics an id must be in exactly once, together: the outputs with the dead-letter
    topics, or one fan-out topic."""

    source: int
    topics: tuple[str, ...]
    prefix: str  # of its columns in the per-id row

    def column(self, name: str) -> str:
        return f"{self.prefix}_{name}"


def delivery_findings(
    history: History, committed: dict[tuple[str, int], int | None] | None = None
) -> DataFrame:
    """Anomaly rows of the delivery checks. `committed`: the group's final committed offset
    of each input topic's partitions (liveness.committed_offsets), which parts a record never
    delivered into lost (the pipeline moved past it) and unseen (it never got there); None
    where the group's offsets are not known, and every such record is lost. A declared
    fan-out topic is judged on its own: each id once in it (lost, duplicate and phantom, each
    example naming the topic)."""
    topics = history.topics
    inputs, outputs = topics.inputs, topics.delivered_to
    delivered = _Written(OUTPUT, outputs, "out")
    fan_outs = [
        _Written(FAN_OUT + index, (topic,), f"fan{index}")
        for index, topic in enumerate(topics.fan_outs)
    ]
    acked = F.col("type") == "ok"
    sends = history.kind("send").select(
        "id",
        F.when(acked, ACKED).otherwise(SENT).cast("byte").alias("source"),
        F.when(acked, topic_place(inputs)).alias("place"),
        F.lit(False).alias("kept"),
    )
    final_scan = history.kind("read").filter(F.col("process") == FINAL_COMMITTED)
    on_input = F.col("topic").isin(*inputs)
    source = F.when(on_input, INPUT).when(F.col("topic").isin(*outputs), OUTPUT)
    for fan_out in fan_outs:
        source = source.when(F.col("topic") == fan_out.topics[0], fan_out.source)
    # `kept`: the reader kept this copy as it was (a repeat of an id: a duplicate's copy)
    scanned = final_scan.select(
        "id",
        source.cast("byte").alias("source"),
        topic_place(inputs, outputs).alias("place"),
        F.col("params").isNotNull().alias("kept"),
    ).filter(F.col("source").isNotNull())

    def of(source: int, value: Column | str) -> Column:
        return F.when(F.col("source") == source, value)

    def copies(side: _Written) -> list[Column]:
        placed = of(side.source, F.col("place"))
        return [
            F.count(placed).alias(side.column("n")),
            F.min(placed).alias(side.column("first")),
            F.max(placed).alias(side.column("last")),
        ]

    def kept(side: _Written) -> Column:
        return F.max(of(side.source, F.col("kept").cast("int"))).alias(side.column("kept"))

    in_place = of(INPUT, F.col("place"))
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
            *copies(delivered),
            F.max(of(INPUT, F.col("kept").cast("int"))).alias("in_kept"),
            kept(delivered),
            *[column for fan_out in fan_outs for column in (*copies(fan_out), kept(fan_out))],
        )
        .withColumn("exists", (F.col("acked") == 1) | (F.col("in_n") > 0))
    )
    identity = F.col("id").cast("double")

    def kept_first(kept: str) -> Column:
        """Examples whose copy the reader kept as it was come first, so the report can show
        the record itself (readers keep a bounded number of copies)."""
        return identity + F.when(F.col(kept) == 1, 0.0).otherwise(1e15)

    def named(side: _Written) -> dict[str, Column]:
        """A fan-out topic's examples name it (the outputs' name theirs where they are
        several)."""
        return {"topic": F.lit(side.topics[0])} if side in fan_outs else {}

    def written_twice_or_invented(side: _Written) -> list[Candidate]:
        count = F.col(side.column("n"))
        return [
            finding(
                # Each input copy of an id is a record of its own: a duplicate is an output
                # copy beyond them (an input duplicate is the producer's fault, reported
                # below). Output records naming no id at all are one phantom row, not copies
                # of a record.
                (count > F.greatest(F.col("in_n"), F.lit(1))) & F.col("id").isNotNull(),
                DUPLICATE.name,
                kept_first(side.column("kept")),
                id=F.col("id"),
                **named(side),
                copies=count,
                first=_at(side.column("first"), side.topics),
                last=_at(side.column("last"), side.topics),
            ),
            finding(
                (count > 0) & F.col("sent").isNull() & (F.col("in_n") == 0),
                PHANTOM.name,
                identity,
                id=F.col("id"),
                **_placed_on(side.column("first"), side.topics),
                **named(side),
                copies=count,
            ),
        ]

    input_place = F.coalesce("in_first", "ack_place")
    undelivered = F.col("exists") & (F.col("out_n") == 0)
    # a place without its offset is the topic's index and the partition: the lookup's key
    by_place = {
        inputs.index(topic) << PARTITION_BITS | partition: offset
        for (topic, partition), offset in (committed or {}).items()
        if topic in inputs
    }
    group_offset = _group_offset(F.shiftright("input_place", OFFSET_BITS), by_place)
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
            **_placed_on("input_place", inputs),
            acked=F.col("acked") == 1,
        ),
        finding(
            undelivered & unseen,
            UNSEEN.name,
            identity,
            id=F.col("id"),
            **_placed_on("input_place", inputs),
            group_offset=group_offset,
            acked=F.col("acked") == 1,
        ),
        *written_twice_or_invented(delivered),
        finding(
            F.col("in_first") != F.col("in_last"),
            DUPLICATE_INPUT.name,
            kept_first("in_kept"),
            id=F.col("id"),
            copies=F.col("in_n"),
            first=_at("in_first", inputs),
            last=_at("in_last", inputs),
        ),
        *[
            candidate
            for fan_out in fan_outs
            for candidate in (
                finding(
                    F.col("exists") & (F.col(fan_out.column("n")) == 0),
                    LOST.name,
                    identity,
                    id=F.col("id"),
                    **_placed_on("input_place", inputs),
                    acked=F.col("acked") == 1,
                    missing_from=F.lit(fan_out.topics[0]),
                ),
                *written_twice_or_invented(fan_out),
            )
        ],
    )


def _group_offset(partition: Column, committed: dict[int, int | None]) -> Column:
    """The group's committed offset of `partition` (a topic index and partition, packed as
    a place is; null: never committed, or no such partition)."""
    known = {number: value for number, value in committed.items() if value is not None}
    return looked_up(partition, known, "long").cast("long")
