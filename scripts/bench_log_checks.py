"""Benchmark: what judging transactions from the brokers' logs adds to a verdict (the log
transaction table, every check of its pass: torn transactions, older-epoch commits, hanging
transactions, uncommitted offset reads; and the client/log agreement), against the same
verdict without them, in the same Spark session.

    .venv/bin/python scripts/bench_log_checks.py RUN_DIR... [--rounds 4]

Each round judges every RUN_DIR twice, with and without, alternating, so a noisy machine
slows both alike; the first round (the JIT's warm-up) is left out of the medians. "Without"
lists the pass's checks as not applicable, which leaves the verdict's pass over the logs out, as
a run recorded before the logs were would. Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from eoschaos.checkers import verdict
from eoschaos.checkers.spark import spark_session
from eoschaos.contract.checks import Pass, needing_pass

WITH, WITHOUT = "with", "without"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    spark = spark_session(app="bench-log-checks")
    judged = verdict._not_applicable
    left_out = needing_pass(Pass.LOG_TRANSACTIONS)

    def without_logs(history, census):
        return judged(history, census) | dict.fromkeys(left_out, "left out by the benchmark")

    seconds: dict[str, list[float]] = {WITH: [], WITHOUT: []}
    for round_ in range(args.rounds):
        for mode, rule in ((WITH, judged), (WITHOUT, without_logs)):
            verdict._not_applicable = rule
            total = 0.0
            for run_dir in args.run_dirs:
                started = time.monotonic()
                verdict.check_run(spark, run_dir, lineage=False)
                total += time.monotonic() - started
            print(f"round {round_} {mode}: {total:.2f} s")
            if round_:
                seconds[mode].append(total)
    verdict._not_applicable = judged
    with_, without = (statistics.median(seconds[m]) for m in (WITH, WITHOUT))
    print(
        f"median over {len(args.run_dirs)} run dirs: with {with_:.2f} s, without {without:.2f} s, "
        f"+{with_ - without:.2f} s ({with_ / without:.2f}x)"
    )
    spark.stop()


if __name__ == "__main__":
    main()
