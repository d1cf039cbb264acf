"""The run over time, for the report: when faults hit and healed, and throughput per second.

A reviewer reads a verdict next to what the pipeline was doing: sends acknowledged, commits
and downstream reads per second show where a fault stalled it. Everything is aggregated in
Spark; what is collected is one row per second of the run (fault events come from the census).
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.census import Census
from eoschaos.checkers.history_io import History
from eoschaos.contract.history import FINAL_SCANS


def timeline(history: History, census: Census) -> dict[str, Any]:
    start, end = census.start, census.end
    if start is None or end is None:
        return {"start": None, "end": None, "faults": [], "throughput": []}
    return {
        "start": start,
        "end": end,
        "faults": _faults(census.faults, start),
        "throughput": _throughput(history, start, end),
    }


def _faults(rows: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """Pair each fault's invoke with the next ok (healed) or fail (not applied) of the same
    fault and target; a fault never healed keeps end null. The closing event's params win:
    they add what was learned while the fault held (a zombie caught mid-transaction, a twin's
    name)."""
    faults: list[dict[str, Any]] = []
    pending: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["f"], row["target"])
        if row["type"] == "invoke":
            fault = {
                "f": row["f"],
                "target": row["target"],
                "params": row["params"],
                "start": row["time"] - start,
                "end": None,
            }
            faults.append(fault)
            pending.setdefault(key, []).append(fault)
        elif pending.get(key):
            fault = pending[key].pop(0)
            fault["end"] = row["time"] - start
            fault["params"] = row["params"] or fault["params"]
            if row["type"] == "fail":
                fault["error"] = row["error"]
    return faults


def _throughput(history: History, start: float, end: float) -> list[dict[str, int]]:
    sends = history.kind("send").filter(F.col("type") == "ok").select("time", F.lit("sends"))
    commits = (
        history.kind("txn")
        .filter(F.col("f").isin("commit", "commit-offsets") & (F.col("type") == "ok"))
        .select("time", F.lit("commits"))
    )
    reads = (
        history.kind("read")
        .filter(~F.col("process").isin(*FINAL_SCANS))
        .select("time", F.lit("reads"))
    )
    events = (
        sends.toDF("time", "what")
        .union(commits.toDF("time", "what"))
        .union(reads.toDF("time", "what"))
    )
    rows = (
        events.groupBy(F.floor(F.col("time") - start).alias("t"))
        .agg(
            *[
                F.count(F.when(F.col("what") == w, 1)).alias(w)
                for w in ("sends", "commits", "reads")
            ]
        )
        .collect()
    )
    per_second = {row["t"]: row for row in rows}
    seconds = range(math.floor(end - start) + 1)
    return [
        {
            "t": t,
            **{
                w: per_second[t][w] if t in per_second else 0 for w in ("sends", "commits", "reads")
            },
        }
        for t in seconds
    ]
