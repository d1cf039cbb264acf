"""The order of each producer's sends: Jepsen's nonmonotonic-send.

A producer's acknowledged sends to one partition, in the order it made them (its send calls'
times), must land at increasing offsets. A producer that retries without idempotence while
later requests are in flight can land a retried record behind a later one: the input's order
is then not the order it was sent in, and every reader downstream sees that order.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import NONMONOTONIC_SEND


def send_order_findings(history: History) -> DataFrame:
    """Anomaly rows of isolation.nonmonotonic-send: an acknowledged send at a lower offset
    than the same producer's previous acknowledged send to that partition (one grouping
    and one window over the sends; an id sent twice counts from its first send call)."""
    # One pass over the sends: per producer and id, its first send call and every ack.
    is_ok = (F.col("type") == "ok") & F.col("offset").isNotNull()
    acks = (
        history.kind("send")
        .filter(F.col("topic").isNotNull())
        .groupBy("process", "id")
        .agg(
            F.min(F.when(F.col("type") == "invoke", F.col("time"))).alias("called"),
            F.collect_list(F.when(is_ok, F.struct("topic", "partition", "offset"))).alias("acks"),
        )
        .filter(F.col("called").isNotNull())
        .select("process", "id", "called", F.explode("acks").alias("ack"))
        .select("process", "id", "called", "ack.*")
    )
    as_sent = Window.partitionBy("process", "topic", "partition").orderBy("called", "id")
    ordered = acks.withColumn("before_id", F.lag("id").over(as_sent)).withColumn(
        "before_offset", F.lag("offset").over(as_sent)
    )
    return explode_findings(
        ordered,
        finding(
            F.col("offset") < F.col("before_offset"),
            NONMONOTONIC_SEND.name,
            F.col("id").cast("double"),
            id=F.col("id"),
            producer=F.col("process"),
            partition=F.col("partition"),
            offset=F.col("offset"),
            sent_after=F.struct(
                F.col("before_id").alias("id"), F.col("before_offset").alias("offset")
            ),
        ),
    )
