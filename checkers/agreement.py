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

from collections import Counter
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.findings import without_nulls
from eoschaos.checkers.history_io import History
from eoschaos.checkers.log_findings import BUCKET, buckets, placed_reads
from eoschaos.checkers.log_transactions import COMMITTED_FATES
from eoschaos.checkers.transactions import TXN_KEY, outcome
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

# What a read's coordinator transaction is named by, in the pairs and the examples
LOG_FIELDS = ("producer_id", "txn_id", "txn_seq", "fate", "records")
_PLACED = "placed"  # not a disagreement: a client transaction whose records were compared


def history_agreement(
    history: History,
    client_txns: list[dict[str, Any]],
    log_txns: DataFrame,
    log_rows: DataFrame,
    counts: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    max_examples: int,
) -> dict[str, Any]:
    """`agreement` of a history: the reference scan's reads of the output that name a client
    transaction, against the logs' data batches among `log_rows` (`producer_rows`), beside
    the client's transaction table (collected: a row per transaction). `counts`:
    both sides' transactions counted by transactional id (`outcome_counts`, `fate_counts`)."""
    reads = history.kind("read").filter(
        (F.col("process") == FINAL_UNCOMMITTED)
        & F.col("topic").isin(*history.topics.written)
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


def fate_counts(log_txns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The coordinators' transactions (the logs' table, collected) counted by transactional id
    and fate, a row per combination: their fates and the per-id agreement are sums of it."""
    counts = Counter((txn["txn_id"], txn["fate"]) for txn in log_txns)
    return [{"txn_id": i, "fate": fate, "count": n} for (i, fate), n in counts.items()]


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
    holding its offset in its topic-partition (batches never overlap), and that batch's
    transaction (the producer's range holding the batch: a producer's ranges in one
    partition never overlap, other producers' may). Both joins are on broadcast ranges by
    offset bucket (they grow with batches and transactions), so the reads are not shuffled."""
    records = F.aggregate("output", F.lit(0).cast("long"), lambda n, o: n + o["records"])
    ranges = log_txns.select(
        F.col("producer_id").alias("range_producer"),
        F.struct(*LOG_FIELDS[:-1], records.alias(LOG_FIELDS[-1])).alias("log"),
        F.explode("output").alias("o"),
    ).withColumn("bucket", buckets("o.first_offset", "o.last_offset"))
    owned = batches.join(
        F.broadcast(ranges),
        (F.col("producer_id") == F.col("range_producer"))
        & (F.col("partition") == F.col("o.partition"))
        & (F.floor(F.col("offset") / BUCKET) == F.col("bucket"))
        & F.col("offset").between(F.col("o.first_offset"), F.col("o.last_offset")),
    ).select("topic", "partition", F.col("offset").alias("first_offset"), "last_offset", "log")
    return placed_reads(
        reads.select(*TXN_KEY, "topic", "partition", "offset"), owned, how="left"
    ).select(*TXN_KEY, "log")


def _by_transaction(
    client_txns: list[dict[str, Any]],
    log_txns: DataFrame,
    reads: DataFrame,
    batches: DataFrame,
    max_examples: int,
) -> dict[str, dict[str, Any]]:
    """Per kind (and `placed`): how many client or coordinator transactions, and the first
    examples. The pairs of a client and a coordinator transaction (how many of the client's
    records each holds) are one job and one small collect; the rest is on the driver, beside
    the client's transactions (collected)."""
    pairs = (
        _placed(reads, batches, log_txns)
        .groupBy(*TXN_KEY, "log")
        .agg(F.count(F.lit(1)).alias("read"))
        .collect()
    )
    clients = {tuple(txn[k] for k in TXN_KEY): txn for txn in client_txns}
    per_client: dict[tuple, dict[str, Any]] = {}
    per_log: dict[tuple, list[dict[str, Any]]] = {}
    for pair in pairs:
        key = tuple(pair[k] for k in TXN_KEY)
        entry = per_client.setdefault(key, {"logs": [], "read": 0, "unplaced": 0})
        entry["read"] += pair["read"]
        if pair["log"] is None:
            entry["unplaced"] += pair["read"]
            continue
        log = pair["log"].asDict()
        entry["logs"].append(log | {"read": pair["read"]})
        per_log.setdefault(tuple(log.values()), []).append(
            dict(zip(TXN_KEY, key, strict=True)) | {"read": pair["read"]}
        )
    found: dict[str, list[tuple[tuple, dict[str, Any]]]] = {}
    for key, entry in per_client.items():
        client = clients.get(key)
        ended = outcome(client) if client else "open"
        produced = client["produced"] if client else None
        logs = sorted(entry["logs"], key=_ascending)
        committed = ended == "committed"
        kinds = [
            _PLACED if logs else None,
            FATE
            if (committed and any(not _log_committed(log) for log in logs))
            or (ended == "aborted" and any(_log_committed(log) for log in logs))
            else None,
            SPLIT if len(logs) > 1 else None,
            UNPLACED if committed and entry["unplaced"] > 0 else None,
            RECORDS
            if committed
            and len(logs) == 1
            and produced is not None
            and logs[0]["records"] != produced
            else None,
        ]
        example = {
            "txn_id": client["txn_id"] if client else None,
            **dict(zip(TXN_KEY, key, strict=True)),
            "outcome": ended,
            "produced": produced,
            "read": entry["read"],
            "unplaced": entry["unplaced"],
            "logs": logs,
        }
        for kind in kinds:
            if kind is not None:
                found.setdefault(kind, []).append((_ascending(example), example))
    for log, readers in per_log.items():
        if len(readers) > 1:
            example = dict(zip(LOG_FIELDS, log, strict=True))
            example["clients"] = sorted(readers, key=_ascending)
            found.setdefault(SHARED, []).append((_ascending(example), example))
    return {
        kind: {
            "count": len(rows),
            "examples": [
                {"kind": kind, **without_nulls(example)}
                for _, example in sorted(rows, key=lambda row: row[0])[:max_examples]
            ]
            if kind != _PLACED
            else [],
        }
        for kind, rows in found.items()
    }


def _log_committed(log: dict[str, Any]) -> bool:
    return log["fate"] in COMMITTED_FATES


def _ascending(row: dict[str, Any]) -> tuple:
    """A row's sort key, field by field as Spark sorts structs (nulls first)."""
    return tuple(
        (value is not None, _ascending(value) if isinstance(value, dict) else value)
        for value in row.values()
        if not isinstance(value, list)
    )
