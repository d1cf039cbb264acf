"""Every transaction of every transactional producer, from the brokers' logs alone.

The client's own history (`txn` events) exists only for our instrumented processors; the
brokers' logs exist for any pipeline in any language. Three of them are recorded (writer
LOG_BATCHES, docs/history.md), and together they say what each transaction did:

- the coordinator's `__transaction_state` records (txn-state rows) say which transactions a
  transactional id ran, with which producer id and epoch, over which partitions, and how the
  coordinator decided each (PrepareCommit/PrepareAbort, then Complete*);
- the data partitions' batch headers say what each producer wrote, and where its markers are
  (control batches; an ABORT marker is the end of an aborted range in the `.txnindex`);
- the `__consumer_offsets` records (offset-commit rows) say which offsets a producer committed
  in its transaction, and the marker that resolved them.

A *piece* is the part of one transaction in one partition: a producer's transactional batches
up to its next marker there. A piece belongs to the coordinator's transaction of the same
producer that lists the partition and was prepared last before the marker was written (the
coordinator writes markers only after it recorded its decision, and one producer's
transactions never overlap). A piece with no marker yet is still open; it belongs to the
producer's last transaction over that partition that the coordinator has not completed.

The table has one row per coordinator transaction (thousands, not millions: it grows with
transactions, not records), built in one plan from the small `log` kind of the history.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from eoschaos.contract.history import (
    CONSUMER_OFFSETS_TOPIC,
    LOG_ABORTED,
    LOG_BATCH,
    OFFSET_COMMIT,
    TXN_STATE,
)

TXN_KEY = ["txn_id", "txn_seq"]
COMMIT, ABORT, OPEN = "COMMIT", "ABORT", "OPEN"
# The coordinator's decided-but-not-completed fates: its markers may be missing somewhere.
COMMITTING, ABORTING = "COMMITTING", "ABORTING"
ENDS = ("CompleteCommit", "CompleteAbort", "Empty", "Dead")  # a state after which a new one begins
DECISIONS = {"PrepareCommit": COMMIT, "PrepareAbort": ABORT}
SESSION_START = "Empty"  # InitProducerId: a new producer session of the id, at a new epoch


def _schema(**fields: DataType) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields.items()])


_BATCH = _schema(
    last_offset=LongType(),
    producer_id=LongType(),
    producer_epoch=IntegerType(),
    transactional=BooleanType(),
    control=BooleanType(),
    create_time=LongType(),
)
_ABORTED = _schema(producer_id=LongType(), last_offset=LongType())
_STATE = _schema(
    producer_id=LongType(),
    producer_epoch=IntegerType(),
    state=StringType(),
    partitions=ArrayType(StringType()),
    last_update_ms=LongType(),
)
_COMMIT = _schema(
    group=StringType(),
    log_partition=IntegerType(),
    log_offset=LongType(),
    producer_id=LongType(),
    producer_epoch=IntegerType(),
    transactional=BooleanType(),
    marker=StringType(),
    marker_offset=LongType(),
    marker_time=LongType(),
)


def _log(log: DataFrame, f: str, schema: StructType) -> DataFrame:
    return log.filter(F.col("f") == f).withColumn("p", F.from_json("params", schema))


def _part(topic: Column | str, partition: Column) -> Column:
    """A partition as the coordinator names it: "topic-partition"."""
    return F.concat_ws("-", F.lit(topic) if isinstance(topic, str) else topic, partition)


def data_pieces(log: DataFrame) -> DataFrame:
    """One row per transactional producer and marker of a data partition: its batches up to
    the marker (offset range, records, create times) and the marker's fate; a producer's
    batches after its last marker are one OPEN piece."""
    batches = _log(log, LOG_BATCH, _BATCH).filter("p.transactional")
    later = (
        Window.partitionBy("topic", "partition", "p.producer_id")
        .orderBy("offset")
        .rowsBetween(Window.currentRow, Window.unboundedFollowing)
    )

    def at_marker(column: str) -> Column:
        return F.first(F.when(F.col("p.control"), F.col(column)), ignorenulls=True).over(later)

    marked = batches.select(
        "topic",
        "partition",
        "offset",
        "count",
        "p.*",
        at_marker("offset").alias("marker_offset"),
        at_marker("p.create_time").alias("marker_ms"),
    ).filter(~F.col("control"))
    pieces = marked.groupBy("topic", "partition", "producer_id", "marker_offset").agg(
        F.min("producer_epoch").alias("producer_epoch"),
        F.min("offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.sum("count").alias("records"),
        F.min("create_time").alias("first_ms"),
        F.max("create_time").alias("last_ms"),
        F.first("marker_ms").alias("marker_ms"),
    )
    aborted = _log(log, LOG_ABORTED, _ABORTED).select(
        "topic",
        "partition",
        F.col("p.producer_id").alias("producer_id"),
        F.col("p.last_offset").alias("marker_offset"),
        F.lit(True).alias("aborted"),
    )
    return (
        pieces.join(
            F.broadcast(aborted), ["topic", "partition", "producer_id", "marker_offset"], "left"
        )
        .withColumn(
            "fate",
            F.when(F.col("marker_offset").isNull(), OPEN)
            .when(F.col("aborted"), ABORT)
            .otherwise(COMMIT),
        )
        .drop("aborted")
        .withColumn("part", _part(F.col("topic"), F.col("partition")))
    )


def offset_commits(log: DataFrame) -> DataFrame:
    """Every offset commit (docs/history.md), its params as columns; `at` is where it took
    effect in the coordinator's log (a transactional one at its marker), `fate` COMMIT for a
    plain commit or one its COMMIT marker resolved, ABORT, or OPEN."""
    return _log(log, OFFSET_COMMIT, _COMMIT).select(
        "topic",
        "partition",
        "offset",
        "time",
        "p.*",
        F.coalesce("p.marker_offset", "p.log_offset").alias("at"),
        F.col("p.marker_time").alias("marker_ms"),
        F.when(~F.col("p.transactional"), COMMIT)
        .otherwise(F.coalesce("p.marker", F.lit(OPEN)))
        .alias("fate"),
        _part(F.lit(CONSUMER_OFFSETS_TOPIC), F.col("p.log_partition")).alias("part"),
    )


def coordinator_transactions(log: DataFrame) -> DataFrame:
    """One row per transaction in the coordinators' log: its records from the first after the
    id's previous end (Complete*, Empty, Dead) to its own end. Its data epoch (the Ongoing
    records'; transaction version 2 bumps the epoch at the prepare), when it began, was
    prepared and completed (seconds), the partitions it spanned, and the coordinator's fate."""
    states = _log(log, TXN_STATE, _STATE).select(
        "txn_id", "time", F.col("partition").alias("log_partition"), "offset", "p.*"
    )
    by_id = Window.partitionBy("txn_id").orderBy("log_partition", "offset")
    ended_before = F.sum(F.col("state").isin(*ENDS).cast("int")).over(
        by_id.rowsBetween(Window.unboundedPreceding, -1)
    )
    decided = F.col("state").isin(*DECISIONS)
    decision = F.max_by(F.col("state"), F.when(decided, F.col("offset")))
    txns = (
        states.withColumn("txn_seq", F.coalesce(ended_before, F.lit(0)))
        .groupBy(*TXN_KEY)
        .agg(
            F.max_by("producer_id", "offset").alias("producer_id"),
            F.min(F.when(F.col("state") == "Ongoing", F.col("producer_epoch"))).alias("epoch"),
            F.min(F.when(F.col("state") == "Ongoing", F.col("time"))).alias("began"),
            F.max(F.when(decided, F.col("last_update_ms"))).alias("prepared_ms"),
            decision.alias("decision"),
            F.max(F.when(F.col("state").startswith("Complete"), F.col("time"))).alias("completed"),
            F.array_distinct(F.flatten(F.collect_list("partitions"))).alias("partitions"),
        )
        .filter(F.col("began").isNotNull() | F.col("decision").isNotNull())
    )
    fate = F.coalesce(F.col("decision"), F.lit("")).substr(8, 6)  # Commit, Abort or ""
    return txns.withColumn(
        "fate",
        F.when(fate == "", OPEN)
        .when(F.col("completed").isNull(), F.when(fate == "Commit", COMMITTING).otherwise(ABORTING))
        .otherwise(F.upper(fate)),
    ).drop("decision")


def of_the_run(txns: DataFrame, topics: Iterable[str]) -> DataFrame:
    """The transactions of the transactional ids that ever wrote to `topics`: on a shared
    cluster the coordinators also ran other runs' (and other pipelines') transactions."""
    pattern = "^(" + "|".join(re.escape(topic) for topic in topics) + r")-[0-9]+$"
    ids = txns.filter(F.exists("partitions", lambda part: part.rlike(pattern))).select("txn_id")
    return txns.join(F.broadcast(ids.distinct()), "txn_id", "left_semi")


def session_starts(log: DataFrame) -> DataFrame:
    """Each InitProducerId the coordinators recorded: transactional id, producer id, the new
    epoch, and when (seconds)."""
    return (
        _log(log, TXN_STATE, _STATE)
        .filter(F.col("p.state") == SESSION_START)
        .select(
            "txn_id",
            F.col("p.producer_id").alias("producer_id"),
            F.col("p.producer_epoch").alias("epoch"),
            F.col("time").alias("started"),
        )
    )


def attributed(pieces: DataFrame, txns: DataFrame) -> DataFrame:
    """`pieces` (part, producer_id, marker_ms, ...) with the key of the coordinator transaction
    each belongs to (null where the coordinators' log holds none)."""
    spans = txns.select(
        *TXN_KEY,
        "producer_id",
        "prepared_ms",
        F.col("completed").isNull().alias("unfinished"),
        F.explode("partitions").alias("part"),
    )
    key = ["part", "producer_id", "marker_offset"]
    marked = F.col("marker_ms").isNotNull()
    fits = F.when(marked, F.col("prepared_ms") <= F.col("marker_ms")).otherwise(F.col("unfinished"))
    latest = Window.partitionBy(*key).orderBy(F.col("prepared_ms").desc_nulls_first())
    candidates = (
        pieces.select(*key, "marker_ms")
        .distinct()
        .join(F.broadcast(spans), ["part", "producer_id"])
        .filter(fits)
        .withColumn("rank", F.row_number().over(latest))
        .filter("rank = 1")
        .select(*key, *TXN_KEY)
    )
    return pieces.join(candidates, key, "left")
