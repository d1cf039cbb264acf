"""Client and brokers on the same transactions: where our processors record their own history
(kip447), the transactions rebuilt from the brokers' logs must agree with it.

Per transactional id, the transactions the coordinator committed must be at least those whose
commit call returned, and at most those plus the ones whose commit's outcome the client never
learned (a timeout, a killed process). Any other count is a disagreement: a client that was
told "committed" for a transaction the coordinator aborted or never saw, a broker that
committed what no client asked for, or a bug in eoschaos' reading of either. It is reported
in the verdict's statistics, never folded into a check's PASS: which side is wrong is for a
reviewer to find out.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.log_transactions import COMMIT, COMMITTING


def agreement(client_txns: DataFrame, log_txns: DataFrame, max_examples: int) -> dict[str, Any]:
    """How many transactional ids both sides know, and those whose committed counts disagree
    (the first `max_examples`, with both sides' counts)."""
    client = (
        client_txns.filter(F.col("txn_seq").isNotNull() & F.col("txn_id").isNotNull())
        .groupBy("txn_id")
        .agg(
            F.count(F.col("committed_at")).alias("client_committed"),
            F.count(
                F.when(
                    F.col("commit_invoked").isNotNull()
                    & F.col("committed_at").isNull()
                    & ~F.col("aborted"),
                    1,
                )
            ).alias("client_unknown"),
        )
    )
    logs = log_txns.groupBy("txn_id").agg(
        F.count(F.when(F.col("fate").isin(COMMIT, COMMITTING), 1)).alias("log_committed")
    )
    counts = ["client_committed", "client_unknown", "log_committed"]
    rows = [
        row.asDict()
        for row in client.join(logs, "txn_id", "full").fillna(0, subset=counts).collect()
    ]
    disagree = [
        row
        for row in sorted(rows, key=lambda row: row["txn_id"])
        if not row["client_committed"]
        <= row["log_committed"]
        <= row["client_committed"] + row["client_unknown"]
    ]
    return {"transactional_ids": len(rows), "disagreements": disagree[:max_examples]}
