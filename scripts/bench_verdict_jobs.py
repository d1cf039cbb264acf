"""Benchmark: what a warm verdict costs per run directory -- its seconds and its Spark jobs.

    .venv/bin/python scripts/bench_verdict_jobs.py RUN_DIR [RUN_DIR ...] [--rounds 3]

One Spark session judges every RUN_DIR once to warm up (JIT, compiled plans), then `--rounds`
times more; prints each run's jobs (verdict.json's `checker.jobs`) and the median and every
round's seconds, then the sum of the medians. For a before/after in one sitting, run it again
with PYTHONPATH pointing at another install of eoschaos (`pip install --no-deps --target DIR
OLD_CHECKOUT`): the same runs, the same machine, one after the other. Numbers go to
docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from eoschaos.checkers.spark import java_options_for, spark_session
from eoschaos.checkers.verdict import check_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session(app="bench-verdict-jobs", java_options=java_options_for(args.run_dirs[0]))
    for run_dir in args.run_dirs:
        check_run(spark, run_dir)
    seconds: dict[Path, list[float]] = {run_dir: [] for run_dir in args.run_dirs}
    jobs: dict[Path, int] = {}
    for _ in range(args.rounds):
        for run_dir in args.run_dirs:
            started = time.monotonic()
            verdict = check_run(spark, run_dir)
            seconds[run_dir].append(time.monotonic() - started)
            jobs[run_dir] = verdict["checker"]["jobs"]
    total = 0.0
    for run_dir, rounds in seconds.items():
        median = statistics.median(rounds)
        total += median
        each = " ".join(f"{s:.2f}" for s in rounds)
        print(f"{run_dir}: {jobs[run_dir]} jobs, median {median:.2f} s (rounds: {each})")
    print(f"sum of medians: {total:.2f} s")
    spark.stop()


if __name__ == "__main__":
    main()
