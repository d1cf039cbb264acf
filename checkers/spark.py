"""One place that decides how eoschaos runs Spark, so the CLI, tests and benchmark agree.

Histories are checked on one machine next to a Kafka cluster, so the defaults favour a quick
local start: few shuffle partitions (histories are millions, not billions, of rows), no UI,
quiet logs, UTC so event times never shift with the host's zone, and aggregation by sorting
where a plan already sorted its input (streaming beats a hash map of millions of keys).

PySpark's DataFrame debugging is off: with it, every DataFrame and Column call also records its
Python call site in the JVM (five py4j round trips each), about two thirds of the round trips a
check makes while it builds its plans -- 2 s of a 5.5 s check of a small history.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from eoschaos.contract.rundir import HISTORY_DIR

DEFAULT_MASTER = "local[*]"
LOOPBACK = "127.0.0.1"
DRIVER_MEMORY = "4g"
SHUFFLE_PARTITIONS = 8
JAVA_OPTIONS = "-Dlog4j2.level=WARN"
# For many small checks (tests): C1-only JIT compiles Spark's generated code ~10x cheaper and
# small histories never run long enough for C2's faster code to pay that back.
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
# Up to this much history (JSON lines) a check is seconds of work: C1 alone serves it best.
QUICK_JIT_MAX_HISTORY_BYTES = 256 << 20


def java_options_for(run_dir: Path) -> str:
    """QUICK_JIT for a small history, the JVM's default (C2 too) for a large one: decided
    before the JVM starts, from the size of the run's JSON-lines history."""
    history = Path(run_dir) / HISTORY_DIR
    size = sum(path.stat().st_size for path in history.glob("*.jsonl")) if history.is_dir() else 0
    return QUICK_JIT if size <= QUICK_JIT_MAX_HISTORY_BYTES else ""


def spark_session(
    master: str | None = None,
    app: str = "eoschaos-check",
    *,
    java_options: str = "",
) -> SparkSession:
    """A SparkSession on `master` (default local[*]); reuses one already running.

    java_options are added to the driver JVM's (e.g. QUICK_JIT); they only take effect when
    this call starts the JVM."""
    master = master or DEFAULT_MASTER
    print(f"eoschaos: starting Spark ({master}) ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    builder = SparkSession.builder
    if master.startswith("local"):
        # Spark's driver would otherwise bind the host's first non-loopback address; a local
        # checker serves nobody else, so everything it listens on stays on 127.0.0.1.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        builder = builder.config("spark.driver.bindAddress", LOOPBACK).config(
            "spark.driver.host", LOOPBACK
        )
    spark = (
        builder.master(master)
        .appName(app)
        .config("spark.driver.memory", DRIVER_MEMORY)
        .config("spark.driver.extraJavaOptions", f"{JAVA_OPTIONS} {java_options}".strip())
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.replaceHashWithSortAgg", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    elapsed = time.monotonic() - started
    print(f"eoschaos: Spark ready in {elapsed:.1f}s", file=sys.stderr, flush=True)
    return spark
