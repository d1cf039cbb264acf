"""Benchmark: what the brokers' logs add to the checks of a large history, A against B.

    .venv/bin/python scripts/bench_broker_logs.py [--records 10000000] [--rounds 4]
        [--run-dir DIR]

Writes two correct synthetic histories of the same shape (scripts/bench_checkers.py's: 8 input
and 8 output partitions, 4 instances, 200-record transactions, one slot in five aborted first)
once each, in child processes, as Parquet: one without the brokers' logs and one with them
(RunShape.broker_logs: the output's batches and markers, the coordinators' records and the
offset commits of every attempt). Then judges both in one warm Spark session, alternating, for
`--rounds` rounds; the first (the JIT's warm-up) is left out of the medians. The log rows grow
with transactions and batches, not records, so the goal is a verdict within 10% of the one
without them. Every verdict must PASS with no anomaly, and the one with logs must pair every
client transaction with the coordinators' (stats.transactions.agreement) and disagree nowhere.
Numbers go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_checkers import shape

WITH, WITHOUT = "with logs", "without"


def write_history(run_dir: Path, records: int, broker_logs: bool) -> None:
    from dataclasses import replace

    from eoschaos.checkers.spark import spark_session
    from eoschaos.testing import generate

    spark = spark_session(app="eoschaos-bench-generate")
    started = time.monotonic()
    generate(spark, run_dir, replace(shape(records), broker_logs=broker_logs), seed=1, parquet=True)
    print(f"generated {run_dir.name} in {time.monotonic() - started:.1f}s", flush=True)
    spark.stop()


def require_correct(verdict: dict, label: str, attempts: int | None) -> None:
    """Every check PASSes; with logs, every attempt pairs with the coordinators'."""
    failing = {name: c["count"] for name, c in verdict["checks"].items() if c["verdict"] != "PASS"}
    agreement = verdict["stats"]["transactions"].get("agreement")
    problems = []
    if verdict["verdict"] != "PASS" or failing:
        problems.append(f"{verdict['verdict']} {failing}")
    if attempts is not None and (
        agreement is None or agreement["transactions"] != attempts or agreement["counts"]
    ):
        problems.append(f"agreement {agreement and {**agreement, 'disagreements': '...'}}")
    print(f"{label}: {'ok' if not problems else 'WRONG ' + '; '.join(problems)}", flush=True)
    if problems:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/eoschaos-bench-broker-logs"))
    parser.add_argument("--generate", choices=[WITH, WITHOUT], help=argparse.SUPPRESS)
    args = parser.parse_args()
    dirs = {
        mode: args.run_dir / f"records-{args.records}-{mode.split()[0]}" for mode in (WITH, WITHOUT)
    }
    if args.generate:
        write_history(dirs[args.generate], args.records, args.generate == WITH)
        return
    for mode, run_dir in dirs.items():
        if not (run_dir / "run.json").exists():
            command = [sys.executable, __file__, "--generate", mode]
            command += ["--records", str(args.records), "--run-dir", str(args.run_dir)]
            subprocess.run(command, check=True)

    from eoschaos.checkers.spark import spark_session
    from eoschaos.checkers.verdict import check_run

    spark = spark_session(app="bench-broker-logs")
    attempts = shape(args.records).attempts
    seconds: dict[str, list[float]] = {WITH: [], WITHOUT: []}
    for round_ in range(args.rounds):
        for mode, run_dir in dirs.items():
            started = time.monotonic()
            verdict = check_run(spark, run_dir, lineage=False)
            took = time.monotonic() - started
            label = f"round {round_} {mode}: {took:.2f} s, {verdict['checker']['events']:,} events"
            require_correct(verdict, label, attempts if mode == WITH else None)
            if round_:
                seconds[mode].append(took)
    spark.stop()
    with_, without = (statistics.median(seconds[mode]) for mode in (WITH, WITHOUT))
    print(
        f"median of rounds 1-{args.rounds - 1}: {WITH} {with_:.2f} s, {WITHOUT} {without:.2f} s,"
        f" {with_ / without:.3f}x (goal <= 1.10x)"
    )


if __name__ == "__main__":
    main()
