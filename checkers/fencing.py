"""Fencing: once a newer owner of an input partition committed, the older owner must not; and
a request the client gave up on must not commit a later transaction.

Ownership is the consumer-group generation a transaction ran under (KIP-447 fences commits of
a stale generation). A zombie write is a transaction whose records made it into the final
committed output although its commit was invoked after a transaction of a higher generation on
one of its input partitions had committed. Per input partition, one window in generation order
gives every transaction the earliest commit of any higher generation; it runs on transactions,
not records.

A stale commit is the coordinator's PrepareCommit of a transactional id (its own log, writer
LOG_BATCHES f TXN_STATE) while no client of that id had a commit call in flight: an EndTxn
the client had timed out and retried, landing later in the next transaction (KAFKA-17754).
A client on transaction version 2 bumps its epoch per transaction and the stale request is
fenced; on version 1 it commits whatever the client has written so far.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.checkers.findings import explode_findings, finding
from eoschaos.checkers.history_io import History
from eoschaos.checkers.transactions import TXN_KEY
from eoschaos.contract.checks import STALE_COMMIT, ZOMBIE_WRITE
from eoschaos.contract.history import FINAL_COMMITTED, LOG_BATCH_KIND, TXN_STATE

# The coordinator's times are whole milliseconds, the client's are not.
CLOCK_SLACK_S = 0.002
# A call's bounds and a prepare in one time order; at one instant a call opens before a
# prepare, and a prepare comes before a call ends (the bounds are inclusive).
OPENS, PREPARES, ENDS = 0, 1, 2


def zombie_findings(txn_reads: DataFrame, txns: DataFrame) -> DataFrame:
    """Anomaly rows of fencing.zombie-write, one per zombie transaction.

    txn_reads: eoschaos.checkers.transactions.transaction_reads; its final-committed rows are the
    transactions whose records are in the committed output. txns: the transaction table,
    whose committed transactions are the possible newer owners."""
    columns = [*TXN_KEY, "txn_id", "generation", "commit_invoked", "committed_at"]
    in_output = txn_reads.filter(F.col("process") == FINAL_COMMITTED).select(
        *columns, "partitions", F.col("seen").alias("records"), F.lit(True).alias("in_output")
    )
    committed = txns.filter(F.col("committed_at").isNotNull()).select(
        *columns,
        F.coalesce("partitions", F.array().cast("array<int>")).alias("partitions"),
        F.lit(None).cast("long").alias("records"),
        F.lit(False).alias("in_output"),
    )
    per_partition = (
        in_output.unionByName(committed)
        .filter(F.col("generation").isNotNull())
        .select("*", F.explode("partitions").alias("partition"))
    )
    # Rows of strictly higher generation come first in -generation order: range up to -1.
    higher = (
        Window.partitionBy("partition")
        .orderBy(-F.col("generation"))
        .rangeBetween(Window.unboundedPreceding, -1)
    )
    newer_commit = F.when(
        F.col("committed_at").isNotNull(),
        F.struct(
            F.col("committed_at").alias("at"),
            F.col("generation").alias("generation"),
            F.col("partition").alias("src_partition"),
        ),
    )
    zombies = (
        per_partition.withColumn("newer", F.min(newer_commit).over(higher))
        .filter(F.col("in_output") & (F.col("newer.at") < F.col("commit_invoked")))
        .groupBy(*TXN_KEY)
        .agg(
            F.max("txn_id").alias("txn_id"),
            F.max("generation").alias("generation"),
            F.min("commit_invoked").alias("commit_invoked"),
            F.max("records").alias("records"),
            F.min("newer").alias("newer"),
        )
    )
    return explode_findings(
        zombies,
        finding(
            F.lit(True),
            ZOMBIE_WRITE.name,
            F.col("commit_invoked"),
            **{name: F.col(name) for name in [*TXN_KEY, "txn_id", "generation"]},
            commit_invoked=F.col("commit_invoked"),
            records=F.col("records"),
            src_partition=F.col("newer.src_partition"),
            newer_generation=F.col("newer.generation"),
            newer_committed=F.col("newer.at"),
        ),
    )


def stale_commit_findings(history: History) -> DataFrame:
    """Anomaly rows of fencing.stale-commit: one per PrepareCommit the coordinator wrote for a
    transactional id of the client history outside every commit call of that id (from its
    invoke to the same process's next commit event; to the end if there is none: a process
    that died mid-commit).

    One pass per transactional id, in time order: each call opens (+1) and ends (-1), and a
    prepare finds none open -- a running sum, not a join of every prepare with every call."""
    per_process = Window.partitionBy("process").orderBy("time")
    call = F.struct((F.col("time") - CLOCK_SLACK_S).alias("time"), F.lit(OPENS).alias("step"))
    ended = F.struct((F.col("until") + CLOCK_SLACK_S).alias("time"), F.lit(ENDS).alias("step"))
    bounds = (
        history.kind("txn")
        .filter(F.col("f") == "commit")
        .select("process", "txn_id", "time", "type")
        .withColumn("until", F.lead("time").over(per_process))
        .filter(F.col("type") == "invoke")
        .select(
            "txn_id",
            F.explode(
                F.array_compact(F.array(call, F.when(F.col("until").isNotNull(), ended)))
            ).alias("b"),
        )
        .select("txn_id", "b.time", "b.step")
    )
    state = F.get_json_object("params", "$.state")
    prepared = (
        history.kind(LOG_BATCH_KIND)
        .filter((F.col("f") == TXN_STATE) & (state == "PrepareCommit"))
        .select(
            "txn_id",
            "time",
            F.lit(PREPARES).alias("step"),
            F.get_json_object("params", "$.producer_epoch").cast("int").alias("producer_epoch"),
            F.get_json_object("params", "$.partitions").alias("partitions"),
        )
    )
    in_order = Window.partitionBy("txn_id").orderBy("time", "step")
    so_far = in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = in_order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    delta = F.when(F.col("step") == OPENS, 1).when(F.col("step") == ENDS, -1).otherwise(0)
    stale = (
        prepared.unionByName(bounds, allowMissingColumns=True)
        .withColumn("open", F.sum(delta).over(so_far))
        .withColumn("client_known", F.max((F.col("step") == OPENS).cast("int")).over(whole))
        .filter((F.col("step") == PREPARES) & (F.col("open") == 0) & (F.col("client_known") == 1))
    )
    return explode_findings(
        stale,
        finding(
            F.lit(True),
            STALE_COMMIT.name,
            F.col("time"),
            txn_id=F.col("txn_id"),
            prepared_at=F.col("time"),
            producer_epoch=F.col("producer_epoch"),
            partitions=F.col("partitions"),
        ),
    )
