"""Benchmark: what a warm verdict costs per run directory -- its seconds and its Spark jobs.

    .venv/bin/python scripts/bench_verdict_jobs.py RUN_DIR [RUN_DIR ...] [--rounds 3] [--duckdb]

One Spark session judges every RUN_DIR once to warm up (JIT, compiled plans), then `--rounds`
times more; prints each run's jobs (verdict.json's `checker.jobs`) and the median and every
round's seconds, then the sum of the medians. For a before/after in one sitting, run it again
with PYTHONPATH pointing at another install of eoschaos (`pip install --no-deps --target DIR
OLD_CHECKOUT`): the same runs, the same machine, one after the other. Numbers go to
docs/benchmarks.md by hand.

The warm-up verdicts are printed too, each with the classes of generated code it compiled and
about how long that took: in a fresh JVM (the first RUN_DIR's), most of what a cold verdict
costs beyond a warm one.

--duckdb adds the peer of scripts/bench_checkers.py, measured after the verdicts on the same
Parquet: four core checks (lost, duplicate, aborted read, order) in DuckDB (`pip install -e
'.[bench]'`), a warm-up and then `--rounds` times, and the ratio of the verdict's median to
its median. The verdict judges every check and the lineage; DuckDB these four: the ratio
says how far the whole verdict is from an in-process engine's core checks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from bench_checkers import duckdb_core

from eoschaos.checkers.spark import java_options_for, spark_session
from eoschaos.checkers.verdict import check_run


def compiled(spark) -> tuple[int, float]:
    """Classes of generated code Spark compiled so far in this JVM, and about how many seconds
    that took (its compile-time histogram's mean times its count: the histogram keeps a
    sample). A session's first verdict compiles every plan's code; later ones reuse it."""
    histogram = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    count = histogram.getCount()
    return count, histogram.getSnapshot().getMean() * count / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duckdb", action="store_true", help="add the DuckDB peer and ratio")
    args = parser.parse_args()
    spark = spark_session(app="bench-verdict-jobs", java_options=java_options_for(args.run_dirs[0]))
    for run_dir in args.run_dirs:
        classes_before, compiling_before = compiled(spark)
        started = time.monotonic()
        check_run(spark, run_dir)
        classes, compiling = compiled(spark)
        classes, compiling = classes - classes_before, compiling - compiling_before
        print(
            f"{run_dir}: warm-up verdict {time.monotonic() - started:.2f} s, {classes} classes of"
            f" generated code compiled, ~{compiling:.1f} s compiling them"
        )
    seconds: dict[Path, list[float]] = {run_dir: [] for run_dir in args.run_dirs}
    jobs: dict[Path, int] = {}
    counts: dict[Path, dict[str, int]] = {}
    for _ in range(args.rounds):
        for run_dir in args.run_dirs:
            started = time.monotonic()
            verdict = check_run(spark, run_dir)
            seconds[run_dir].append(time.monotonic() - started)
            jobs[run_dir] = verdict["checker"]["jobs"]
            counts[run_dir] = {name: check["count"] for name, check in verdict["checks"].items()}
    total = 0.0
    for run_dir, rounds in seconds.items():
        median = statistics.median(rounds)
        total += median
        each = " ".join(f"{s:.2f}" for s in rounds)
        print(f"{run_dir}: {jobs[run_dir]} jobs, median {median:.2f} s (rounds: {each})")
    print(f"sum of medians: {total:.2f} s")
    spark.stop()
    if args.duckdb:
        for run_dir, rounds in seconds.items():
            duckdb_core(run_dir, threads=os.cpu_count() or 2)  # warm-up
            peer = [duckdb_core(run_dir, threads=os.cpu_count() or 2) for _ in range(args.rounds)]
            peer_seconds = [spent for spent, _ in peer]
            wrong = {
                check: found
                for check, found in peer[-1][1].items()
                if found != counts[run_dir].get(check, 0)
            }
            each = " ".join(f"{spent:.3f}" for spent in peer_seconds)
            peer_median = statistics.median(peer_seconds)
            ratio = statistics.median(rounds) / peer_median
            print(
                f"{run_dir}: DuckDB's four core checks, median {peer_median:.3f} s"
                f" (rounds: {each}); the verdict takes {ratio:.0f}x as long"
                + (f"; COUNTS DIFFER from the verdict's: {wrong}" if wrong else "; counts match")
            )


if __name__ == "__main__":
    main()
