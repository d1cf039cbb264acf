"""The run over time, for the report: when faults hit and healed, throughput per second, and
one lane per process.

A reviewer reads a verdict next to what the pipeline was doing: sends acknowledged, commits
and downstream reads per second show where a fault stalled it, and the lanes show which
process did what when -- each instance incarnation's life and its transactions coloured by
outcome, the seeder's and readers' activity (Jepsen's timeline.html, one lane per process).
Events are aggregated in Spark; what is collected is one row per second of the run and one
row per lane and time bin (at most LANE_BINS bins, however long the run), never per event. The
transactions' bars come from the transaction table the verdict collected (a row per
transaction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from eoschaos.checkers.census import Census
from eoschaos.checkers.history_io import History
from eoschaos.contract.history import (
    CHECKPOINT_COMPLETE,
    CHECKPOINT_KIND,
    CHECKPOINT_RESTORE,
    CHECKPOINT_TRIGGER,
    FINAL_SCANS,
    INSTANCE_KIND,
)

LANE_BINS = 1500  # a lane's resolution: bins per run, so a 10-minute run costs what 1 does
# Bins per second, finest first: a bin nests in a second, so the lanes' one aggregation also
# gives the throughput per second (no job of its own) for runs up to LANE_BINS seconds.
BINS_PER_SECOND = (20, 10, 5, 4, 2, 1)
ACTIVITY_GAP_BINS = 4  # idle gaps shorter than this do not split a lane's activity
# A transaction's outcome as its bar shows it; a bin several touch shows the worst.
OUTCOMES = ("committed", "unknown", "aborted", "fenced")
# events about the instance they name
OWN_KINDS = (INSTANCE_KIND, "txn", "rebalance", CHECKPOINT_KIND)
SERIES = ("sends", "commits", "reads")


@dataclass(frozen=True)
class Bins:
    """The run's time cut into at most LANE_BINS bins, from its first event."""

    start: float
    end: float
    per_second: int | None  # None for a run longer than LANE_BINS seconds
    width: float

    @classmethod
    def of(cls, start: float, end: float) -> Bins:
        duration = end - start
        per_second = next((k for k in BINS_PER_SECOND if duration * k <= LANE_BINS), None)
        width = 1 / per_second if per_second else duration / LANE_BINS
        return cls(start, end, per_second, width)

    @property
    def last(self) -> int:
        return self.index(self.end)

    def index(self, time: float) -> int:
        elapsed = time - self.start
        return int(elapsed * self.per_second if self.per_second else elapsed // self.width)

    def _fraction(self, elapsed: Any) -> Any:
        """Bins since the start, unrounded: of a float, or of a Column."""
        return elapsed * self.per_second if self.per_second else elapsed / self.width

    def column(self, time: Column) -> Column:
        raw = F.floor(self._fraction(time - self.start))
        return F.least(F.greatest(raw, F.lit(0)), F.lit(self.last)).cast("int")

    def bin(self, time: float) -> int:
        """`column` of one time, on the driver."""
        return min(max(math.floor(self._fraction(time - self.start)), 0), self.last)

    def seconds(self, index: int) -> float:
        return round(index * self.width, 3)


def timeline(
    history: History, census: Census, txns: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """`txns`: the transaction table (checkers.transactions, collected), when the history has
    one."""
    start, end = census.start, census.end
    if start is None or end is None:
        return {"start": None, "end": None, "faults": [], "throughput": [], "lanes": []}
    bins = Bins.of(start, end)
    lanes, per_bin = _lanes(history, bins)
    if txns is not None:
        for lane, bars in _transaction_bars(txns, bins).items():
            lanes.setdefault(lane, _lane(lane, "instance")).update(transactions=bars)
    for lane, marks in checkpoint_marks(census.checkpoints, start).items():
        lanes.setdefault(lane, _lane(lane, "instance")).update(marks)
    return {
        "start": start,
        "end": end,
        "faults": _faults(census.faults, start),
        "throughput": _per_second(per_bin, bins)
        if bins.per_second
        else _throughput(history, start, end),
        "lane_bin_seconds": round(bins.width, 3),
        "lanes": sorted(lanes.values(), key=_lane_order),
    }


def _instance_lane() -> Column:
    """An instance's own events (its life, transactions, rebalances) by the incarnation they
    name; a read's instance names the record's writer, not the reader, so reads keep theirs."""
    named = F.col("instance").isNotNull() & F.col("incarnation").isNotNull()
    return F.when(
        F.col("kind").isin(*OWN_KINDS) & named,
        F.concat(F.lit("instance "), F.col("instance"), F.lit("."), F.col("incarnation")),
    )


def _series() -> dict[str, Column]:
    """What the throughput chart counts: acknowledged sends, commits, downstream reads."""
    ok = F.col("type") == "ok"
    return {
        "sends": (F.col("kind") == "send") & ok,
        "commits": (F.col("kind") == "txn") & F.col("f").isin("commit", "commit-offsets") & ok,
        "reads": (F.col("kind") == "read") & ~F.col("process").isin(*FINAL_SCANS),
    }


def _per_second(per_bin: dict[int, dict[str, int]], bins: Bins) -> list[dict[str, int]]:
    assert bins.per_second
    seconds = [dict.fromkeys(SERIES, 0) for _ in range(bins.last // bins.per_second + 1)]
    for index, counts in per_bin.items():
        row = seconds[index // bins.per_second]
        for name in SERIES:
            row[name] += counts[name]
    return [{"t": t, **row} for t, row in enumerate(seconds)]


def _lane(name: str, kind: str) -> dict[str, Any]:
    return {
        "lane": name,
        "kind": kind,
        "started": None,
        "exited": None,
        "activity": [],
        "transactions": [],
    }


def _lanes(history: History, bins: Bins) -> tuple[dict[str, dict], dict[int, dict[str, int]]]:
    """Per lane: when it was active (runs of busy bins), and an instance's start and exit; and
    per bin, the throughput series' counts -- all from one aggregation of the events."""
    instance_lane = _instance_lane()
    lifecycle = F.col("kind") == INSTANCE_KIND
    series = _series()
    rows = (
        history.events.select(
            F.coalesce(instance_lane, F.col("process")).alias("lane"),
            instance_lane.isNotNull().alias("is_instance"),
            bins.column(F.col("time")).alias("bin"),
            F.when(lifecycle & (F.col("f") == "start"), F.col("time")).alias("start"),
            F.when(lifecycle & (F.col("f") == "exit"), F.col("time")).alias("exit"),
            *[condition.alias(name) for name, condition in series.items()],
        )
        .groupBy("lane", "bin")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.max("is_instance").alias("is_instance"),
            F.min("start").alias("start"),
            F.max("exit").alias("exit"),
            *[F.count(F.when(F.col(name), 1)).alias(name) for name in series],
        )
        .collect()
    )
    lanes: dict[str, dict] = {}
    busy: dict[str, list[tuple[int, int]]] = {}
    per_bin: dict[int, dict[str, int]] = {}
    for row in rows:
        counts = per_bin.setdefault(row["bin"], dict.fromkeys(SERIES, 0))
        for name in SERIES:
            counts[name] += row[name]
        if row["lane"] is None:
            continue
        lane = lanes.setdefault(
            row["lane"], _lane(row["lane"], "instance" if row["is_instance"] else "process")
        )
        if row["start"] is not None:
            lane["started"] = _earliest(lane["started"], row["start"] - bins.start)
        if row["exit"] is not None:
            lane["exited"] = max(lane["exited"] or 0.0, row["exit"] - bins.start)
        busy.setdefault(row["lane"], []).append((row["bin"], row["events"]))
    for name, busy_bins in busy.items():
        lanes[name]["activity"] = [
            [bins.seconds(first), bins.seconds(last + 1), events]
            for first, last, events in _runs(sorted(busy_bins), ACTIVITY_GAP_BINS)
        ]
    return lanes, per_bin


def _earliest(current: float | None, candidate: float) -> float:
    return candidate if current is None else min(current, candidate)


def _runs(bins: list[tuple[int, int]], gap: int) -> list[tuple[int, int, int]]:
    """Sorted (bin, count) pairs as (first bin, last bin, total count) runs: bins at most
    `gap` apart join one run."""
    runs: list[tuple[int, int, int]] = []
    for index, count in bins:
        if runs and index - runs[-1][1] <= gap:
            first, _, total = runs[-1]
            runs[-1] = (first, index, total + count)
        else:
            runs.append((index, index, count))
    return runs


def _transaction_bars(txns: list[dict[str, Any]], bins: Bins) -> dict[str, list[list[Any]]]:
    """Per instance lane, its transactions (the table, collected) as bars [from, to, outcome,
    {outcome: transactions begun in the bar}]: each transaction covers the bins from its first
    to its last event, a bin shows the worst outcome among those covering it, and
    neighbouring bins of one outcome join one bar -- a run of committed transactions is one
    green bar, an abort among them stands out, and every transaction is counted once, under
    its own outcome."""
    per_lane: dict[str, dict[int, list[Any]]] = {}  # lane -> bin -> [severity, {outcome: n}]
    for txn in txns:
        if txn["txn_seq"] is None:
            continue
        if txn["committed_at"] is not None:
            level = 0
        elif (txn["rejected"] or 0) > 0:
            level = 3
        else:
            level = 2 if txn["aborted"] else 1
        lane = per_lane.setdefault(f"instance {txn['instance']}.{txn['incarnation']}", {})
        first = bins.bin(txn["began"])
        for index in range(first, bins.bin(txn["ended"]) + 1):
            touched = lane.setdefault(index, [level, {}])
            touched[0] = max(touched[0], level)
        begun = lane.setdefault(first, [level, {}])[1]
        begun[OUTCOMES[level]] = begun.get(OUTCOMES[level], 0) + 1
    bars: dict[str, list[list[Any]]] = {}
    for lane, touched in per_lane.items():
        merged: list[list[Any]] = []
        for index, (level, begun) in sorted(touched.items()):
            if merged and merged[-1][1] == index and merged[-1][2] == OUTCOMES[level]:
                merged[-1][1] = index + 1
                for outcome, count in begun.items():
                    merged[-1][3][outcome] = merged[-1][3].get(outcome, 0) + count
            else:
                merged.append([index, index + 1, OUTCOMES[level], dict(begun)])
        bars[lane] = [
            [bins.seconds(a), bins.seconds(b), o, {k: n[k] for k in OUTCOMES if n.get(k)}]
            for a, b, o, n in merged
        ]
    return bars


def checkpoint_marks(events: list[dict[str, Any]], start: float) -> dict[str, dict[str, Any]]:
    """Per JobManager lane, its checkpoints as [triggered, completed or None, number] (seconds
    into the run) and its restores as [at, number]: which checkpoint a restarted job came back
    from reads off the lane. `events`: the census' checkpoint events, in time order."""
    lanes: dict[str, dict[str, Any]] = {}
    for event in events:
        name = f"instance {event['instance']}.{event['incarnation']}"
        lane = lanes.setdefault(name, {"checkpoints": [], "restores": []})
        at, number = round(event["time"] - start, 3), event["count"]
        if event["f"] == CHECKPOINT_TRIGGER:
            lane["checkpoints"].append([at, None, number])
        elif event["f"] == CHECKPOINT_COMPLETE:
            pending = [c for c in lane["checkpoints"] if c[2] == number and c[1] is None]
            if pending:
                pending[-1][1] = at
            else:  # triggered before the log began: completed only
                lane["checkpoints"].append([at, at, number])
        elif event["f"] == CHECKPOINT_RESTORE:
            lane["restores"].append([at, number])
    return lanes


def _lane_order(lane: dict[str, Any]) -> tuple[int, str]:
    """Producers first, then instances by number and incarnation, then readers and the rest."""
    name = lane["lane"]
    if lane["kind"] == "instance":
        numbers = name.removeprefix("instance ").split(".")
        return (1, *(int(n) if n.isdigit() else 0 for n in numbers), "")
    return (0, 0, 0, name) if name == "seeder" else (2, 0, 0, name)


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
