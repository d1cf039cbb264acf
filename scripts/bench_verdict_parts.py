"""Benchmark: where a warm verdict's time goes, its parts run one after another.

    .venv/bin/python scripts/bench_verdict_parts.py RUN_DIR [--top 30]

A verdict runs its parts side by side (checkers.spark.concurrently), which hides each part's
own cost. Here they run one after another, in one warm Spark session (two verdicts first, for
the JIT), and Python's profiler times the third: each eoschaos function's cumulative seconds,
most first. A part's seconds are its Spark jobs and its plan building (py4j calls block the
calling thread, so the profiler sees them). Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

from eoschaos.checkers import verdict
from eoschaos.checkers.spark import java_options_for, spark_session

WARM_UPS = 2


def one_after_another(spark, *calls):  # verdict.concurrently's signature, without the threads
    return [call() for call in calls]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    args = parser.parse_args()
    verdict.concurrently = one_after_another
    spark = spark_session(app="bench-verdict-parts", java_options=java_options_for(args.run_dir))
    for _ in range(WARM_UPS):
        verdict.check_run(spark, args.run_dir)
    profile = cProfile.Profile()
    started = time.monotonic()
    profile.enable()
    judged = verdict.check_run(spark, args.run_dir)
    profile.disable()
    seconds = time.monotonic() - started
    print(f"{args.run_dir}: {seconds:.2f} s one after another, {judged['checker']['jobs']} jobs")
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(r"eoschaos|/checkers/", args.top)
    spark.stop()


if __name__ == "__main__":
    main()
