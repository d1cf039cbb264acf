"""Aggregates: a stateful pipeline's final per-key results equal those computed from its input.

Two checks. `aggregate.mismatch` recomputes the built-in aggregates (Streams). For a pipeline
that aggregates its own way, `aggregate.expected-output` compares the `end` rows the harness
recorded with the user's `--expect` function: f=`expected` (the function on the committed
input) and f=`result` (the output's last committed value per key), params {"key", "value"}
as canonical text. Both are one row per key, already in the census.

A Streams app that re-keys the input and keeps count, sum, min and max per key in a state store
can lose or double updates without a single output record being duplicated: a replayed input
counted twice changes a number, not a record. So its final aggregates (the last committed value
per key, which the harness records as `end` rows f=`aggregate`) are compared with the same
aggregates computed here from the final committed input scan: one small grouped pass, one row
per key reaching the driver.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.census import Census
from eoschaos.checkers.findings import Tally
from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import AGGREGATE_MISMATCH, EXPECTED_OUTPUT
from eoschaos.contract.history import FINAL_COMMITTED

FIELDS = ("count", "sum", "min", "max")


def aggregate_rows(census: Census) -> list[dict[str, Any]]:
    """The recorded final aggregates: {"key", "buckets", "value": {count, sum, min, max}}."""
    return [json.loads(row["params"]) for row in census.end_rows_of("aggregate")]


def aggregate_tallies(history: History, census: Census, max_examples: int) -> dict[str, Tally]:
    recorded = aggregate_rows(census)
    buckets = {row["buckets"] for row in recorded}
    if len(buckets) != 1:
        raise ValueError(f"aggregate rows disagree on the number of keys: {sorted(buckets)}")
    (bucket_count,) = buckets
    expected = {
        str(row["key"]): {name: row[name] for name in FIELDS}
        for row in history.kind("read")
        .filter((F.col("process") == FINAL_COMMITTED) & F.col("topic").isin(*history.topics.inputs))
        .groupBy((F.col("id") % bucket_count).alias("key"))
        .agg(
            F.count("id").alias("count"),
            F.sum("id").alias("sum"),
            F.min("id").alias("min"),
            F.max("id").alias("max"),
        )
        .collect()
    }
    actual = {str(row["key"]): row["value"] for row in recorded}
    anomalies = []
    for key in sorted(set(expected) | set(actual), key=lambda k: (len(k), k)):
        want, got = expected.get(key), actual.get(key)
        if want is None or got is None or any(got.get(f) != want[f] for f in FIELDS):
            anomalies.append({"key": key, "expected": want, "actual": got})
    return {AGGREGATE_MISMATCH.name: Tally(count=len(anomalies), examples=anomalies[:max_examples])}


def expected_output_tallies(census: Census, max_examples: int) -> dict[str, Tally]:
    def by_key(f: str) -> dict[str, str]:
        rows = (json.loads(row["params"]) for row in census.end_rows_of(f))
        return {row["key"]: row["value"] for row in rows}

    expected, actual = by_key("expected"), by_key("result")
    anomalies = [
        {"key": key, "expected": expected.get(key), "actual": actual.get(key)}
        for key in sorted(set(expected) | set(actual))
        if expected.get(key) != actual.get(key)
    ]
    tally = Tally(count=len(anomalies), examples=anomalies[:max_examples])
    return {EXPECTED_OUTPUT.name: tally}
