"""Benchmark: warm verdicts of several runs in one Spark session, under three settings measured
in the same go: Spark's defaults (100 compiled classes of generated code kept, the verdict's
parts one after another), eoschaos' cache of compiled code (checkers.spark.CODEGEN_CACHE_ENTRIES),
and that with the parts side by side (checkers.spark.CONCURRENT_PARTS), as eoschaos judges.

    .venv/bin/python scripts/bench_warm_verdicts.py RUN_DIR [RUN_DIR ...]

Each setting gets a JVM of its own (the cache's size is fixed when Spark starts), judges every
RUN_DIR in the order given (Parquet already there, as `eoschaos check` finds it), then the
first again. The first verdict pays the JIT's warm-up and is left out of the total. Prints each
verdict's seconds and how many classes it compiled. Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

SPARK_DEFAULT_ENTRIES = 100


def judge_all(entries: int, parts: int, run_dirs: list[Path]) -> list[tuple[str, float, int]]:
    from eoschaos.checkers import spark as spark_settings
    from eoschaos.checkers.verdict import check_run

    spark_settings.CODEGEN_CACHE_ENTRIES, spark_settings.CONCURRENT_PARTS = entries, parts
    spark = spark_settings.spark_session(
        app="bench-warm-verdicts", java_options=spark_settings.java_options_for(run_dirs[0])
    )
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    rows = []
    for run_dir in [*run_dirs, run_dirs[0]]:
        before, started = metrics.METRIC_COMPILATION_TIME().getCount(), time.monotonic()
        check_run(spark, run_dir)
        compiled = metrics.METRIC_COMPILATION_TIME().getCount() - before
        rows.append((run_dir.name, time.monotonic() - started, compiled))
    spark.stop()
    return rows


def main() -> None:
    if sys.argv[1] == "--child":
        entries, parts = int(sys.argv[2]), int(sys.argv[3])
        print(json.dumps(judge_all(entries, parts, [Path(p) for p in sys.argv[4:]])))
        return
    from eoschaos.checkers.spark import CODEGEN_CACHE_ENTRIES, CONCURRENT_PARTS

    settings = [
        ("Spark's defaults", SPARK_DEFAULT_ENTRIES, 1),
        ("compiled code kept", CODEGEN_CACHE_ENTRIES, 1),
        ("compiled code kept, parts side by side", CODEGEN_CACHE_ENTRIES, CONCURRENT_PARTS),
    ]
    for name, entries, parts in settings:
        child = [sys.executable, __file__, "--child", str(entries), str(parts), *sys.argv[1:]]
        output = subprocess.run(child, capture_output=True, text=True, check=True).stdout
        rows = json.loads(output.splitlines()[-1])
        print(f"{name} ({entries} classes kept, {parts} parts at once):")
        for run, seconds, compiled in rows:
            print(f"  {run:40s} {seconds:6.2f} s  {compiled:4d} classes compiled")
        seconds, compiled = sum(row[1] for row in rows[1:]), sum(row[2] for row in rows[1:])
        print(f"  warm verdicts: {seconds:.1f} s, {compiled} classes compiled")


if __name__ == "__main__":
    main()
