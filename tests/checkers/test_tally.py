"""Anomalies found on the driver (a grain collected whole) are tallied exactly as Spark tallies
the anomaly rows of a plan: the same counts, sub-counts and first examples in the same order."""

from __future__ import annotations

from pyspark.sql import functions as F

from eoschaos.checkers.findings import Found, explode_findings, finding, tally, tally_found

# check, order (None sorts first), sub, weight, example fields (None is left out)
ANOMALIES = [
    ("x", 3.0, "reader-a", 1, 7, "late"),
    ("x", None, "reader-b", 2, 1, None),
    ("x", 3.0, "reader-a", 5, 2, "tie"),
    ("x", -1.5, "", 1, 9, "first"),
    ("x", 8.0, "reader-b", 1, 4, "last"),
    ("y", 2.0, "", 3, 5, "only"),
]


def test_the_drivers_tally_equals_sparks_on_the_same_anomalies(spark):
    frame = spark.createDataFrame(
        ANOMALIES, "kind string, order double, sub string, weight long, a long, b string"
    )
    candidates = [
        finding(
            F.col("kind") == kind,
            f"check.{kind}",
            F.col("order"),
            F.col("sub"),
            F.col("weight"),
            a=F.col("a"),
            b=F.col("b"),
        )
        for kind in ("x", "y")
    ]
    found = [
        Found(f"check.{kind}", order, {"a": a, "b": b}, sub, weight)
        for kind, order, sub, weight, a, b in ANOMALIES
    ]
    for examples in (1, 3, 10):
        by_spark = tally(explode_findings(frame, *candidates), examples)
        assert tally_found(found, examples) == by_spark
