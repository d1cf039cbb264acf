"""Benchmark: what naming each anomaly's transactions from the brokers' logs adds to the
lineage drawings of a failing run, against the same drawings without the logs' table, in the
same Spark session.

    .venv/bin/python scripts/bench_log_lineage.py RUN_DIR... [--rounds 4]

Each RUN_DIR must hold a verdict.json (its failing checks' examples are drawn) and the brokers'
logs. The logs' transaction table is built and cached once per run dir, as the verdict does
for its checks; each round then draws every run dir's anomalies with and without it,
alternating, and the first round (the JIT's warm-up) is left out of the medians. A passing run
draws nothing and pays nothing. Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from eoschaos.checkers.history_io import load_history
from eoschaos.checkers.lineage.subgraphs import anomaly_subgraphs
from eoschaos.checkers.log_transactions import offset_commits, producer_rows, transaction_table
from eoschaos.checkers.spark import spark_session
from eoschaos.contract.checks import results_of
from eoschaos.contract.history import LOG_BATCH_KIND

MAX_ANOMALIES = 12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    spark = spark_session(app="bench-log-lineage")
    runs = []
    for run_dir in args.run_dirs:
        history = load_history(spark, run_dir)
        checks = results_of(json.loads((run_dir / "verdict.json").read_text()))
        log = history.kind(LOG_BATCH_KIND)
        topics = history.topics
        rows = producer_rows(log, offset_commits(log), topics.inputs, topics.written)
        table = transaction_table(rows, topics.all).cache()
        print(f"{run_dir.name}: {table.count()} transactions in the logs' table")
        runs.append((history, checks, table))
    seconds: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(args.rounds):
        for with_logs in (True, False):
            started = time.monotonic()
            drawn = 0
            for history, checks, table in runs:
                drawn += len(
                    anomaly_subgraphs(
                        history,
                        checks,
                        history.topics.inputs,
                        history.topics.written,
                        MAX_ANOMALIES,
                        table if with_logs else None,
                    )
                )
            total = time.monotonic() - started
            print(f"round {round_} {'with' if with_logs else 'without'}: {total:.2f} s, {drawn}")
            if round_:
                seconds[with_logs].append(total)
    with_, without = statistics.median(seconds[True]), statistics.median(seconds[False])
    print(
        f"median over {len(runs)} run dirs: with {with_:.2f} s, without {without:.2f} s, "
        f"+{with_ - without:.2f} s"
    )
    spark.stop()


if __name__ == "__main__":
    main()
