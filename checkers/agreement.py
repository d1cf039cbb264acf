"""Client and brokers on the same transactions: where our processors record their own history
(kip447), the transactions rebuilt from the brokers' logs must agree with it.

Two grains. Per transactional id, the transactions the coordinator committed must be at least
those whose commit call returned, and at most those plus the ones whose commit's outcome the
client never learned (a timeout, a killed process). Per transaction, each output record the
reference scan read names its client transaction in its headers and lies in one batch of the
logs, which lies in one transaction of the coordinator: the two must pair one to one, with the
same fate and, for a committed one, as many records as the client produced.

Any other outcome is a disagreement: a client that was told "committed" for a transaction the
coordinator aborted or never saw, a broker that committed what no client asked for, or a bug in
eoschaos' reading of either. It is reported in the verdict's statistics, never folded into a
check's PASS: which side is wrong is for a reviewer to find out.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.checkers.history_io import History
from eoschaos.checkers.log_findings import BUCKET
from eoschaos.checkers.log_transactions import COMMIT, COMMITTING
from eoschaos.checkers.transactions import TXN_KEY, unknown_outcome
from eoschaos.contract.checks import (
    AGREEMENT_KINDS,
    COMMITTED_COUNT,
    FATE,
    RECORDS,
    SHARED,
    SPLIT,
    UNPLACED,
)
from eoschaos.contract.history import FINAL_UNCOMMITTED, LOG_BATCH

COMMITTED_FATES = (COMMIT, COMMITTING)
_PLACED = "placed"  # not a disagreement: a client transaction whose records were compared


def history_agreement(
    history: History,
    client_txns: DataFrame,
    log_txns: DataFrame,
    log_rows: DataFrame,
    counts: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    max_examples: int,
) -> dict[str, Any]:
    """`agreement` of a history: the reference scan's reads of the output that name a client
    transaction, against the logs' data batches among `log_rows` (`producer_rows`). `counts`:
    both sides' transactions counted by transactional id (`outcome_counts`, `fate_counts`)."""
    reads = history.kind("read").filter(
        (F.col("process") == FINAL_UNCOMMITTED)
        & (F.col("topic") == history.output_topic)
        & F.col("txn_seq").isNotNull()
    )
    batches = log_rows.filter((F.col("f") == LOG_BATCH) & ~F.col("control"))
    ids, by_id = _by_transactional_id(*counts)
    found = _by_transaction(client_txns, log_txns, reads, batches, max_examples)
    placed = found.pop(_PLACED, {"count": 0})["count"]
    kinds = {COMMITTED_COUNT: len(by_id)} | {kind: row["count"] for kind, row in found.items()}
    examples = [{"kind": COMMITTED_COUNT, **row} for row in by_id]
    for kind in AGREEMENT_KINDS:
        examples += found.get(kind, {}).get("examples", [])
    return {
        "transactional_ids": ids,
        "transactions": placed,
        "counts": {kind: kinds[kind] for kind in AGREEMENT_KINDS if kinds.get(kind)},
        "disagreements": examples[:max_examples],
    }


def fate_counts(log_txns: DataFrame) -> list[dict[str, Any]]:
    """The coordinators' transactions counted by transactional id and fate, in one small
    collect (a row per combination): their fates and the per-id agreement are sums of it."""
    return [row.asDict() for row in log_txns.groupBy("txn_id", "fate").count().collect()]


def _by_transactional_id(
    client_counts: list[dict[str, Any]], log_counts: list[dict[str, Any]]
) -> tuple[int, list[dict]]:
    """How many transactional ids both sides know, and those whose committed counts disagree,
    with both sides' counts (on the driver, from the two sides' counts)."""
    sides = ("client_committed", "client_unknown", "log_committed")
    per_id: dict[str, dict[str, int]] = {}
    for row in client_counts:
        if row["real"] and row["txn_id"] is not None:
            counts = per_id.setdefault(row["txn_id"], dict.fromkeys(sides, 0))
            counts["client_committed"] += row["transactions"] if row["committed"] else 0
            counts["client_unknown"] += row["transactions"] if row["unknown"] else 0
    for row in log_counts:
        counts = per_id.setdefault(row["txn_id"], dict.fromkeys(sides, 0))
        counts["log_committed"] += row["count"] if row["fate"] in COMMITTED_FATES else 0
    disagree = [
        {"txn_id": txn_id, **counts}
        for txn_id, counts in sorted(per_id.items(), key=lambda item: str(item[0]))
        if not counts["client_committed"]
        <= counts["log_committed"]
        <= counts["client_committed"] + counts["client_unknown"]
    ]
    return len(per_id), disagree


def _placed(reads: DataFrame, batches: DataFrame, log_txns: DataFrame) -> DataFrame:
    """Each read with the coordinator's transaction that holds it (null: none does): the batch
    starting at or before its offset in its partition, if the batch reaches it, and that
    batch's transaction (the producer's range holding the batch: a producer's ranges in one
    partition never overlap, other producers' may). Batches and ranges are small (they grow
    with batches and transactions); the reads are sorted once, by partition and offset."""
    records = F.aggregate("output", F.lit(0).cast("long"), lambda n, o: n + o["records"])
    ranges = log_txns.select(
        F.col("producer_id").alias("range_producer"),
        F.struct("producer_id", "txn_id", "txn_seq", "fate", records.alias("records")).alias("log"),
        F.explode("output").alias("o"),
    ).withColumn(  # a batch meets only its bucket's ranges, not all of its producer's
        "bucket",
        F.explode(
            F.sequence(
                F.floor(F.col("o.first_offset") / BUCKET), F.floor(F.col("o.last_offset") / BUCKET)
            )
        ),
    )
    owned = batches.join(
        F.broadcast(ranges),
        (F.col("producer_id") == F.col("range_producer"))
        & (F.col("partition") == F.col("o.partition"))
        & (F.floor(F.col("offset") / BUCKET) == F.col("bucket"))
        & F.col("offset").between(F.col("o.first_offset"), F.col("o.last_offset")),
    ).select(
        "partition",
        "offset",
        F.lit(0).alias("order"),
        F.struct("last_offset", "log").alias("batch"),
    )
    by_offset = (
        Window.partitionBy("partition")
        .orderBy("offset", "order")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    reaches = F.col("offset") <= F.col("covering.last_offset")
    return (
        reads.select(*TXN_KEY, "partition", "offset", F.lit(1).alias("order"))
        .unionByName(owned, allowMissingColumns=True)
        .withColumn("covering", F.last("batch", ignorenulls=True).over(by_offset))
        .filter(F.col("order") == 1)
        .select(*TXN_KEY, F.when(reaches, F.col("covering.log")).alias("log"))
    )


def _by_transaction(
    client_txns: DataFrame,
    log_txns: DataFrame,
    reads: DataFrame,
    batches: DataFrame,
    max_examples: int,
) -> dict[str, dict[str, Any]]:
    """Per kind (and `placed`): how many client or coordinator transactions, and the first
    examples, in one job over the pairs of a client and a coordinator transaction."""
    pairs = (
        _placed(reads, batches, log_txns)
        .groupBy(*TXN_KEY, "log")
        .agg(F.count(F.lit(1)).alias("read"))
    )
    client = client_txns.select(
        *TXN_KEY,
        "txn_id",
        "produced",
        F.when(F.col("committed_at").isNotNull(), "committed")
        .when(F.col("aborted"), "aborted")
        .when(unknown_outcome(), "unknown")
        .otherwise("open")
        .alias("outcome"),
    )
    placed = F.col("log").isNotNull()
    per_client = (
        pairs.groupBy(*TXN_KEY)
        .agg(
            F.sort_array(
                F.collect_list(F.when(placed, F.struct(F.col("log.*"), F.col("read"))))
            ).alias("logs"),
            F.sum("read").alias("read"),
            F.coalesce(F.sum(F.when(~placed, F.col("read"))), F.lit(0)).alias("unplaced"),
        )
        .join(F.broadcast(client), TXN_KEY, "left")
    )
    committed = F.col("outcome") == "committed"

    def log_committed(log: Column) -> Column:
        return log["fate"].isin(*COMMITTED_FATES)

    kinds = F.array_compact(
        F.array(
            F.when(F.size("logs") > 0, F.lit(_PLACED)),
            F.when(
                (committed & F.exists("logs", lambda log: ~log_committed(log)))
                | ((F.col("outcome") == "aborted") & F.exists("logs", log_committed)),
                F.lit(FATE),
            ),
            F.when(F.size("logs") > 1, F.lit(SPLIT)),
            F.when(committed & (F.col("unplaced") > 0), F.lit(UNPLACED)),
            F.when(
                committed
                & (F.size("logs") == 1)
                & (F.col("logs")[0]["records"] != F.col("produced")),
                F.lit(RECORDS),
            ),
        )
    )
    client_rows = per_client.select(
        F.explode(kinds).alias("kind"),
        F.to_json(
            F.struct("txn_id", *TXN_KEY, "outcome", "produced", "read", "unplaced", "logs")
        ).alias("example"),
    )
    shared = (
        pairs.filter(placed)
        .groupBy("log")
        .agg(F.sort_array(F.collect_list(F.struct(*TXN_KEY, "read"))).alias("clients"))
        .filter(F.size("clients") > 1)
        .select(
            F.lit(SHARED).alias("kind"),
            F.to_json(F.struct(F.col("log.*"), "clients")).alias("example"),
        )
    )
    rows = (
        client_rows.unionByName(shared)
        .groupBy("kind")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.slice(
                F.sort_array(F.collect_list(F.when(F.col("kind") != _PLACED, F.col("example")))),
                1,
                max_examples,
            ).alias("examples"),
        )
        .collect()
    )
    return {
        row["kind"]: {
            "count": row["count"],
            "examples": [{"kind": row["kind"], **json.loads(e)} for e in row["examples"]],
        }
        for row in rows
    }
