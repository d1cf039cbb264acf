"""check_run: a run directory's history in, the verdict dict (verdict.json's content) out.

Spark jobs: the census (one grouped pass: readers, end state, faults, time span), the
transaction table (one row per transaction, kept in memory), then every check's anomaly rows
in ONE action -- the passes over sends and reads run as stages of it, and only counts and a
few examples reach the driver -- and the timeline: throughput per second, process lanes, and
the transactions' bars from the table still in memory.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from eoschaos.checkers import aggregates, delivery, fencing, isolation, liveness
from eoschaos.checkers.census import Census, take_census
from eoschaos.checkers.findings import result, tally
from eoschaos.checkers.forensics import forensics_section
from eoschaos.checkers.history_io import History, load_history
from eoschaos.checkers.lineage import lineage_section
from eoschaos.checkers.raw_records import attach_raw_records
from eoschaos.checkers.timeline import timeline
from eoschaos.checkers.transactions import transaction_reads, transaction_stats, transaction_table
from eoschaos.contract.capabilities import Capabilities
from eoschaos.contract.history import FINAL_COMMITTED, FINAL_UNCOMMITTED, LOG_BATCHES, TXN_STATE
from eoschaos.contract.rundir import SCHEMA_VERSION

DESCRIPTIONS = {
    **delivery.DESCRIPTIONS,
    **isolation.DESCRIPTIONS,
    **fencing.DESCRIPTIONS,
    **liveness.DESCRIPTIONS,
    **aggregates.DESCRIPTIONS,
}
# What each check needs beyond the reads every history has (eoschaos.contract.capabilities).
# A pipeline without `txn` history is a black box, judged by its effects on offsets and ids.
NEEDS_TXN_HISTORY = (
    "isolation.aborted-read",
    "isolation.uncommitted-read",
    "isolation.fractured-read",
    "fencing.zombie-write",
    "fencing.stale-commit",
)
NEEDS_TRANSACTIONS = (
    "isolation.aborted-read",
    "isolation.uncommitted-read",
    "isolation.fractured-read",
    "fencing.zombie-write",
    "fencing.stale-commit",
    "liveness.open-transactions",
)
NEEDS_COORDINATOR_STATES = ("fencing.stale-commit",)
NEEDS_FINAL_SCAN = (
    *delivery.DESCRIPTIONS,
    *aggregates.DESCRIPTIONS,
    "isolation.fractured-read",
    "isolation.aborted-offset-read",
)
# Checks that follow each input id into the output: meaningless when the output is results.
OUTPUT_IS_COPIES = ("delivery.lost", "delivery.duplicate", "delivery.phantom")
MANIFEST_KEYS = ("workload", "mode", "seed", "kafka_version", "faults", "backend", "command")


def check_run(
    spark: SparkSession, run_dir: Path, *, max_examples: int = 5, lineage: bool = True
) -> dict[str, Any]:
    """Judge RUN_DIR's history: the whole verdict, from one load of the history. Writes
    nothing (the run driver writes verdict.json). `lineage=False` leaves out the lineage
    section (graph stats, anomaly subgraphs, cycles), for callers that judge checks only."""
    started = time.monotonic()
    history = load_history(spark, Path(run_dir))
    try:
        return _judge(spark, history, started, max_examples, lineage)
    finally:
        history.release()


def _judge(
    spark: SparkSession, history: History, started: float, max_examples: int, lineage: bool
) -> dict[str, Any]:
    census = take_census(history)
    not_applicable = _not_applicable(history, census)
    applicable = [name for name in DESCRIPTIONS if name not in not_applicable]

    parts: list[DataFrame] = [isolation.offset_findings(history, census)]
    if any(name in applicable for name in delivery.DESCRIPTIONS):
        parts.append(delivery.delivery_findings(history))
    txn_stats: dict[str, int] = {}
    txns = None
    if "isolation.aborted-read" in applicable:
        txns = transaction_table(history).cache()
        txn_stats = transaction_stats(txns)
        # Two checks read it: cached, the reads are joined and aggregated once, not twice
        txn_reads = transaction_reads(history, txns).cache()
        drained = census.drained(history.output_topic) if census.has_final_committed else []
        parts += [
            isolation.transaction_read_findings(txn_reads, drained),
            fencing.zombie_findings(txn_reads, txns),
        ]
    if "fencing.stale-commit" in applicable:
        parts.append(fencing.stale_commit_findings(history))
    tallies = tally(functools.reduce(DataFrame.unionByName, parts), max_examples)
    run_timeline = timeline(history, census, txns)
    if txns is not None:
        txns.unpersist()
        txn_reads.unpersist()
    tallies.update(liveness.liveness_tallies(census, history.input_topic, max_examples))
    if "aggregate.mismatch" in applicable:
        tallies.update(aggregates.aggregate_tallies(history, census, max_examples))
    if "aggregate.expected-output" in applicable:
        tallies.update(aggregates.expected_output_tallies(census, max_examples))

    checks = {name: result(DESCRIPTIONS[name], tallies.get(name)) for name in applicable}
    if "fencing.zombie-write" in checks:
        checks["fencing.zombie-write"]["counts"]["rejected_attempts"] = txn_stats.get(
            "rejected_attempts", 0
        )
    attach_raw_records(history, checks)
    unfinished = _unfinished(census)
    verdict = {
        "verdict": _overall(checks, unfinished),
        "complete": history.complete and not unfinished,
        "damage": history.damage,
        "unfinished": unfinished,
        "history_schema": SCHEMA_VERSION,
        **{key: history.manifest.get(key) for key in MANIFEST_KEYS},
        "checks": checks,
        "not_applicable": not_applicable,
        "stats": _stats(history, census, txn_stats),
        "timeline": run_timeline,
        "forensics": forensics_section(history, checks),
    }
    if lineage:
        verdict["lineage"] = lineage_section(history, checks)
    verdict["config"] = history.manifest
    verdict["cluster"] = history.manifest.get("cluster")
    verdict["checker"] = {
        "seconds": round(time.monotonic() - started, 3),
        "spark_master": spark.sparkContext.master,
        "events": census.events,
    }
    return verdict


def _unfinished(census: Census) -> list[str]:
    """What a run that reached its end leaves and this history lacks (a run killed midway)."""
    missing = []
    if not census.has_final_committed:
        missing.append("no final-committed scan of the output")
    if not census.end_rows_of("log-end"):
        missing.append("no end state (log-end rows)")
    return missing


def _overall(checks: dict[str, dict[str, Any]], unfinished: list[str]) -> str:
    """FAIL if any check found an anomaly (in a partial history too); else UNKNOWN for a run
    that did not reach its end (Jepsen's :unknown): its unjudged checks could hide anything."""
    if any(check["verdict"] == "FAIL" for check in checks.values()):
        return "FAIL"
    return "UNKNOWN" if unfinished else "PASS"


def _not_applicable(history: History, census: Census) -> dict[str, str]:
    """Checks that cannot be judged on this history, with why: never a PASS that cannot fail."""
    reasons: dict[str, str] = {}
    workload = history.manifest.get("workload")
    capabilities = Capabilities.of_manifest(history.manifest)
    if not capabilities.transactions:
        for name in NEEDS_TRANSACTIONS:
            reasons[name] = f"mode {history.mode} uses no transactions"
    if not capabilities.transaction_history:
        for name in NEEDS_TXN_HISTORY:
            reasons.setdefault(
                name,
                f"workload {workload} writes no per-transaction history "
                "(isolation.aborted-offset-read judges its reads by offsets)",
            )
    if not census.log_rows.get(TXN_STATE):
        for name in NEEDS_COORDINATOR_STATES:
            reasons.setdefault(
                name,
                "the history has no transaction states of the coordinators (writer "
                f"{LOG_BATCHES}, recorded since history 2026-11-25)",
            )
    if not census.has_final_committed:
        for name in NEEDS_FINAL_SCAN:
            reasons.setdefault(name, "the history has no final-committed scan")
    if not census.end_rows_of("aggregate"):
        reasons["aggregate.mismatch"] = "the pipeline keeps no aggregates (no aggregate rows)"
    if not capabilities.output_is_copies:
        for name in OUTPUT_IS_COPIES:
            reasons.setdefault(
                name,
                "the output holds the results of an aggregation (--expect), not copies of "
                "input records; aggregate.expected-output judges it",
            )
    else:
        reasons["aggregate.expected-output"] = "the run has no --expect function"
    if not census.end_rows_of("log-end"):
        reasons.setdefault(
            "isolation.aborted-offset-read", "the history has no end state (log-end rows)"
        )
        for name in liveness.DESCRIPTIONS:
            reasons.setdefault(name, "the history has no end state (log-end rows)")
    elif not census.end_rows_of("group-offset"):
        reasons["liveness.group-offsets"] = "the end state has no group offsets"
    return reasons


def _stats(history: History, census: Census, txn_stats: dict[str, int]) -> dict[str, Any]:
    """Record counts as the final scans saw them (informational: the checks judge ids)."""
    return {
        "input_records": census.records_of(FINAL_COMMITTED, history.input_topic),
        "acked_sends": census.acked_sends,
        "output_committed": census.records_of(FINAL_COMMITTED, history.output_topic),
        "output_uncommitted": census.records_of(FINAL_UNCOMMITTED, history.output_topic),
        "transactions": txn_stats,
        "readers": census.records,
    }
