"""Benchmark: check_run over a synthetic 10M-record history with planted anomalies.

    .venv/bin/python scripts/bench_checkers.py [--records 10000000] [--runs 3]
        [--run-dir DIR] [--master local[*] | --standalone-workers N] [--json FILE]
        [--compaction] [--no-duckdb]

Generates the history once (Parquet, in a child process so the checker's JVM starts clean;
reused when DIR already holds it), then times Spark's start and each check_run separately,
verifies the verdict reports exactly the planted anomalies, and prints records/s (the checks;
once more with the lineage section, which the whole verdict includes) next to two
references measured in the same run, so a ratio survives a noisy machine:
- the floor on this engine: one Spark scan of every history column the checks read;
- the floor of the largest pass: the reads the per-offset checks need, shuffled by
  topic-partition and nothing else, printed next to the time the goal of 1M input records/s
  leaves for the whole check;
- a peer: four core checks (lost, duplicate, aborted read, order) in DuckDB over the same
  Parquet (a dev-only dependency, never used by the product), whose counts must match.
--standalone-workers N starts a real Spark standalone cluster on loopback (N workers of one
core each, tests/spark_standalone.py) and checks on it. Peak RSS is the whole process tree's
(driver JVM, cluster and executors included), sampled. Numbers go to docs/benchmarks.md.

--compaction starts where a real run does: the same history as one JSON-lines file per writer
(exported from the Parquet once, untimed, and reused). It times compact_history, and next to
it the floor of that phase: the JSON parsed and written as Parquet with nothing else. The
checks then judge the compacted history, so their planted counts vouch for the compaction.
--runs 0 times only the whole verdict (with lineage), for histories where each pass is long.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import unquote

from pyspark.sql import functions as F

from eoschaos.contract.checks import ABORTED_READ, DUPLICATE, LOST, ORDER
from eoschaos.testing import Plants, RunShape

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' standalone cluster and /proc readers

from listening import descendants  # noqa: E402 (after the path insert)

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
    stale_commit=3,
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


def write_history(run_dir: Path, records: int) -> None:
    from eoschaos.checkers.spark import spark_session
    from eoschaos.testing import generate

    spark = spark_session(app="eoschaos-bench-generate")
    started = time.monotonic()
    run = generate(spark, run_dir, shape(records), PLANTS, seed=1, parquet=True)
    (run_dir / "expected.json").write_text(json.dumps(run.expected, indent=2) + "\n")
    print(f"generated {records:,} records in {time.monotonic() - started:.1f}s", flush=True)
    spark.stop()


class TreeRss:
    """Peak resident memory of this process and every process below it, sampled: the driver
    JVM, the Spark standalone cluster and its executors are all children (/usr/bin/time sees
    only the Python process)."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(every_s,), daemon=True)
        self._thread.start()

    def _sample(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            tree = [os.getpid(), *descendants(os.getpid())]
            self.peak_mib = max(self.peak_mib, sum(_rss_kib(pid) for pid in tree) / 1024)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mib


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def scan_floor(spark, run_dir: Path) -> float:
    """One Spark pass reading every history column the checks read, writing nothing."""
    from eoschaos.checkers.history_io import event_schema
    from eoschaos.contract.rundir import PARQUET_DIR

    started = time.monotonic()
    events = spark.read.parquet(str(run_dir / PARQUET_DIR))
    events.select(*event_schema().fieldNames()).write.format("noop").mode("overwrite").save()
    return time.monotonic() - started


def exchange_floor(spark, run_dir: Path, readers: list[str]) -> float:
    """The floor of the per-offset pass (order, inconsistent offsets, skips, aborted offsets),
    which needs each topic-partition's reads by every reader together: those reads, packed as
    the pass packs them, shuffled by topic-partition, nothing else (no sort, no check).
    `readers`: the census's, as the verdict's stats list them."""
    from eoschaos.checkers.history_io import load_history
    from eoschaos.checkers.isolation import offset_reads

    history = load_history(spark, run_dir)
    started = time.monotonic()
    offset_reads(history, readers).repartition("pk").write.format("noop").mode("overwrite").save()
    return time.monotonic() - started


DUCKDB_CORE = {
    # Each is the count the Spark check reports for the same history.
    LOST.name: """
        WITH per_id AS (
            SELECT id,
                   max(CASE WHEN kind = 'send' AND type = 'ok' THEN 1 ELSE 0 END) AS acked,
                   count(*) FILTER (WHERE kind = 'read' AND process = 'final-committed'
                                    AND topic = $input) AS in_n,
                   count(*) FILTER (WHERE kind = 'read' AND process = 'final-committed'
                                    AND topic = $output) AS out_n
            FROM h WHERE kind = 'send' OR (kind = 'read' AND process = 'final-committed')
            GROUP BY id)
        SELECT count(*) FROM per_id WHERE (acked = 1 OR in_n > 0) AND out_n = 0""",
    DUPLICATE.name: """
        WITH per_id AS (
            SELECT id,
                   count(*) FILTER (WHERE topic = $input) AS in_n,
                   count(*) FILTER (WHERE topic = $output) AS out_n
            FROM h WHERE kind = 'read' AND process = 'final-committed' GROUP BY id)
        SELECT count(*) FROM per_id WHERE id IS NOT NULL AND out_n > greatest(in_n, 1)""",
    ABORTED_READ.name: """
        WITH txns AS (
            SELECT instance, incarnation, txn_seq,
                   min(time) FILTER (WHERE f = 'commit' AND type = 'ok') AS committed_at,
                   bool_or(f = 'begin' AND fate = 'abort') AS begin_abort,
                   bool_or(f = 'abort' AND type = 'invoke') AS abort_invoked,
                   bool_or(f = 'commit' AND type = 'fail') AS commit_failed
            FROM h WHERE kind = 'txn' GROUP BY ALL),
        reads AS (
            SELECT r.process, r.instance, r.incarnation, r.txn_seq,
                   bool_or(r.fate = 'abort' OR (t.committed_at IS NULL
                           AND (t.begin_abort OR t.abort_invoked OR t.commit_failed))) AS aborted
            FROM h r LEFT JOIN txns t USING (instance, incarnation, txn_seq)
            WHERE r.kind = 'read' AND r.topic = $output AND r.process <> 'final-uncommitted'
            GROUP BY ALL)
        SELECT count(*) FROM reads WHERE aborted""",
    ORDER.name: """
        WITH per_offset AS (
            SELECT process, topic, partition, "offset", count(*) AS n, min(time) AS t
            FROM h WHERE kind = 'read' AND topic IN ($input, $output) GROUP BY ALL),
        ordered AS (
            SELECT *, lag(t) OVER (PARTITION BY process, topic, partition
                                   ORDER BY "offset") AS prev_t,
                   min("offset") OVER (PARTITION BY process, topic, partition) AS lo,
                   max("offset") OVER (PARTITION BY process, topic, partition) AS hi
            FROM per_offset),
        bounds AS (SELECT DISTINCT process, topic, partition, lo, hi FROM ordered),
        skipped AS (
            SELECT count(*) AS n FROM per_offset f JOIN bounds b USING (topic, partition)
            WHERE f.process = 'final-committed'
              AND b.process NOT IN ('final-committed', 'final-uncommitted')
              AND f."offset" > b.lo AND f."offset" < b.hi
              AND NOT EXISTS (SELECT 1 FROM per_offset o WHERE o.process = b.process
                              AND o.topic = f.topic AND o.partition = f.partition
                              AND o."offset" = f."offset"))
        SELECT (SELECT count(*) FROM ordered WHERE n > 1)
             + (SELECT count(*) FROM ordered WHERE t < prev_t)
             + (SELECT n FROM skipped)""",
}


def duckdb_core(run_dir: Path, threads: int) -> tuple[float, dict[str, int]]:
    """The four core checks in DuckDB over the same Parquet: seconds and counts."""
    try:
        import duckdb
    except ImportError:
        raise SystemExit("the DuckDB reference needs duckdb: pip install -e '.[bench]'") from None

    from eoschaos.contract.rundir import PARQUET_DIR

    manifest = json.loads((run_dir / "run.json").read_text())
    topics = {
        "input": manifest.get("input_topic", "input-topic"),
        "output": manifest.get("output_topic", "output-topic"),
    }
    connection = duckdb.connect()
    connection.execute(f"SET threads = {threads}")
    started = time.monotonic()
    files = str(run_dir / PARQUET_DIR / "**" / "*.parquet").replace("'", "''")
    connection.execute(
        f"CREATE VIEW h AS SELECT * FROM read_parquet('{files}', hive_partitioning = true)"
    )
    counts = {}
    for check, sql in DUCKDB_CORE.items():
        used = {name: topic for name, topic in topics.items() if f"${name}" in sql}
        counts[check] = connection.execute(sql, used).fetchone()[0]
    return time.monotonic() - started, counts


def export_jsonl(run_dir: Path, jsonl_dir: Path) -> None:
    """The Parquet history as a run would have left it: history/<writer>.jsonl, one line per
    event, plus the same run.json and expected.json. Done once; not timed."""
    from eoschaos.checkers.history_io import event_schema
    from eoschaos.checkers.spark import spark_session
    from eoschaos.contract.rundir import HISTORY_DIR, PARQUET_DIR, RUN_MANIFEST

    spark = spark_session(app="eoschaos-bench-export")
    started = time.monotonic()
    staging = jsonl_dir / "export.tmp"
    events = spark.read.parquet(str(run_dir / PARQUET_DIR))
    columns = event_schema().fieldNames()
    (
        events.select("process", F.to_json(F.struct(*columns)).alias("line"))
        .write.mode("overwrite")
        .partitionBy("process")
        .text(str(staging))
    )
    spark.stop()
    history = jsonl_dir / HISTORY_DIR
    history.mkdir(parents=True, exist_ok=True)
    for writer in sorted(staging.glob("process=*")):
        name = unquote(writer.name.removeprefix("process="))
        with (history / f"{name}.jsonl").open("wb") as out:
            for part in sorted(writer.glob("part-*")):
                with part.open("rb") as chunk:
                    shutil.copyfileobj(chunk, out, 16 << 20)
    shutil.rmtree(staging)
    for name in (RUN_MANIFEST, "expected.json"):
        shutil.copy(run_dir / name, jsonl_dir / name)
    size = sum(f.stat().st_size for f in history.glob("*.jsonl"))
    print(f"exported JSON lines ({size / 2**30:.1f} GiB) in {time.monotonic() - started:.0f}s")


def compaction(spark, jsonl_dir: Path) -> tuple[float, float]:
    """Seconds of compact_history on JSONL_DIR (any earlier compaction removed first), and of
    its floor: the same files parsed and written as Parquet by kind, nothing else."""
    from bench_verdict import compaction_floor  # the same floor as the warm-verdict bench

    from eoschaos.checkers.history_io import compact_history
    from eoschaos.contract.rundir import PARQUET_DIR

    shutil.rmtree(jsonl_dir / PARQUET_DIR, ignore_errors=True)
    started = time.monotonic()
    compact_history(spark, jsonl_dir)
    seconds = time.monotonic() - started
    print(f"compaction: {seconds:.1f}s", flush=True)
    floor_dir = jsonl_dir / "floor.parquet"
    started = time.monotonic()
    compaction_floor(spark, jsonl_dir, floor_dir)
    floor = time.monotonic() - started
    shutil.rmtree(floor_dir)
    print(f"compaction floor (JSON -> Parquet, nothing else): {floor:.1f}s", flush=True)
    return seconds, floor


def bench(
    run_dir: Path,
    records: int,
    runs: int,
    master: str | None,
    *,
    compact: bool = False,
    duckdb: bool = True,
) -> dict:
    from eoschaos.checkers.spark import spark_session
    from eoschaos.checkers.verdict import check_run

    rss = TreeRss()
    started = time.monotonic()
    spark = spark_session(master, app="eoschaos-bench")
    startup = time.monotonic() - started
    compaction_seconds, compaction_floor = compaction(spark, run_dir) if compact else (None, None)
    expected = json.loads((run_dir / "expected.json").read_text())
    times = []
    for n in range(runs):
        verdict = check_run(spark, run_dir, lineage=False)  # the checks; lineage timed below
        seconds = verdict["checker"]["seconds"]
        times.append(seconds)
        require_planted(verdict, expected, f"run {n + 1}: {seconds:.1f}s", records)
    verdict = check_run(spark, run_dir)  # with the lineage section
    whole = verdict["checker"]["seconds"]
    require_planted(verdict, expected, f"with lineage: {whole:.1f}s", records)
    times = times or [whole]  # --runs 0: the whole verdict is the only figure
    floor = scan_floor(spark, run_dir)
    exchange = exchange_floor(spark, run_dir, sorted(verdict["stats"]["readers"]))
    cores = spark.sparkContext.defaultParallelism
    conf = spark.sparkContext.getConf()
    settings = {
        "master": spark.sparkContext.master,
        "cores": cores,
        "driver.memory": conf.get("spark.driver.memory"),
        "executor.memory": conf.get("spark.executor.memory", "1g (default)"),
        "shuffle.partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "adaptive": spark.conf.get("spark.sql.adaptive.enabled"),
    }
    spark.stop()
    peak = rss.stop()
    duck_seconds, duck_counts = (
        duckdb_core(run_dir, threads=os.cpu_count() or 2) if duckdb else (None, {})
    )
    wrong = {c: n for c, n in duck_counts.items() if n != expected.get(c, 0)}
    median = statistics.median(times)
    result = {
        "input_records": records,
        "events": verdict["checker"]["events"],
        "check_seconds": median,
        "check_seconds_all": times,
        "check_includes_lineage": runs == 0,
        "with_lineage_seconds": whole,
        "records_per_second": records / median,
        "spark_start_seconds": startup,
        "scan_floor_seconds": floor,
        "exchange_floor_seconds": exchange,
        # what the goal of 1M input records/s allows for the whole check
        "goal_seconds": records / 1_000_000,
        "duckdb_core_seconds": duck_seconds,
        "duckdb_core_counts": duck_counts,
        "duckdb_counts_match": not wrong,
        "peak_rss_mb": peak * 1.048576,
        # None unless --compaction: the synthetic history is written as Parquet directly
        "compaction_seconds": compaction_seconds,
        "compaction_floor_seconds": compaction_floor,
        "spark_master": settings["master"],
        "settings": settings,
    }
    print(f"events: {result['events']:,}; spark start {startup:.1f}s; settings {settings}")
    print(
        f"check_run median {median:.1f}s (min {min(times):.1f}s): "
        f"{records / median:,.0f} input records/s"
    )
    print(f"scan floor (Spark, every column read): {floor:.1f}s -> check is {median / floor:.1f}x")
    print(
        f"exchange floor (the reads by topic-partition, shuffled only): {exchange:.1f}s; "
        f"1M input records/s allows {records / 1_000_000:.1f}s for everything"
    )
    if duck_seconds is not None:
        print(
            f"DuckDB, 4 core checks: {duck_seconds:.1f}s -> check is {median / duck_seconds:.1f}x"
            + (f"  COUNTS DIFFER {wrong}" if wrong else "  (counts match)")
        )
    print(f"peak RSS of the process tree: {peak:,.0f} MiB")
    return result


def require_planted(verdict: dict, expected: dict, label: str, records: int) -> None:
    """Exit unless the verdict reports exactly the planted anomalies: a fast wrong check is no
    result."""
    found = {k: c["count"] for k, c in verdict["checks"].items() if c["verdict"] == "FAIL"}
    status = "ok" if found == expected else f"MISMATCH {found} != {expected}"
    seconds = verdict["checker"]["seconds"]
    print(f"{label}  {records / seconds:,.0f} records/s  {status}", flush=True)
    if found != expected:
        raise SystemExit(f"the verdict does not report the planted anomalies: {status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--run-dir", type=Path, default=Path("/tmp/eoschaos-bench-checkers"))
    parser.add_argument("--master", default=None)
    parser.add_argument(
        "--standalone-workers",
        type=int,
        default=0,
        help="start a Spark standalone cluster of N one-core workers on loopback and use it",
    )
    parser.add_argument("--executor-memory", default="4g", help="with --standalone-workers")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--compaction",
        action="store_true",
        help="start from JSON lines, as a run leaves them, and time their compaction",
    )
    parser.add_argument("--no-duckdb", action="store_true", help="leave out the DuckDB peer")
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--export", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    run_dir = args.run_dir / f"records-{args.records}"
    jsonl_dir = args.run_dir / f"records-{args.records}-jsonl"  # --compaction's starting point
    if args.generate:
        write_history(run_dir, args.records)
        return
    if args.export:
        export_jsonl(run_dir, jsonl_dir)
        return
    if not (run_dir / "expected.json").exists():
        command = [sys.executable, __file__, "--generate", "--records", str(args.records)]
        subprocess.run([*command, "--run-dir", str(args.run_dir)], check=True)
    if args.compaction:
        if not (jsonl_dir / "expected.json").exists():
            command = [sys.executable, __file__, "--export", "--records", str(args.records)]
            subprocess.run([*command, "--run-dir", str(args.run_dir)], check=True)
        run_dir = jsonl_dir
    cluster = None
    master = args.master
    if args.standalone_workers:
        from spark_standalone import StandaloneSpark

        home = Path(tempfile.mkdtemp(prefix="eoschaos-bench-spark-"))
        cluster = StandaloneSpark(
            home, workers=args.standalone_workers, cores=1, memory=args.executor_memory
        )
        # The way a user sets executor settings for eoschaos: spark-defaults.conf.
        (home / "spark-defaults.conf").write_text(f"spark.executor.memory {args.executor_memory}\n")
        os.environ["SPARK_CONF_DIR"] = str(home)
        master = cluster.start().url
    try:
        result = bench(
            run_dir,
            args.records,
            args.runs,
            master,
            compact=args.compaction,
            duckdb=not args.no_duckdb,
        )
    finally:
        if cluster is not None:
            cluster.stop()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
