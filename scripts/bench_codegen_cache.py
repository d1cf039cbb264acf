"""Benchmark: warm verdicts of several runs in one Spark session, with Spark's default cache of
compiled generated code (100 classes) and with eoschaos' (checkers.spark.CODEGEN_CACHE_ENTRIES).

    .venv/bin/python scripts/bench_codegen_cache.py RUN_DIR [RUN_DIR ...]

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


def judge_all(entries: int, run_dirs: list[Path]) -> list[tuple[str, float, int]]:
    from eoschaos.checkers import spark as spark_settings
    from eoschaos.checkers.verdict import check_run

    spark_settings.CODEGEN_CACHE_ENTRIES = entries
    spark = spark_settings.spark_session(
        app="bench-codegen", java_options=spark_settings.java_options_for(run_dirs[0])
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
        print(json.dumps(judge_all(int(sys.argv[2]), [Path(p) for p in sys.argv[3:]])))
        return
    from eoschaos.checkers.spark import CODEGEN_CACHE_ENTRIES

    for entries in (SPARK_DEFAULT_ENTRIES, CODEGEN_CACHE_ENTRIES):
        child = [sys.executable, __file__, "--child", str(entries), *sys.argv[1:]]
        output = subprocess.run(child, capture_output=True, text=True, check=True).stdout
        rows = json.loads(output.splitlines()[-1])
        print(f"codegen cache {entries} entries:")
        for name, seconds, compiled in rows:
            print(f"  {name:40s} {seconds:6.2f} s  {compiled:4d} classes compiled")
        seconds, compiled = sum(row[1] for row in rows[1:]), sum(row[2] for row in rows[1:])
        print(f"  warm verdicts: {seconds:.1f} s, {compiled} classes compiled")


if __name__ == "__main__":
    main()
