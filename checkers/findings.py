"""From anomaly rows to check results: exact counts plus a few concrete records, one action a pass.

Each check plan marks the rows that violate it with `finding(...)`; `explode_findings` turns
those marks into one row per anomaly (check name, sub-count key, sort key, example as JSON), so
the checks of one pass union into one DataFrame. `tally` then collects only
the first few examples per check and one carrier row per sub-count: whatever the history's
size, what reaches the driver is bounded by checks x (examples + sub-counts).

A grain small enough to collect whole (one row per transaction: thousands) is judged on the
driver instead: each check over it yields `Found` anomalies and `tally_found` counts them as
`tally` does, ordered alike, with no plan to build, optimise and schedule per check.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.contract.checks import CheckResult, CheckSpec


@dataclass(frozen=True)
class Candidate:
    """Where `condition` holds, the row is an anomaly described by `value`."""

    condition: Column
    value: Column


def finding(
    condition: Column,
    check: str,
    order: Column,
    sub: Column | str = "",
    weight: Column | int = 1,
    **example: Column,
) -> Candidate:
    """Anomalies of `check` where `condition` holds: `weight` of them (a row can stand for
    several, e.g. every read of one transaction), `order` ranks the examples, `sub` splits the
    count (e.g. by reader), `example` is what the report shows."""
    sub_column = F.lit(sub) if isinstance(sub, str) else sub
    weight_column = F.lit(weight) if isinstance(weight, int) else weight
    return Candidate(
        condition,
        F.struct(
            F.lit(check).alias("check"),
            sub_column.cast("string").alias("sub"),
            weight_column.cast("long").alias("weight"),
            order.cast("double").alias("order"),
            F.to_json(F.struct(*[value.alias(key) for key, value in example.items()])).alias(
                "example"
            ),
        ),
    )


def explode_findings(df: DataFrame, *candidates: Candidate) -> DataFrame:
    """One row per anomaly found among `candidates` in each row of df. Rows without any are
    filtered out first, so the per-row array is built only for the (few) anomalous rows."""
    anomalous = functools.reduce(operator.or_, [c.condition for c in candidates])
    values = [F.when(c.condition, c.value) for c in candidates]
    return (
        df.filter(anomalous)
        .select(F.explode(F.array_compact(F.array(*values))).alias("a"))
        .select("a.*")
    )


@dataclass
class Tally:
    count: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)


def tally(findings: DataFrame, max_examples: int) -> dict[str, Tally]:
    """Check name -> its count, sub-counts and first examples (by `order`), in one collect."""
    by_check = Window.partitionBy("check").orderBy("order", "example")
    by_sub = Window.partitionBy("check", "sub")
    rows = (
        findings.withColumn("rank", F.row_number().over(by_check))
        .withColumn("sub_count", F.sum("weight").over(by_sub))
        .withColumn("sub_rank", F.row_number().over(by_sub.orderBy("order", "example")))
        .filter((F.col("rank") <= max_examples) | (F.col("sub_rank") == 1))
        .collect()
    )
    tallies: dict[str, Tally] = {}
    for row in sorted(rows, key=lambda r: r["rank"]):
        entry = tallies.setdefault(row["check"], Tally())
        if row["sub_rank"] == 1:
            entry.count += row["sub_count"]
            if row["sub"]:
                entry.counts[row["sub"]] = row["sub_count"]
        if row["rank"] <= max_examples:
            entry.examples.append(json.loads(row["example"]))
    return tallies


@dataclass(frozen=True)
class Found:
    """One anomaly found on the driver: `finding`'s fields for a row already collected."""

    check: str
    order: float | None
    example: dict[str, Any]
    sub: str = ""
    weight: int = 1


def tally_found(found: Iterable[Found], max_examples: int) -> dict[str, Tally]:
    """`tally` of anomalies found on the driver: the same counts, sub-counts and first
    examples, ranked as Spark ranks them (by order, nulls first, then the example's JSON)."""
    ranked: dict[str, list[tuple[tuple[bool, float, str], dict[str, Any]]]] = {}
    tallies: dict[str, Tally] = {}
    for anomaly in found:
        entry = tallies.setdefault(anomaly.check, Tally())
        entry.count += anomaly.weight
        if anomaly.sub:
            entry.counts[anomaly.sub] = entry.counts.get(anomaly.sub, 0) + anomaly.weight
        example = without_nulls(anomaly.example)
        text = json.dumps(example, separators=(",", ":"))
        key = (anomaly.order is not None, anomaly.order or 0.0, text)
        ranked.setdefault(anomaly.check, []).append((key, example))
    for check, examples in ranked.items():
        examples.sort(key=lambda pair: pair[0])
        tallies[check].examples = [example for _, example in examples[:max_examples]]
    return tallies


def without_nulls(value: Any) -> Any:
    """An example as Spark's to_json writes it, which leaves out a struct's null fields."""
    if isinstance(value, dict):
        return {key: without_nulls(v) for key, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def result(spec: CheckSpec, found: Tally | None) -> CheckResult:
    """The verdict entry of one check: FAIL exactly when it found an anomaly."""
    found = found or Tally()
    return CheckResult(
        verdict="FAIL" if found.count else "PASS",
        count=found.count,
        description=spec.meaning,
        counts=dict(found.counts),
        examples=found.examples,
        evidence=list(spec.sources),
        jepsen={j.name: j.count(found.count, found.counts) for j in spec.jepsen},
    )
