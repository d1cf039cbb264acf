"""Benchmark: check_run over a synthetic 10M-record history with planted anomalies.

    .venv/bin/python scripts/bench_checkers.py [--records 10000000] [--runs 3]
        [--run-dir DIR] [--master local[*]]

Generates the history once (Parquet, in a child process so the checker's JVM starts clean and
its peak RSS is its own; reused when DIR already holds it), then times Spark's start and each
check_run separately, verifies the verdict reports exactly the planted anomalies, and prints
records/s. Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from eoschaos.checkers.synthetic import Plants, RunShape

PLANTS = Plants(
    lost=3,
    duplicate=3,
    phantom=3,
    duplicate_input=3,
    aborted_read=3,
    uncommitted_read=3,
    fractured_read=3,
    order_backwards=3,
    order_skip=3,
    inconsistent_offsets=3,
    zombie_write=3,
    open_transaction=3,
    lso_behind=3,
    group_offsets_behind=3,
)


def shape(records: int) -> RunShape:
    """8 input and 8 output partitions, 4 instances, 200-record transactions, 1 in 5 aborted."""
    return RunShape(
        records=records,
        partitions=8,
        output_partitions=8,
        instances=4,
        per_partition=25,
        abort_every=5,
        slot_seconds=0.002,
    )


def generate(run_dir: Path, records: int) -> None:
    from eoschaos.checkers.spark import spark_session
    from eoschaos.checkers.synthetic import write_synthetic

    spark = spark_session(app="eoschaos-bench-generate")
    started = time.monotonic()
    run = write_synthetic(spark, run_dir, shape(records), PLANTS, seed=1, parquet=True)
    (run_dir / "expected.json").write_text(json.dumps(run.expected, indent=2) + "\n")
    print(f"generated {records:,} records in {time.monotonic() - started:.1f}s", flush=True)
    spark.stop()


def peak_rss_mib(pid: int | str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench(run_dir: Path, records: int, runs: int, master: str | None) -> None:
    from eoschaos.checkers.spark import spark_session
    from eoschaos.checkers.verdict import check_run

    started = time.monotonic()
    spark = spark_session(master, app="eoschaos-bench")
    startup = time.monotonic() - started
    expected = json.loads((run_dir / "expected.json").read_text())
    times = []
    for n in range(runs):
        verdict = check_run(spark, run_dir)
        seconds = verdict["checker"]["seconds"]
        times.append(seconds)
        found = {k: c["count"] for k, c in verdict["checks"].items() if c["verdict"] == "FAIL"}
        status = "ok" if found == expected else f"MISMATCH {found} != {expected}"
        print(f"run {n + 1}: {seconds:.1f}s  {records / seconds:,.0f} records/s  {status}")
    conf = spark.sparkContext.getConf()
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    print(f"events: {verdict['checker']['events']:,}")
    print(f"spark startup: {startup:.1f}s")
    print(
        f"check_run median {statistics.median(times):.1f}s (min {min(times):.1f}s): "
        f"{records / statistics.median(times):,.0f} input records/s"
    )
    print(
        f"settings: master={spark.sparkContext.master} "
        f"driver.memory={conf.get('spark.driver.memory')} "
        f"shuffle.partitions={spark.conf.get('spark.sql.shuffle.partitions')} "
        f"adaptive={spark.conf.get('spark.sql.adaptive.enabled')}"
    )
    print(f"peak RSS: JVM {peak_rss_mib(jvm_pid):,.0f} MiB, Python {peak_rss_mib('self'):,.0f} MiB")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/eoschaos-bench-checkers"))
    parser.add_argument("--master", default=None)
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    run_dir = args.run_dir / f"records-{args.records}"
    if args.generate:
        generate(run_dir, args.records)
        return
    if not (run_dir / "expected.json").exists():
        command = [sys.executable, __file__, "--generate", "--records", str(args.records)]
        subprocess.run([*command, "--run-dir", str(args.run_dir)], check=True)
    bench(run_dir, args.records, args.runs, args.master)


if __name__ == "__main__":
    main()
