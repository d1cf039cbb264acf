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

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.codes import code_of, name_of
from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.checkers.log_findings import placed_reads
from eoschaos.checkers.log_transactions import COMMIT
from eoschaos.contract.checks import REALTIME_LAG

LAG_QUANTILE = 0.99
READ_COMMITTED = "read_committed"


def first_reads(
    reads: DataFrame, batches: DataFrame, readers: Sequence[str], topics: Sequence[str]
) -> DataFrame:
    """(reader, topic, partition, offset, id, read_at, committed_at, lag) for each read_committed
    downstream reader's first read of each output record a COMMIT marker closed, where that
    first read came at or after the marker (one before it is isolation.uncommitted-offset-read's
    and has no lag). `reads`: downstream_reads of `topics` by `readers`; `batches`:
    output_batches (each read lies in one).

    The reads are narrowed to each reader's first read of each offset before they are placed:
    one shuffle of small coded rows (the reader and topic as codes), then a join on the
    broadcast batches with nothing more to shuffle. Not cached: recomputing it for the bound's
    check costs less than writing ten million rows to the cache."""
    committed = batches.filter((F.col("fate") == COMMIT) & F.col("marker_ms").isNotNull())
    first = (
        reads.filter(F.col("isolation") == READ_COMMITTED)
        .groupBy(
            code_of("reader", {name: code for code, name in enumerate(readers)}).alias("r"),
            code_of("topic", {name: code for code, name in enumerate(topics)}).alias("t"),
            "partition",
            "offset",
        )
        .agg(F.min("time").alias("time"), F.min_by("id", "time").alias("id"))
        .select(
            name_of(F.col("r"), readers).alias("reader"),
            name_of(F.col("t"), topics).alias("topic"),
            "partition",
            "offset",
            "id",
            "time",
        )
    )
    return (
        placed_reads(first, committed)
        .filter(F.col("time") * 1000 >= F.col("marker_ms"))
        .select(
            "reader",
            "topic",
            "partition",
            "offset",
            "id",
            F.col("time").alias("read_at"),
            (F.col("marker_ms") / 1000).alias("committed_at"),
        )
        .withColumn("lag", F.col("read_at") - F.col("committed_at"))
    )


def lag_figures(
    lags: DataFrame, start: float, one_topic: bool
) -> tuple[dict[str, Any], list[list[Any]]]:
    """The lag's figures (records, worst and p99 seconds: in all and per output partition) and
    its series (second of the run, partition, worst lag of the reads in that second), from one
    aggregation of `first_reads` over two grouping sets: per partition and second (records,
    worst) and per partition and millisecond of lag (records), the histogram the p99s are read
    from on the driver, exact to the millisecond the figures are rounded to (its rows grow with
    the spread of the lags, not with the records). A partition is its number when the run wrote
    `one topic`, else "topic:number"."""
    place = F.col("partition") if one_topic else F.concat_ws(":", "topic", "partition")
    rows = (
        lags.select(
            place.alias("partition"),
            F.floor(F.col("read_at") - start).alias("t"),
            F.round(F.col("lag") * 1000).cast("long").alias("ms"),
            "lag",
        )
        .groupingSets([["partition", "t"], ["partition", "ms"]], "partition", "t", "ms")
        .agg(F.count(F.lit(1)).alias("records"), F.max("lag").alias("worst"))
        .collect()
    )
    histograms: dict[str, Counter[int]] = defaultdict(Counter)
    worst: dict[str, float] = {}
    series = []
    for row in rows:
        partition = str(row["partition"])
        if row["t"] is None:
            histograms[partition][row["ms"]] += row["records"]
            worst[partition] = max(worst.get(partition, row["worst"]), row["worst"])
        else:
            series.append([row["t"], row["partition"], _seconds(row["worst"])])
    figures: dict[str, Any] = {
        **_summary(sum(histograms.values(), Counter()), max(worst.values(), default=None)),
        "partitions": {
            partition: _summary(histograms[partition], worst[partition])
            for partition in sorted(histograms, key=_order)
        },
    }
    return figures, sorted(series, key=lambda point: (point[0], _order(str(point[1]))))


def _summary(histogram: Counter[int], worst: float | None) -> dict[str, Any]:
    """Records, worst and p99 seconds of one histogram of lags in milliseconds: the p99 is the
    lag at rank ceil(0.99 n) in ascending order."""
    records = sum(histogram.values())
    p99, rank = None, math.ceil(LAG_QUANTILE * records)
    below = 0
    for ms in sorted(histogram):
        below += histogram[ms]
        if below >= rank:
            p99 = ms / 1000
            break
    return {"records": records, "worst_s": _seconds(worst), "p99_s": p99}


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
