"""delivery.input-committed-twice: a group's committed offsets, read from the group
coordinators' own log, for any pipeline.

A group's committed offset of an input partition is where its next owner starts. In the order
they took effect in the coordinator's log (one `__consumer_offsets` partition per group; a
transactional commit at its marker), the commits that took effect -- plain ones, and
transactional ones their COMMIT marker resolved (an ABORT discards one, an open one is not
visible) -- must never go backwards: a commit below the highest before it means the records in
between were consumed, and their effects committed, a second time. That is the pattern of the
"99 duplicates" (docs/findings.md: partition 3's offset went from 99 back to 21), and it needs
neither the client's history nor its output's headers.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.log_transactions import COMMIT
from eoschaos.contract.checks import INPUT_COMMITTED_TWICE


def offset_commit_findings(commits: DataFrame) -> DataFrame:
    """One anomaly row per commit (of `offset_commits`) that took effect below the highest
    offset committed before it for the same group and partition, with the commit that set
    that highest offset."""
    commits = commits.filter(F.col("fate") == COMMIT)
    commit = F.struct(
        F.col("offset").alias("offset"),
        F.col("producer_id").alias("producer_id"),
        F.col("producer_epoch").alias("producer_epoch"),
        F.col("time").alias("time"),
    )
    before = (
        Window.partitionBy("group", "topic", "partition")
        .orderBy("log_partition", "at")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    with_highest = commits.withColumn("highest", F.max(commit).over(before))
    return explode_findings(
        with_highest,
        finding(
            F.col("offset") < F.col("highest.offset"),
            INPUT_COMMITTED_TWICE.name,
            F.col("time"),
            F.col("group"),
            group=F.col("group"),
            topic=F.col("topic"),
            partition=F.col("partition"),
            offset=F.col("offset"),
            committed_before=F.col("highest.offset"),
            recommitted=F.col("highest.offset") - F.col("offset"),
            producer_id=F.col("producer_id"),
            producer_epoch=F.col("producer_epoch"),
            time=F.col("time"),
            earlier_producer_id=F.col("highest.producer_id"),
            earlier_producer_epoch=F.col("highest.producer_epoch"),
            earlier_time=F.col("highest.time"),
        ),
    )
