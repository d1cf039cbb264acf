"""Realtime lag and unseen input over time: how long after its commit each output record reached
a downstream reader, and how much acknowledged input no downstream reader had seen yet.

A pipeline can be exactly-once and still stall for a minute under a fault: every safety check
passes, and only these figures show it (Jepsen's Kafka checker reports its worst realtime lag
and its unseen count over time for the same reason). Both are figures, in verdict.json and as
plots in the report; the lag is judged only against a bound the user sets (--max-lag:
liveness.realtime-lag), because what lag is acceptable is the pipeline's business.

Lag: each downstream read_committed reader's first read of each committed output record, from
the time its transaction's COMMIT marker was written in that partition (the brokers' batch
headers, so any transactional pipeline in any language has it) to the time the reader's poll
returned it; both are this machine's wall clock. A read before its marker is an anomaly of its
own (isolation.uncommitted-offset-read) and has no lag.

Unseen: at each second of the run, the acknowledged input records whose output no downstream
reader had read yet; at the end it is what delivery.lost and liveness.unseen judge.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.checkers.log_findings import placed_reads
from eoschaos.checkers.log_transactions import COMMIT
from eoschaos.contract.checks import REALTIME_LAG

LAG_QUANTILE = 0.99
READ_COMMITTED = "read_committed"


def first_reads(reads: DataFrame, pieces: DataFrame) -> DataFrame:
    """(reader, topic, partition, offset, id, read_at, committed_at, lag) for each read_committed
    downstream reader's first read, at or after the marker, of each output record a COMMIT
    marker closed. `reads`: downstream_reads; `pieces`: output_pieces."""
    committed = pieces.filter((F.col("fate") == COMMIT) & F.col("marker_ms").isNotNull())
    placed = placed_reads(reads.filter(F.col("isolation") == READ_COMMITTED), committed)
    return (
        placed.filter(F.col("time") * 1000 >= F.col("marker_ms"))
        .groupBy("reader", "topic", "partition", "offset")
        .agg(
            F.min("time").alias("read_at"),
            (F.first("marker_ms") / 1000).alias("committed_at"),
            F.first("id").alias("id"),
        )
        .withColumn("lag", F.col("read_at") - F.col("committed_at"))
    )


def lag_figures(
    lags: DataFrame, start: float, one_topic: bool
) -> tuple[dict[str, Any], list[list[Any]]]:
    """The lag's figures (records, worst and p99 seconds: in all and per output partition) and
    its series (second of the run, partition, worst lag of the reads in that second), from one
    grouped aggregation of `first_reads`. A partition is its number when the run wrote `one
    topic`, else "topic:number"."""
    place = F.col("partition") if one_topic else F.concat_ws(":", "topic", "partition")
    rows = (
        lags.rollup(place.alias("partition"), F.floor(F.col("read_at") - start).alias("t"))
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.max("lag").alias("worst"),
            F.percentile_approx("lag", LAG_QUANTILE).alias("p99"),
        )
        .collect()
    )
    figures: dict[str, Any] = {"records": 0, "worst_s": None, "p99_s": None, "partitions": {}}
    series = []
    for row in rows:
        summary = {
            "records": row["records"],
            "worst_s": _seconds(row["worst"]),
            "p99_s": _seconds(row["p99"]),
        }
        if row["partition"] is None:
            figures.update(summary)
        elif row["t"] is None:
            figures["partitions"][str(row["partition"])] = summary
        else:
            series.append([row["t"], row["partition"], summary["worst_s"]])
    figures["partitions"] = dict(sorted(figures["partitions"].items(), key=lambda i: _order(i[0])))
    return figures, sorted(series, key=lambda point: (point[0], _order(str(point[1]))))


def _order(partition: str) -> tuple[str, int]:
    """A partition's place in the figures: by topic, then number ("3" or "orders:3")."""
    topic, _, number = partition.rpartition(":")
    return topic, int(number)


def lag_findings(lags: DataFrame, bound: float) -> DataFrame:
    """liveness.realtime-lag: each first read more than `bound` seconds after its commit,
    the worst first among the examples; sub-counts per reader."""
    return explode_findings(
        lags,
        finding(
            F.col("lag") > bound,
            REALTIME_LAG.name,
            -F.col("lag"),
            F.col("reader"),
            reader=F.col("reader"),
            topic=F.col("topic"),
            partition=F.col("partition"),
            offset=F.col("offset"),
            id=F.col("id"),
            committed_at=F.col("committed_at"),
            read_at=F.col("read_at"),
            lag_s=F.round(F.col("lag"), 3),
        ),
    )


def unseen_over_time(
    history: History, reads: DataFrame, start: float
) -> tuple[dict[str, Any], list[list[int]]]:
    """Per second of the run, the acknowledged input records no downstream read_committed
    reader had read the output of yet (`reads`: downstream_reads of the output): a record
    counts from its acknowledgement to its first downstream read (from its acknowledgement,
    if read before it). Its figures (peak, when, at the end) and its series ([second,
    unseen])."""
    acked = history.kind("send").filter(
        (F.col("type") == "ok") & F.col("topic").isin(*history.topics.inputs)
    )
    seen = reads.filter(F.col("isolation") == READ_COMMITTED)
    none = F.lit(None).cast("double")
    per_id = (
        acked.select("id", F.col("time").alias("acked"), none.alias("seen"))
        .unionByName(seen.select("id", none.alias("acked"), F.col("time").alias("seen")))
        .groupBy("id")
        .agg(F.min("acked").alias("acked"), F.min("seen").alias("seen"))
        .filter(F.col("acked").isNotNull())
    )
    moves = F.array_compact(
        F.array(
            F.struct(F.floor(F.col("acked") - start).alias("t"), F.lit(1).alias("change")),
            F.when(
                F.col("seen").isNotNull(),
                F.struct(
                    F.floor(F.greatest("seen", "acked") - start).alias("t"),
                    F.lit(-1).alias("change"),
                ),
            ),
        )
    )
    rows = (
        per_id.select(F.explode(moves).alias("move"))
        .groupBy("move.t")
        .agg(F.sum("move.change").alias("change"))
        .collect()
    )
    changes = {row["t"]: row["change"] for row in rows}
    series, unseen = [], 0
    for t in range(max(changes, default=-1) + 1):
        unseen += changes.get(t, 0)
        series.append([t, unseen])
    peak = max(series, key=lambda point: point[1], default=[None, 0])
    return {"peak": peak[1], "peak_at_s": peak[0], "at_end": unseen}, series


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
