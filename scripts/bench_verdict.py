"""Benchmark: the warm verdict of a real run directory (what each cell of a matrix pays after
its recording), against the floor of its first phase: the same JSON lines written to Parquet
with no checks at all.

    .venv/bin/python scripts/bench_verdict.py RUN_DIR [--rounds 4]

Each round judges a fresh copy of RUN_DIR (its Parquet, verdict and report removed) in one
Spark session, as `eoschaos matrix` does; the first round also pays the JIT's warm-up. Prints
one line per round (compaction, checks, report, and the floor) and the medians of the others.
Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from eoschaos.checkers.history_io import compact_history, event_schema
from eoschaos.checkers.spark import java_options_for, spark_session
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.history import SCHEMA_DDL
from eoschaos.contract.rundir import HISTORY_DIR, PARQUET_DIR, REPORT_FILE, VERDICT_FILE
from eoschaos.reports.html import write_report


def fresh_copy(run_dir: Path, work: Path, round_: int) -> Path:
    copy = work / f"round-{round_}"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns(PARQUET_DIR, "cluster"))
    for name in (VERDICT_FILE, REPORT_FILE):
        (copy / name).unlink(missing_ok=True)
    return copy


def compaction_floor(spark, run_dir: Path, out: Path) -> None:
    """The floor of compaction: RUN_DIR's JSON lines parsed and written as Parquet by kind,
    nothing else."""
    files = [str(f) for f in sorted((run_dir / HISTORY_DIR).glob("*.jsonl"))]
    (
        spark.read.schema(SCHEMA_DDL)
        .json(files)
        .select(*event_schema().fieldNames())
        .write.mode("overwrite")
        .partitionBy("kind")
        .parquet(str(out))
    )


def timed(call) -> tuple[float, object]:
    started = time.monotonic()
    value = call()
    return time.monotonic() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    spark = spark_session(None, java_options=java_options_for(args.run_dir))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-verdict-") as work:
        for round_ in range(args.rounds):
            run_dir = fresh_copy(args.run_dir, Path(work), round_)
            compaction, _ = timed(lambda d=run_dir: compact_history(spark, d))
            checks, verdict = timed(lambda d=run_dir: check_run(spark, d))
            report, _ = timed(lambda d=run_dir, v=verdict: write_report(v, d / REPORT_FILE))
            floor, _ = timed(lambda d=run_dir: compaction_floor(spark, d, d / "floor.parquet"))
            row = {
                "compaction": compaction,
                "checks": checks,
                "report": report,
                "verdict": compaction + checks + report,
                "floor_json_to_parquet": floor,
            }
            rows.append(row)
            print(
                f"round {round_}: "
                + ", ".join(f"{k} {v:.2f} s" for k, v in row.items())
                + f" ({verdict['checker']['events']} events, {verdict['verdict']})",
                flush=True,
            )
    warm = rows[1:] or rows
    print(
        "median of the warm rounds: "
        + ", ".join(f"{k} {statistics.median(r[k] for r in warm):.2f} s" for k in warm[0])
    )
    spark.stop()


if __name__ == "__main__":
    main()
