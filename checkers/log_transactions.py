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
up to its next marker there, or one of its offset commits. One producer's transactions never
overlap, and the coordinator writes a transaction's markers only after it recorded its decision
and completes it only after every marker was written, so a piece belongs to the producer's
transaction decided last before its marker was written. A piece with no marker yet belongs to
no decided transaction: it is OPEN.

Every step is keyed by producer id, with windows instead of joins, over the small `log` kind of
the history (it grows with batches and transactions, not records); the rows are parsed once,
partitioned by producer id, each batch given its marker there, and cached. The cache does not
keep their partitioning, so each later window shuffles the cached rows again: cheap at this
size, and a plan without the cache was no faster (docs/benchmarks.md).
One row per coordinator transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from eoschaos.contract.history import (
    LOG_ABORTED,
    LOG_BATCH,
    OFFSET_COMMIT,
    TXN_STATE,
)

TXN_KEY = ["producer_id", "txn_id", "txn_seq"]
COMMIT, ABORT, OPEN = "COMMIT", "ABORT", "OPEN"
# The coordinator's decided-but-not-completed fates: its markers may be missing somewhere.
COMMITTING, ABORTING = "COMMITTING", "ABORTING"
COMMITTED_FATES = (COMMIT, COMMITTING)  # the coordinator decided to commit it
ENDS = ("CompleteCommit", "CompleteAbort", "Empty", "Dead")  # a state after which a new one begins
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"  # a coordinator's decision
DECISIONS = (PREPARE_COMMIT, PREPARE_ABORT)
SESSION_START = "Empty"  # InitProducerId: a new producer session of the id, at a new epoch

# The params of every log row the table reads (docs/history.md), parsed once.
_PARAMS = StructType(
    [
        StructField(name, kind)
        for name, kind in {
            "last_offset": LongType(),
            "producer_id": LongType(),
            "producer_epoch": IntegerType(),
            "transactional": BooleanType(),
            "control": BooleanType(),
            "create_time": LongType(),
            "state": StringType(),
            "partitions": ArrayType(StringType()),
            "last_update_ms": LongType(),
            "group": StringType(),
            "log_partition": IntegerType(),
            "log_offset": LongType(),
            "marker": StringType(),
            "marker_offset": LongType(),
            "marker_time": LongType(),
        }.items()
    ]
)


def offset_commits(log: DataFrame) -> DataFrame:
    """Every offset commit (docs/history.md), its params as columns: `at` is where it took
    effect in the coordinator's log (a transactional one at its marker), `fate` COMMIT for a
    plain commit or one its COMMIT marker resolved, ABORT, or OPEN; `advanced` how far it
    moved its group's committed offset of the partition, in the order the commits took
    effect (null for the first, and for one that did not take effect); `previous` the
    group's committed offset just before it took effect (or was aborted or left open): the
    commit consumed the input from `previous` up to its own offset (null: from the start)."""
    commits = (
        log.filter(F.col("f") == OFFSET_COMMIT)
        .select("topic", "partition", "offset", "time", F.from_json("params", _PARAMS).alias("p"))
        .select(
            "topic",
            "partition",
            "offset",
            "time",
            "p.group",
            "p.log_partition",
            "p.producer_id",
            "p.producer_epoch",
            F.coalesce("p.transactional", F.lit(False)).alias("transactional"),
            F.coalesce("p.marker_offset", "p.log_offset").alias("at"),
            F.col("p.marker_time").alias("marker_ms"),
            F.when(~F.coalesce("p.transactional", F.lit(False)), COMMIT)
            .otherwise(F.coalesce("p.marker", F.lit(OPEN)))
            .alias("fate"),
        )
    )
    chain = Window.partitionBy("group", "topic", "partition").orderBy("log_partition", "at")
    took_effect = F.col("fate") == COMMIT
    before = F.last(F.when(took_effect, F.col("offset")), ignorenulls=True).over(
        chain.rowsBetween(Window.unboundedPreceding, -1)
    )
    return commits.withColumn("previous", before).withColumn(
        "advanced", F.when(took_effect, F.col("offset") - F.col("previous"))
    )


def topic_batches(log: DataFrame, topic: str) -> DataFrame:
    """The data batches of `topic` as the brokers wrote them, transactional or not: partition,
    offset range, producer id, whether transactional, and create time (ms)."""
    return data_batches(log, (topic,)).drop("topic")


def data_batches(log: DataFrame, topics: Iterable[str]) -> DataFrame:
    """`topic_batches` of each of `topics`, in one pass, with their topic."""
    return (
        log.filter((F.col("f") == LOG_BATCH) & F.col("topic").isin(*topics))
        .select("topic", "partition", "offset", F.from_json("params", _PARAMS).alias("p"))
        .filter(~F.coalesce("p.control", F.lit(False)))
        .select(
            "topic",
            "partition",
            "offset",
            "p.last_offset",
            "p.producer_id",
            F.coalesce("p.transactional", F.lit(False)).alias("transactional"),
            "p.create_time",
        )
    )


def producer_rows(
    log: DataFrame,
    commits: DataFrame,
    input_topics: tuple[str, ...],
    output_topics: tuple[str, ...],
) -> DataFrame:
    """The log rows the transaction table reads, params parsed, partitioned by producer id:
    the coordinators' states, the outputs' transactional batches and the aborted ranges, and
    the transactional offset commits of `input_topics` among `commits` (`offset_commits`, which
    the verdict reads once for this and delivery.input-committed-twice). Each transactional
    batch carries its marker (`with_markers`). Cache it: the table, the pieces and the
    batches read it."""
    header = ("f", "time", "topic", "partition", "offset", "count", "txn_id")
    parsed = log.select(*header, F.from_json("params", _PARAMS).alias("p"))
    transactional = commits.filter(
        F.col("transactional") & F.col("topic").isin(*input_topics)
    ).select(
        F.lit(OFFSET_COMMIT).alias("f"),
        "producer_id",
        "marker_ms",
        F.struct("group", "topic", "partition", "offset", "previous", "advanced", "fate").alias(
            "commit"
        ),
        "fate",
        "advanced",
    )
    kept = (
        "last_offset",
        "producer_id",
        "producer_epoch",
        "transactional",
        "control",
        "create_time",
        "state",
        "partitions",
        "last_update_ms",
    )
    return with_markers(
        parsed.filter(F.col("f").isin(TXN_STATE, LOG_BATCH, LOG_ABORTED))
        .filter(
            (F.col("f") != LOG_BATCH)
            | (F.col("p.transactional") & F.col("topic").isin(*output_topics))
        )
        .select(*header, *[f"p.{name}" for name in kept])
        .unionByName(transactional, allowMissingColumns=True)
        .repartition("producer_id")
    )


def transaction_table(rows: DataFrame, topics: Iterable[str]) -> DataFrame:
    """One row per transaction the coordinators recorded for an id that ever wrote to
    `topics` (on a shared cluster they also ran other pipelines'), from `producer_rows`: its
    producer id, data epoch (the Ongoing records'; transaction version 2 bumps the epoch at
    the prepare), when it began, was prepared (ms) and completed (seconds), its partitions
    and fate; the newest session (InitProducerId) of its id begun before its decision; its
    output (records committed, the pieces' fates and ranges) and its offset commits (how
    many committed, how far they moved the input)."""
    txns = _coordinator_transactions(rows, topics)
    pieces = _data_pieces(rows).unionByName(
        rows.filter(F.col("f") == OFFSET_COMMIT).select(
            "f", "producer_id", "marker_ms", "commit", "fate", "advanced"
        ),
        allowMissingColumns=True,
    )
    return _per_transaction(txns, _attributed(pieces, txns))


def _coordinator_transactions(rows: DataFrame, topics: Iterable[str]) -> DataFrame:
    """The coordinators' transactions: an id's records from the first after its previous end
    (Complete*, Empty, Dead) to its own end, grouped."""
    states = rows.filter(F.col("f") == TXN_STATE).withColumnRenamed("partition", "log_partition")
    by_id = Window.partitionBy("producer_id", "txn_id").orderBy("log_partition", "offset")
    before = by_id.rowsBetween(Window.unboundedPreceding, -1)
    so_far = by_id.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    session = F.col("state") == SESSION_START
    pattern = "^(" + "|".join(re.escape(topic) for topic in topics) + r")-[0-9]+$"
    touches = F.exists(
        F.coalesce("partitions", F.array().cast("array<string>")), lambda part: part.rlike(pattern)
    )
    decided = F.col("state").isin(*DECISIONS)
    ongoing = F.col("state") == "Ongoing"
    txns = (
        states.withColumns(
            {
                "txn_seq": F.coalesce(
                    F.sum(F.col("state").isin(*ENDS).cast("int")).over(before), F.lit(0)
                ),
                "session_epoch": F.max(F.when(session, F.col("producer_epoch"))).over(so_far),
                "session_started": F.max(F.when(session, F.col("time"))).over(so_far),
                "ours": F.max(touches).over(Window.partitionBy("producer_id", "txn_id")),
            }
        )
        .groupBy(*TXN_KEY)
        .agg(
            F.min(F.when(ongoing, F.col("producer_epoch"))).alias("epoch"),
            F.min(F.when(ongoing, F.col("time"))).alias("began"),
            F.max(F.when(decided, F.col("last_update_ms"))).alias("prepared_ms"),
            F.max_by("state", F.when(decided, F.col("offset"))).alias("decision"),
            F.max(F.when(F.col("state").startswith("Complete"), F.col("time"))).alias("completed"),
            F.array_distinct(F.flatten(F.collect_list("partitions"))).alias("partitions"),
            F.max_by("session_epoch", F.when(decided, F.col("offset"))).alias("session_epoch"),
            F.max_by("session_started", F.when(decided, F.col("offset"))).alias("session_started"),
            F.max("ours").alias("ours"),
        )
        .filter(F.col("ours") & (F.col("began").isNotNull() | F.col("decision").isNotNull()))
    )
    how = F.coalesce(F.col("decision"), F.lit("")).substr(8, 6)  # Commit, Abort or ""
    return txns.withColumn(
        "fate",
        F.when(how == "", OPEN)
        .when(F.col("completed").isNull(), F.when(how == "Commit", COMMITTING).otherwise(ABORTING))
        .otherwise(F.upper(how)),
    ).drop("decision", "ours")


def with_markers(rows: DataFrame) -> DataFrame:
    """`rows` (partitioned by producer id), each data batch with its producer's first marker
    at or after it in its partition (`marker_offset`, `marker_ms`) and the end of the first
    aborted range there (`aborted_at`: the batch was aborted when that is its marker's
    offset). An aborted range of the `.txnindex` ends at its ABORT marker, and sorts just
    before it. The window's keys start with the producer id, so it sorts the rows where
    they are, with no shuffle."""
    ends_aborted = F.col("f") == LOG_ABORTED
    position = F.when(ends_aborted, F.col("last_offset")).otherwise(F.col("offset"))
    # The first marker at or after each row: the last one so far in reverse order. A frame up
    # to the current row is computed in one pass; one from it to the end (the same question
    # asked forwards) is recomputed for every row, quadratic in a producer's batches of a
    # partition (at 10M input records, a quarter of an hour for one verdict).
    later = (
        Window.partitionBy("producer_id", "topic", "partition")
        .orderBy(position.desc(), ends_aborted)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    control = (F.col("f") == LOG_BATCH) & F.col("control")
    batch = F.col("f") == LOG_BATCH
    return rows.withColumns(
        {
            "marker_offset": F.when(
                batch, F.last(F.when(control, F.col("offset")), True).over(later)
            ),
            "marker_ms": F.when(
                batch, F.last(F.when(control, F.col("create_time")), True).over(later)
            ).otherwise(F.col("marker_ms")),  # an offset commit's is its own
            "aborted_at": F.when(batch, F.last(F.when(ends_aborted, position), True).over(later)),
        }
    )


def _marked_batches(rows: DataFrame) -> DataFrame:
    """The outputs' transactional data batches among `rows` (`producer_rows`), with their
    markers."""
    return rows.filter((F.col("f") == LOG_BATCH) & ~F.col("control"))


def _fate(aborted: Column) -> Column:
    """A batch's or piece's fate from its marker offset and whether it was `aborted`."""
    return F.when(F.col("marker_offset").isNull(), OPEN).when(aborted, ABORT).otherwise(COMMIT)


def _data_pieces(rows: DataFrame) -> DataFrame:
    """One row per producer and marker of an output partition: its batches up to the marker
    (offset range, records) and the marker's fate; batches after a producer's last marker
    there are one OPEN piece."""
    return (
        _marked_batches(rows)
        .groupBy("producer_id", "topic", "partition", "marker_offset")
        .agg(
            F.min("offset").alias("first_offset"),
            F.max("last_offset").alias("last_offset"),
            F.sum("count").alias("records"),
            F.first("marker_ms").alias("marker_ms"),
            F.first(F.col("aborted_at") == F.col("marker_offset")).alias("aborted"),
            F.max("producer_epoch").alias("epoch"),
            (F.min("create_time") / 1000).alias("first_time"),
        )
        .select(
            F.lit(LOG_BATCH).alias("f"),
            "producer_id",
            "topic",
            "marker_ms",
            "epoch",
            "first_time",
            F.struct(
                "partition",
                "first_offset",
                "last_offset",
                "records",
                _fate(F.col("aborted")).alias("fate"),
            ).alias("output"),
        )
        .withColumn("fate", F.col("output.fate"))
    )


def output_batches(rows: DataFrame) -> DataFrame:
    """Each transactional batch of the outputs (from `producer_rows`), as `output_pieces`
    has its piece: producer id, transactional id, epoch, marker time (ms; null with no
    marker), topic, partition, offset range (`first_offset`: the batch's base offset) and
    fate. A producer's batches never overlap one another, nor anyone's: a read lies in one
    batch, where pieces of producers writing a partition at once share offsets."""
    return (
        _marked_batches(rows)
        .drop("txn_id")  # a coordinator's record's; a batch's producer ran under one
        .join(F.broadcast(_transactional_ids(rows)), "producer_id", "left")
        .select(
            "producer_id",
            "txn_id",
            F.col("producer_epoch").alias("epoch"),
            "marker_ms",
            "topic",
            "partition",
            F.col("offset").alias("first_offset"),
            "last_offset",
            _fate(F.col("aborted_at") == F.col("marker_offset")).alias("fate"),
        )
    )


def _transactional_ids(rows: DataFrame) -> DataFrame:
    """The transactional id each producer id ran under, per the coordinators' records."""
    return (
        rows.filter(F.col("f") == TXN_STATE)
        .groupBy("producer_id")
        .agg(F.max("txn_id").alias("txn_id"))
    )


def output_pieces(rows: DataFrame) -> DataFrame:
    """Each producer's output per partition and marker (`_data_pieces`, from `producer_rows`),
    flat: producer id, the transactional id it ran under, epoch, first batch time, marker
    time (ms; null with no marker), topic, partition, offset range, records and fate (OPEN: no
    marker closed it). The checks of reads and of hanging output, and the examples' names,
    read it; the verdict caches it once for all of them."""
    return (
        _data_pieces(rows)
        .join(F.broadcast(_transactional_ids(rows)), "producer_id", "left")
        .select("producer_id", "txn_id", "epoch", "first_time", "marker_ms", "topic", "output.*")
    )


def _attributed(pieces: DataFrame, txns: DataFrame) -> DataFrame:
    """Each marked piece with the key of its producer's transaction decided last before its
    marker was written (a decision sorts before a marker of the same millisecond)."""
    decisions = txns.filter(F.col("prepared_ms").isNotNull()).select(
        "producer_id",
        F.col("prepared_ms").alias("at"),
        F.lit(0).alias("order"),
        F.struct("txn_id", "txn_seq").alias("decided"),
    )
    marked = pieces.filter(F.col("marker_ms").isNotNull()).select(
        "*", F.col("marker_ms").alias("at"), F.lit(1).alias("order")
    )
    by_time = (
        Window.partitionBy("producer_id")
        .orderBy("at", "order")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        marked.unionByName(decisions, allowMissingColumns=True)
        .withColumn("owner", F.last("decided", ignorenulls=True).over(by_time))
        .filter(F.col("order") == 1)
        .select("*", "owner.txn_id", "owner.txn_seq")
    )


def _per_transaction(txns: DataFrame, pieces: DataFrame) -> DataFrame:
    """The transactions with what their pieces did, in one aggregation (no join)."""
    fields = [c for c in txns.columns if c not in TXN_KEY]
    output = F.col("f") == LOG_BATCH
    commit = F.col("f") == OFFSET_COMMIT
    committed = F.col("fate") == COMMIT
    return (
        txns.withColumn("txn", F.lit(True))
        .unionByName(pieces.select(*TXN_KEY, "f", "fate", "output", "commit", "advanced"), True)
        .withColumn("piece_fate", F.when(~F.coalesce("txn", F.lit(False)), F.col("fate")))
        .groupBy(*TXN_KEY)
        .agg(
            *[F.first(F.when(F.col("txn"), F.col(name)), True).alias(name) for name in fields],
            F.max("txn").alias("txn"),
            F.sum(F.when(output & committed, F.col("output.records"))).alias("output_committed"),
            F.collect_set(F.when(output, F.col("piece_fate"))).alias("output_fates"),
            F.sort_array(F.collect_list(F.when(output, F.col("output")))).alias("output"),
            F.count(F.when(commit & committed, 1)).alias("offsets_committed"),
            F.sum(F.when(commit & committed, F.col("advanced"))).alias("input_advanced"),
            F.collect_set(F.when(commit, F.col("piece_fate"))).alias("offset_fates"),
            F.sort_array(F.collect_list(F.when(commit, F.col("commit")))).alias("offsets"),
        )
        .filter("txn")
        .drop("txn")
    )
