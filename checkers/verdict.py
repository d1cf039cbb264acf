"""check_run: a run directory's history in, the verdict dict (verdict.json's content) out.

Spark jobs: the census (one grouped pass: readers, end state, faults, time span), the
transaction table (one row per transaction, collected once: the statistics count it on the
driver), then, side by side (checkers.spark.concurrently), every pass's anomaly rows in one
query -- only counts and a few examples reach the driver -- the timeline (throughput per
second, process lanes, and the transactions' bars) and the lineage of the whole history.
Where the run recorded the brokers' logs, the transactions rebuilt from them
(checkers/log_transactions.py) are collected once too, also side by side, and judged on the
driver: the checks of whole transactions, their fates and, next to a client history, the
agreement of both sides (whose per-transaction grain is one more job). Last, the failed
examples' records, forensics and lineage."""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from eoschaos.checkers import (
    aggregates,
    delivery,
    fencing,
    isolation,
    liveness,
    send_order,
    transaction_order,
)
from eoschaos.checkers.agreement import fate_counts, history_agreement
from eoschaos.checkers.census import Census, take_census
from eoschaos.checkers.findings import Tally, result, tally, tally_found
from eoschaos.checkers.forensics import forensics_section
from eoschaos.checkers.history_io import History, load_history
from eoschaos.checkers.lineage import history_lineage, lineage_section
from eoschaos.checkers.lineage.from_logs import PlainLog
from eoschaos.checkers.log_findings import (
    downstream_readers,
    downstream_reads,
    judge_log_transactions,
    name_transactions,
    uncommitted_offset_findings,
)
from eoschaos.checkers.log_transactions import (
    offset_commits,
    output_batches,
    output_pieces,
    producer_rows,
    topic_batches,
)
from eoschaos.checkers.log_transactions import transaction_table as log_transaction_table
from eoschaos.checkers.offset_commits import offset_commit_findings
from eoschaos.checkers.outside_copies import outside_copies
from eoschaos.checkers.raw_records import attach_raw_records
from eoschaos.checkers.realtime_lag import (
    first_reads,
    lag_figures,
    lag_findings,
    unseen_over_time,
)
from eoschaos.checkers.spark import concurrently, jobs_counted
from eoschaos.checkers.timeline import timeline
from eoschaos.checkers.transaction_order import INT_SEND_SKIP_NOTE
from eoschaos.checkers.transactions import (
    outcome_counts,
    transaction_reads,
    transaction_stats,
    transaction_table,
)
from eoschaos.contract.capabilities import Capabilities
from eoschaos.contract.checks import (
    ABORTED_OFFSET_READ,
    CATALOGUE,
    EXPECTED_OUTPUT,
    GROUP_OFFSETS,
    INT_SEND_SKIP,
    REALTIME_LAG,
    TORN_TRANSACTION,
    UNCOMMITTED_OFFSET_READ,
    UNSEEN,
    ZOMBIE_WRITE,
    CheckResult,
    Evidence,
    Pass,
    first_missing,
)
from eoschaos.contract.history import (
    FINAL_COMMITTED,
    FINAL_UNCOMMITTED,
    HEADER_TXN_INDEX,
    LOG_BATCH,
    LOG_BATCH_KIND,
    LOG_BATCHES,
    OFFSET_COMMIT,
    TXN_STATE,
)
from eoschaos.contract.rundir import SCHEMA_VERSION

DEAD_LETTER_IDS = 20  # ids of each dead-letter topic the verdict lists
MANIFEST_KEYS = ("workload", "mode", "seed", "kafka_version", "faults", "backend", "command")


def check_run(
    spark: SparkSession, run_dir: Path, *, max_examples: int = 5, lineage: bool = True
) -> dict[str, Any]:
    """Judge RUN_DIR's history: the whole verdict, from one load of the history. Writes
    nothing (the run driver writes verdict.json). `lineage=False` leaves out the lineage
    section (graph stats, anomaly subgraphs, cycles), for callers that judge checks only."""
    started = time.monotonic()
    with jobs_counted(spark) as jobs:
        history = load_history(spark, Path(run_dir))
        try:
            verdict = _judge(spark, history, started, max_examples, lineage)
        finally:
            history.release()
        verdict["checker"]["jobs"] = jobs()
    return verdict


def _judge(
    spark: SparkSession, history: History, started: float, max_examples: int, lineage: bool
) -> dict[str, Any]:
    census = take_census(history)
    not_applicable = _not_applicable(history, census)
    applicable = [name for name in CATALOGUE if name not in not_applicable]
    passes = {CATALOGUE[name].found_by for name in applicable}

    # each pass's anomaly rows, tallied by Spark as one union; built by the tally's own thread,
    # so that planning them overlaps the other parts' jobs instead of delaying them all
    parts: list[Callable[[], DataFrame]] = []
    on_driver: list[Callable[[], dict[str, Tally]]] = []  # passes over collected grains
    if Pass.OFFSETS in passes:
        parts.append(functools.partial(isolation.offset_findings, history, census))
    if Pass.SEND_ORDER in passes:
        parts.append(functools.partial(send_order.send_order_findings, history))
    if Pass.TRANSACTION_ORDER in passes:
        parts.append(functools.partial(transaction_order.transaction_order_findings, history))
    if Pass.DELIVERY in passes:
        committed = (
            {
                (topic, partition): offset
                for topic in history.topics.inputs
                for partition, offset in liveness.committed_offsets(census, topic).items()
            }
            if UNSEEN.name in applicable
            else None
        )
        parts.append(functools.partial(delivery.delivery_findings, history, committed))
    txn_stats: dict[str, Any] = {}
    txns = client_table = client_counts = None
    if passes & {Pass.TRANSACTION_READS, Pass.ZOMBIES}:
        txns = transaction_table(history).cache()
        client_table = [row.asDict() for row in txns.collect()]  # a row per transaction
        client_counts = outcome_counts(client_table)
        txn_stats = transaction_stats(client_counts)
        on_driver.append(
            functools.partial(
                _transaction_reads, history, census, txns, client_table, passes, max_examples
            )
        )
    if Pass.STALE_COMMITS in passes:
        on_driver.append(lambda: tally_found(fencing.stale_commit_found(history), max_examples))
    log = history.kind(LOG_BATCH_KIND)
    # what the downstream readers read of the output: the lag, unseen input, uncommitted reads
    topics = history.topics
    readers = downstream_readers(census)
    reads = downstream_reads(history, census, topics.written)
    commits = offset_commits(log)  # read once, by both passes over the coordinators' logs
    if Pass.OFFSET_COMMITS in passes:
        parts.append(functools.partial(offset_commit_findings, commits))
    log_txns = log_rows = pieces = batches = lags = None
    if Pass.LOG_TRANSACTIONS in passes:
        log_rows = producer_rows(log, commits, topics.inputs, topics.written).cache()
        pieces = output_pieces(log_rows).cache()  # read by the plans below and the examples
        # The transactions need the coordinators' states; without them (runs recorded
        # before they were) there is no table, and no agreement to state
        if census.log_rows.get(TXN_STATE):
            log_txns = log_transaction_table(log_rows, topics.all).cache()
        if UNCOMMITTED_OFFSET_READ.name in applicable:
            # each read placed in its batch, by two plans: reads before the marker, and the
            # first reads of committed records from their markers (the realtime lag)
            batches = output_batches(log_rows).cache()
            parts.append(functools.partial(uncommitted_offset_findings, reads, batches))
            lags = first_reads(reads, batches, readers, topics.written)
            if REALTIME_LAG.name in applicable:
                parts.append(functools.partial(lag_findings, lags, history.manifest["max_lag"]))
    # Each pass's findings, the timeline, the log transactions' stats and the lineage of the
    # whole history read the cached tables and not each other's results: side by side.
    capabilities = Capabilities.of_manifest(history.manifest)
    torn = capabilities.output_is_copies if TORN_TRANSACTION.name in applicable else None
    (
        union_tallies,
        run_timeline,
        lag,
        unseen,
        (log_stats, log_tallies),
        whole_lineage,
        *driver_tallies,
    ) = concurrently(
        spark,
        # first, as the longest part: one query for every pass's rows (their own stages run
        # side by side in it; their ranking and collect are done once, not once a pass)
        lambda: _tally_union(parts, max_examples) if parts else {},
        lambda: timeline(history, census, client_table),
        lambda: (
            lag_figures(lags, census.start, len(topics.written) == 1) if lags is not None else None
        ),
        lambda: (
            unseen_over_time(history, reads, census.start) if census.start is not None else None
        ),
        lambda: _log_transactions(
            history,
            client_table,
            client_counts,
            log_txns,
            log_rows,
            pieces,
            torn,
            capabilities.offsets_in_transactions,
            max_examples,
        ),
        lambda: history_lineage(history) if lineage else None,
        *on_driver,
    )
    tallied = [*driver_tallies, union_tallies]
    tallies = {name: found for part in tallied for name, found in part.items()}
    tallies.update(log_tallies)
    txn_stats.update(log_stats)
    if Pass.TRANSACTION_ORDER in passes:
        interleaved = tallies.pop(INT_SEND_SKIP, None) or Tally()
        txn_stats[INT_SEND_SKIP] = {
            "count": interleaved.count,
            "examples": interleaved.examples,
            "note": INT_SEND_SKIP_NOTE,
        }
    if pieces is not None and ABORTED_OFFSET_READ.name in tallies:
        name_transactions(pieces, tallies[ABORTED_OFFSET_READ.name].examples)
    over_time: dict[str, Any] = {}  # figures for stats, their series for the timeline
    if lag is not None:
        over_time["realtime_lag"], run_timeline["realtime_lag"] = lag
    if unseen is not None:
        over_time["unseen"], run_timeline["unseen"] = unseen
    for cached in (pieces, batches, log_rows):
        if cached is not None:
            cached.unpersist()
    if txns is not None:
        txns.unpersist()
    if Pass.END_STATE in passes:
        tallies.update(liveness.liveness_tallies(census, topics.inputs, max_examples))
        if GROUP_OFFSETS.name in applicable:
            liveness.note_stalled_since(history, census, tallies[GROUP_OFFSETS.name])
    if Pass.INSTANCES in passes:
        tallies.update(
            liveness.instance_failure_tally(census, capabilities.failure_exits, max_examples)
        )
    if Pass.AGGREGATES in passes:
        tallies.update(aggregates.aggregate_tallies(history, census, max_examples))
    if Pass.EXPECTED_OUTPUT in passes:
        tallies.update(aggregates.expected_output_tallies(census, max_examples))

    checks = {name: result(CATALOGUE[name], tallies.get(name)) for name in applicable}
    if ZOMBIE_WRITE.name in checks:
        checks[ZOMBIE_WRITE.name].counts["rejected_attempts"] = txn_stats.get(
            "rejected_attempts", 0
        )
    attach_raw_records(history, checks)
    # Without transactions in the logs, the group's plain commits and the output's batches
    # still say when each drawn record was committed past and written.
    plain_log = (
        PlainLog(
            commits.filter(F.col("topic") == history.input_topic),
            topic_batches(log, history.output_topic),
        )
        if log_txns is None
        and census.log_rows.get(OFFSET_COMMIT)
        and census.log_rows.get(LOG_BATCH)
        else None
    )
    forensics, run_lineage = concurrently(
        spark,
        lambda: forensics_section(history, checks),
        lambda: (
            lineage_section(
                history,
                checks,
                whole=whole_lineage,
                log_txns=log_txns,
                plain_log=plain_log,
            )
            if lineage
            else None
        ),
    )
    if log_txns is not None:
        log_txns.unpersist()
    unfinished = _unfinished(census)
    verdict = {
        "verdict": _overall(checks, unfinished),
        "complete": history.complete and not unfinished,
        "damage": history.damage,
        "unfinished": unfinished,
        "history_schema": SCHEMA_VERSION,
        **{key: history.manifest.get(key) for key in MANIFEST_KEYS},
        "checks": {name: check.to_json() for name, check in checks.items()},
        "not_applicable": not_applicable,
        "stats": {**_stats(history, census, txn_stats), **over_time},
        "timeline": run_timeline,
        "forensics": forensics,
    }
    if lineage:
        verdict["lineage"] = run_lineage
    verdict["config"] = history.manifest
    verdict["cluster"] = history.manifest.get("cluster")
    verdict["checker"] = {
        "seconds": round(time.monotonic() - started, 3),
        "spark_master": spark.sparkContext.master,
        "events": census.events,
    }
    return verdict


def _transaction_reads(
    history: History,
    census: Census,
    txns: DataFrame,
    client_table: list[dict[str, Any]],
    passes: set[Pass],
    max_examples: int,
) -> dict[str, Tally]:
    """What each downstream reader saw of each transaction (a row per reader and
    transaction), collected once and judged on the driver: the reads of aborted, uncommitted
    and fractured transactions, and zombie writes."""
    rows = [row.asDict(recursive=True) for row in transaction_reads(history, txns).collect()]
    found = []
    if Pass.TRANSACTION_READS in passes:
        drained = census.drained(history.output_topic) if census.has_final_committed else []
        found += isolation.transaction_read_found(rows, drained)
    if Pass.ZOMBIES in passes:
        found += fencing.zombie_found(rows, client_table)
    return tally_found(found, max_examples)


def _log_transactions(
    history: History,
    client_table: list[dict[str, Any]] | None,
    client_counts: list[dict[str, Any]] | None,
    log_txns: DataFrame | None,
    log_rows: DataFrame | None,
    pieces: DataFrame | None,
    torn: bool | None,
    offsets_in_transactions: bool,
    max_examples: int,
) -> tuple[dict[str, Any], dict[str, Tally]]:
    """The checks of the coordinators' transactions, judged on the driver from their table
    collected once (a row per transaction): older-epoch commits, hanging transactions (with
    the output's unmarked pieces) and, where `torn` is set (the output's copies or not), torn
    ones (by their markers alone unless `offsets_in_transactions`). Their stats: the
    transactions by fate (COMMIT, ABORT, OPEN, ...) and, next to a client history, the two
    sides' agreement. Nothing without the brokers' logs."""
    if log_txns is None or log_rows is None or pieces is None:
        return {}, {}
    by_offsets = torn and offsets_in_transactions
    outside = (
        outside_copies(history, history.kind(LOG_BATCH_KIND), log_txns) if by_offsets else None
    )
    table, found = judge_log_transactions(log_txns, pieces, torn, outside, offsets_in_transactions)
    log_counts = fate_counts(table)
    fates = Counter()
    for row in log_counts:
        fates[row["fate"]] += row["count"]
    stats: dict[str, Any] = {"from_logs": dict(fates)}
    if client_table is not None and client_counts is not None:
        stats["agreement"] = history_agreement(
            history, client_table, log_txns, log_rows, (client_counts, log_counts), max_examples
        )
    return stats, tally_found(found, max_examples)


def _unfinished(census: Census) -> list[str]:
    """What a run that reached its end leaves and this history lacks (a run killed midway)."""
    missing = []
    if not census.has_final_committed:
        missing.append("no final-committed scan of the output")
    if not census.end_rows_of("log-end"):
        missing.append("no end state (log-end rows)")
    return missing


def _overall(checks: dict[str, CheckResult], unfinished: list[str]) -> str:
    """FAIL if any check found an anomaly (in a partial history too); else UNKNOWN for a run
    that did not reach its end (Jepsen's :unknown): its unjudged checks could hide anything."""
    if any(check.failed for check in checks.values()):
        return "FAIL"
    return "UNKNOWN" if unfinished else "PASS"


def _tally_union(parts: list[Callable[[], DataFrame]], max_examples: int) -> dict[str, Tally]:
    """The passes' anomaly rows (`explode_findings`: one schema), planned here and tallied as
    one DataFrame."""
    return tally(functools.reduce(DataFrame.unionByName, [part() for part in parts]), max_examples)


def _not_applicable(history: History, census: Census) -> dict[str, str]:
    """Checks that cannot be judged on this history, with why: never a PASS that cannot fail.
    Each check's spec names the evidence it needs; this says which evidence is missing."""
    capabilities = Capabilities.of_manifest(history.manifest)
    missing: dict[Evidence, str] = {}
    if not capabilities.transactions:
        missing[Evidence.TRANSACTIONS] = f"mode {history.mode} uses no transactions"
    if not capabilities.transaction_history:
        missing[Evidence.TRANSACTION_HISTORY] = (
            f"workload {history.manifest.get('workload')} writes no per-transaction history "
            f"({ABORTED_OFFSET_READ.name} judges its reads by offsets)"
        )
    if not census.indexed_reads:
        missing[Evidence.SEND_INDEX] = (
            "the output records name no place in their transaction (header "
            f"{HEADER_TXN_INDEX}): the run was recorded by an eoschaos that did not write it"
        )
    if not census.log_rows.get(TXN_STATE):
        missing[Evidence.COORDINATOR_STATES] = (
            "the history has no transaction states of the coordinators (writer "
            f"{LOG_BATCHES}): the run was recorded by an eoschaos that did not record them"
        )
    if not census.log_rows.get(LOG_BATCH):
        missing[Evidence.BATCH_HEADERS] = (
            f"the history has no batch headers of the run's partitions (writer {LOG_BATCHES}): "
            "the run was recorded by an eoschaos that did not record them"
        )
    if not census.log_rows.get(OFFSET_COMMIT):
        missing[Evidence.OFFSET_COMMITS] = (
            "the history has no offset commits of the group coordinators (writer "
            f"{LOG_BATCHES}, f {OFFSET_COMMIT}): the pipeline commits no offsets to a group, "
            "or the run predates them"
        )
    if not census.end_rows_of("aggregate"):
        missing[Evidence.AGGREGATE_ROWS] = "the pipeline keeps no aggregates (no aggregate rows)"
    if capabilities.output_is_copies:
        missing[Evidence.EXPECTED_OUTPUT] = "the run has no --expect function"
    else:
        missing[Evidence.OUTPUT_COPIES] = (
            "the output holds the results of an aggregation (--expect), not copies of input "
            f"records; {EXPECTED_OUTPUT.name} judges it"
        )
    if not census.has_final_committed:
        missing[Evidence.FINAL_SCAN] = "the history has no final-committed scan"
    if not census.end_rows_of("log-end"):
        missing[Evidence.END_STATE] = "the history has no end state (log-end rows)"
    if not census.end_rows_of("group-offset"):
        missing[Evidence.GROUP_OFFSETS] = "the end state has no group offsets"
    if not capabilities.failure_exits:
        missing[Evidence.FAILURE_EXITS] = (
            f"workload {history.manifest.get('workload')} declares no exit status with which "
            "its instances say they failed"
        )
    if history.manifest.get("max_lag") is None:
        missing[Evidence.LAG_BOUND] = (
            "the run set no bound on realtime lag (--max-lag): the lag is reported "
            "(stats.realtime_lag), not judged"
        )
    reasons = {name: first_missing(spec, missing) for name, spec in CATALOGUE.items()}
    return {name: reason for name, reason in reasons.items() if reason is not None}


def _stats(history: History, census: Census, txn_stats: dict[str, Any]) -> dict[str, Any]:
    """Record counts as the final scans saw them (informational: the checks judge ids)."""
    topics = history.topics

    def records(reader: str, names: tuple[str, ...]) -> int:
        return sum(census.records_of(reader, topic) for topic in names)

    figures = {
        "input_records": records(FINAL_COMMITTED, topics.inputs),
        "acked_sends": census.acked_sends,
        "output_committed": records(FINAL_COMMITTED, topics.written),
        "output_uncommitted": records(FINAL_UNCOMMITTED, topics.written),
        "transactions": txn_stats,
        "readers": census.records,
    }
    if topics.dead_letters:
        figures["dead_letters"] = _dead_letters(history, census)
    return figures


def _dead_letters(history: History, census: Census) -> dict[str, Any]:
    """Per dead-letter topic: its committed records and the first DEAD_LETTER_IDS ids among
    them, for the report to list (one job for every topic: a top-N per topic, which Spark
    limits per partition before it shuffles)."""
    topics = history.topics.dead_letters
    first = Window.partitionBy("topic").orderBy("id")
    rows = (
        history.kind("read")
        .filter(
            (F.col("process") == FINAL_COMMITTED)
            & F.col("topic").isin(*topics)
            & F.col("id").isNotNull()
        )
        .select("topic", "id", F.row_number().over(first).alias("n"))
        .filter(F.col("n") <= DEAD_LETTER_IDS)
        .collect()
    )
    ids: dict[str, list[int]] = {topic: [] for topic in topics}
    for row in sorted(rows, key=lambda row: row["n"]):
        ids[row["topic"]].append(row["id"])
    return {
        topic: {"records": census.records_of(FINAL_COMMITTED, topic), "ids": ids[topic]}
        for topic in topics
    }
