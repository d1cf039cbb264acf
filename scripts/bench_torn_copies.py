"""Benchmark: what the torn check's plan of consumed input and its copies adds to a verdict.

    .venv/bin/python scripts/bench_torn_copies.py RUN_DIR [RUN_DIR ...] [--rounds 4]

One Spark session judges each RUN_DIR once to warm up, then `--rounds` times with the plan
(eoschaos.checkers.outside_copies) and as many without it, alternating which goes first, so
both sides see the same machine; prints the median seconds of each and their difference.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from eoschaos.checkers import verdict
from eoschaos.checkers.spark import spark_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    spark = spark_session(app="eoschaos-bench-torn-copies")
    plan = verdict.outside_copies
    for run_dir in args.run_dirs:
        verdict.check_run(spark, run_dir, lineage=False)
        seconds: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.rounds):
            for with_plan in (True, False) if r % 2 == 0 else (False, True):
                verdict.outside_copies = plan if with_plan else (lambda *_: None)
                started = time.monotonic()
                verdict.check_run(spark, run_dir, lineage=False)
                seconds[with_plan].append(time.monotonic() - started)
        verdict.outside_copies = plan
        on, off = (statistics.median(seconds[side]) for side in (True, False))
        print(f"{run_dir}: with {on:.2f} s, without {off:.2f} s, +{on - off:.2f} s", flush=True)


if __name__ == "__main__":
    main()
