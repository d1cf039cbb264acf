"""Benchmark: what judging transactions from the brokers' logs adds to a verdict (the log
transaction table, every check of its pass: torn transactions, older-epoch commits, hanging
transactions, uncommitted offset reads; and the client/log agreement), against the same
verdict without them, in the same Spark session.

    .venv/bin/python scripts/bench_log_checks.py RUN_DIR... [--rounds 4]

Each round judges every RUN_DIR twice, with and without, alternating, so a noisy machine
slows both alike; the first round (the JIT's warm-up) is left out of the medians. "Without"
lists the pass's checks as not applicable, which leaves the verdict's pass over the logs out, as
a run recorded before the logs were would. A third mode, "per id", keeps the pass and the
agreement per transactional id but leaves out the agreement per transaction (one more plan
over the reference scan's reads), to show what that grain costs on its own. Numbers go to
docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from eoschaos.checkers import agreement, verdict
from eoschaos.checkers.spark import spark_session
from eoschaos.contract.checks import Pass, needing_pass

WITH, PER_ID, WITHOUT = "with", "per id", "without"


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

    per_transaction = agreement._by_transaction
    modes = {
        WITH: (judged, per_transaction),
        PER_ID: (judged, lambda *_args: {}),
        WITHOUT: (without_logs, per_transaction),
    }
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    for round_ in range(args.rounds):
        for mode, (rule, by_transaction) in modes.items():
            verdict._not_applicable = rule
            agreement._by_transaction = by_transaction
            total = 0.0
            for run_dir in args.run_dirs:
                started = time.monotonic()
                verdict.check_run(spark, run_dir, lineage=False)
                total += time.monotonic() - started
            print(f"round {round_} {mode}: {total:.2f} s")
            if round_:
                seconds[mode].append(total)
    verdict._not_applicable = judged
    agreement._by_transaction = per_transaction
    with_, per_id, without = (statistics.median(seconds[m]) for m in modes)
    print(
        f"median over {len(args.run_dirs)} run dirs: with {with_:.2f} s, per id {per_id:.2f} s, "
        f"without {without:.2f} s: the pass +{with_ - without:.2f} s ({with_ / without:.2f}x), "
        f"of which the agreement per transaction +{with_ - per_id:.2f} s"
    )
    spark.stop()


if __name__ == "__main__":
    main()
