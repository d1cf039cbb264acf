"""Offset lineage: which input became which transaction, output record and read.

A check's verdict is a claim about records; the lineage graph is the evidence a reviewer can
follow: input record → the transactions that consumed it → the output records they produced →
the readers that saw them, plus the offsets each transaction committed for the group. A history
can hold ten million records, so whole-history numbers are Spark aggregates, and only the
neighbourhood of each reported example is fetched (small filters, one job per table) and built
as a networkx graph.

The transaction dependency graph (Elle's ww and wr edges between committed transactions) is
information, never a verdict: Kafka does not promise serializable transactions across
partitions, so concurrent transactions interleaving on several partitions form ww cycles in a
correct run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoschaos.checkers.lineage.cycles import dependency_cycles
from eoschaos.checkers.lineage.stats import graph_stats
from eoschaos.checkers.lineage.subgraphs import anomaly_subgraphs

MAX_ANOMALIES = 12  # anomaly subgraphs per verdict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eoschaos.checkers.history_io import History
    from eoschaos.checkers.lineage.from_logs import PlainLog
    from eoschaos.contract.checks import CheckResult


def lineage_section(
    history: History,
    checks: dict[str, CheckResult],
    *,
    max_anomalies: int = MAX_ANOMALIES,
    whole: dict | None = None,
    log_txns: DataFrame | None = None,
    plain_log: PlainLog | None = None,
) -> dict:
    """The verdict's "lineage": whole-history graph stats, anomaly subgraphs, G0/G1c cycles.
    `whole`: history_lineage(history), when the caller computed it already; `log_txns`: the
    logs' transaction table, which names the transactions around each anomaly for any
    pipeline; `plain_log`: without one, the logs of a pipeline without transactions
    (eoschaos.checkers.lineage.from_logs)."""
    whole = whole if whole is not None else history_lineage(history)
    topics = history.topics
    # The logs' words place a record by partition and offset alone: one topic per role
    logs = topics.one_each
    anomalies = anomaly_subgraphs(
        history,
        checks,
        topics.inputs,
        topics.written,
        max_anomalies,
        log_txns if logs else None,
        plain_log if logs else None,
    )
    return {"stats": whole["stats"], "anomalies": anomalies, "cycles": whole["cycles"]}


def history_lineage(history: History) -> dict:
    """The parts that need no verdict (graph stats and cycles): a verdict computes them while
    its checks run."""
    topics = history.topics
    return {
        "stats": graph_stats(history, topics.inputs, topics.written),
        "cycles": dependency_cycles(history, topics.inputs, topics.written),
    }
