"""One place that decides how eoschaos runs Spark, so the CLI, tests and benchmark agree.

Histories are checked on one machine next to a Kafka cluster, so the defaults favour a quick
local start: few shuffle partitions (histories are millions, not billions, of rows), no UI,
quiet logs, UTC so event times never shift with the host's zone, and aggregation by sorting
where a plan already sorted its input (streaming beats a hash map of millions of keys).

PySpark's DataFrame debugging is off: with it, every DataFrame and Column call also records its
Python call site in the JVM (five py4j round trips each), about two thirds of the round trips a
check makes while it builds its plans, the larger part of a small history's check.

A cluster master (spark://) is asked three things before a check relies on it, each with a
bound, because Spark itself would retry for a minute and then print a JVM stack trace: does
it answer on its port, does it register this application, and does it give it an executor.
A "no" is one line naming the master and the fix (EoschaosError, exit 2). docs/scale.md.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyspark
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.util import inheritable_thread_target

from eoschaos.checkers import class_archive
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.rundir import HISTORY_DIR

DEFAULT_MASTER = "local[*]"
LOOPBACK = "127.0.0.1"
DRIVER_MEMORY = "4g"
# The driver's heap, for a history too big for DRIVER_MEMORY (in local mode the driver runs
# the checks too). An environment variable, so that `run`, `check`, `matrix` and the pytest
# plugin all take it.
DRIVER_MEMORY_ENV = "EOSCHAOS_SPARK_DRIVER_MEMORY"
OOM_EXIT_CODE = 52  # how Spark ends a JVM whose task ran out of memory (SparkExitCode.OOM)
SHUFFLE_PARTITIONS = 8
# Compiled classes of Spark's generated code kept for reuse. A verdict's plans compile to
# ~400 classes (a kip447 history; ~230 for a black-box one) and Spark keeps 100, so every
# verdict compiled them all again, even in a warm session. The code does not depend on the run:
# kept, the next run's verdict compiles a handful of classes (docs/benchmarks.md).
CODEGEN_CACHE_ENTRIES = 1000
JAVA_OPTIONS = "-Dlog4j2.level=WARN"
# Verdict parts run at once (`concurrently`): on 2 cores 4 was quicker than 2 or 8 (one
# measurement each, 5 warm verdicts: 56.8 s, 61.2 s, 65.3 s).
CONCURRENT_PARTS = 4
# What SparkContext.setJobGroup sets (SPARK_JOB_GROUP_ID, SPARK_JOB_DESCRIPTION,
# SPARK_JOB_INTERRUPT_ON_CANCEL): jobs_counted puts the caller's back
JOB_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
# For many small checks (tests): C1-only JIT compiles Spark's generated code ~10x cheaper and
# small histories never run long enough for C2's faster code to pay that back.
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
# Up to this much history (JSON lines) a check is seconds of work: C1 alone serves it best.
QUICK_JIT_MAX_HISTORY_BYTES = 256 << 20
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
MASTER_CONNECT_TIMEOUT_S = 5.0
# Registering with a standalone master takes milliseconds; Spark's own client gives up only
# after three 20 s attempts. Past this, the master is not going to take the application.
MASTER_REGISTRATION_TIMEOUT_S = 40.0
# How long a cluster may take to give the application its first executor (a busy cluster
# queues it); the environment variable shortens it where waiting is pointless (tests).
EXECUTOR_WAIT_ENV = "EOSCHAOS_SPARK_EXECUTOR_WAIT_S"
EXECUTOR_WAIT_S = 120.0


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

    java_options are added to the driver JVM's (e.g. QUICK_JIT), and so is its class archive
    (checkers.class_archive); they only take effect when this call starts the JVM. On a
    cluster, the executors get java_options too: they run the generated code of the checks'
    plans, whose compilation QUICK_JIT makes cheap for a small history as it does in the
    driver."""
    master = master or DEFAULT_MASTER
    print(f"eoschaos: starting Spark ({master}) ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    cluster_hosts = master_hosts(master)
    for host, port in cluster_hosts:
        _require_answer(master, host, port)
    executor_options = f"{JAVA_OPTIONS} {java_options.strip()}".strip()
    if SparkContext._gateway is None:  # this call starts the driver JVM
        java_options = f"{java_options} {class_archive.java_options()}"
    builder = SparkSession.builder
    if master.startswith("local") or (
        cluster_hosts and all(host in LOOPBACK_HOSTS for host, _ in cluster_hosts)
    ):
        # Spark's driver would otherwise bind the host's first non-loopback address. A local
        # checker, or one whose cluster is on this machine's loopback, serves nobody else, so
        # everything it listens on stays on 127.0.0.1. (A remote cluster's executors must
        # reach the driver: there the user's spark.driver.host decides; docs/scale.md.)
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        builder = builder.config("spark.driver.bindAddress", LOOPBACK).config(
            "spark.driver.host", LOOPBACK
        )
    builder = (
        builder.master(master)
        .appName(app)
        .config("spark.driver.memory", driver_memory())
        .config("spark.driver.extraJavaOptions", f"{JAVA_OPTIONS} {java_options.strip()}".strip())
        .config("spark.executor.extraJavaOptions", executor_options)
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.replaceHashWithSortAgg", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    spark = _registered(builder, master) if cluster_hosts else builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if cluster_hosts:
        _await_executor(spark, master)
    elapsed = time.monotonic() - started
    print(f"eoschaos: Spark ready in {elapsed:.1f}s", file=sys.stderr, flush=True)
    return spark


def concurrently(spark: SparkSession, *calls: Callable[[], Any]) -> list[Any]:
    """Run independent parts of a verdict (each its own Spark jobs) at once, and return their
    results in order. A part's driver work (Python building its plans, Catalyst planning them)
    runs on one core and leaves the other idle; parts side by side fill it with another's
    planning or tasks. Each part's thread carries the caller's Spark local properties and tags.
    """
    pool = ThreadPoolExecutor(max_workers=CONCURRENT_PARTS)
    try:
        futures = [pool.submit(inheritable_thread_target(spark)(call)) for call in calls]
        return [future.result() for future in futures]
    finally:  # a part that failed (or Ctrl-C) ends the verdict: the parts not begun never begin
        pool.shutdown(wait=False, cancel_futures=True)


@contextmanager
def jobs_counted(spark: SparkSession) -> Iterator[Callable[[], int]]:
    """Count the Spark jobs run inside the block (its `concurrently` parts included): on a
    small history a verdict's cost is mostly its number of jobs, so the verdict says how many
    it took. The block's jobs carry a job group of their own; the caller's is back afterwards."""
    context = spark.sparkContext
    group = f"eoschaos-{uuid.uuid4().hex}"
    outer = {key: context.getLocalProperty(key) for key in JOB_GROUP_PROPERTIES}
    context.setJobGroup(group, "eoschaos verdict")
    try:
        yield lambda: len(context.statusTracker().getJobIdsForGroup(group))
    finally:
        for key, value in outer.items():
            context.setLocalProperty(key, value)  # None unsets it


def driver_memory() -> str:
    return os.environ.get(DRIVER_MEMORY_ENV) or DRIVER_MEMORY


@contextmanager
def failures_explained(what: str) -> Iterator[None]:
    """Spark work whose driver may die under it: an out-of-memory death (the JVM's error, or
    the JVM gone with Spark's OOM exit code) becomes one line naming the setting to raise,
    instead of a JVM stack trace or py4j's "connection refused"."""
    try:
        yield
    except Exception as error:
        gateway = SparkContext._gateway
        exit_code = gateway.proc.poll() if gateway is not None and gateway.proc else None
        text = str(error)
        if exit_code == OOM_EXIT_CODE or "java.lang.OutOfMemoryError" in text:
            raise EoschaosError(
                f"Spark ran out of memory {what} (driver heap {driver_memory()}); raise it, "
                f"e.g. {DRIVER_MEMORY_ENV}=16g, or check on a Spark cluster (docs/scale.md)"
            ) from None
        if exit_code is not None:
            raise EoschaosError(
                f"Spark's driver JVM exited (code {exit_code}) {what}; its log is above"
            ) from None
        raise


def master_hosts(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a standalone master URL (spark://h:p or, with standby
    masters, spark://h1:p1,h2:p2); [] for any other master (local, yarn, k8s)."""
    if not master.startswith("spark://"):
        return []
    hosts = []
    for entry in master.removeprefix("spark://").split(","):
        parts = urlsplit(f"//{entry}")
        try:
            port = parts.port or 7077
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise EoschaosError(
                f"--spark-master {master}: {entry!r} is not host:port; give it as spark://HOST:PORT"
            )
        hosts.append((parts.hostname, port))
    return hosts


def _require_answer(master: str, host: str, port: int) -> None:
    try:
        socket.create_connection((host, port), timeout=MASTER_CONNECT_TIMEOUT_S).close()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise EoschaosError(
            f"the Spark master {master} does not answer on {host}:{port} ({reason}); start it "
            "or point --spark-master at a running one"
        ) from None


def _registered(builder: SparkSession.Builder, master: str) -> SparkSession:
    """builder.getOrCreate(), given MASTER_REGISTRATION_TIMEOUT_S to register with `master`.

    Past the bound the driver JVM is stopped, which ends the blocked call; either way a master
    that did not take the application is one line, with nothing of this session left running.
    """
    registered = threading.Event()
    timed_out = threading.Event()

    def stop_a_driver_that_never_registers() -> None:
        if registered.wait(MASTER_REGISTRATION_TIMEOUT_S):
            return
        timed_out.set()
        gateway = SparkContext._gateway
        if gateway is not None and gateway.proc is not None:
            gateway.proc.kill()

    threading.Thread(target=stop_a_driver_that_never_registers, daemon=True).start()
    try:
        return builder.getOrCreate()
    except Exception as error:  # py4j, or the JVM's own refusal: both mean "not taken"
        if timed_out.is_set():
            what = f"did not register this application within {MASTER_REGISTRATION_TIMEOUT_S:.0f} s"
        else:
            first = (str(error).strip() or type(error).__name__).splitlines()[0][:200]
            what = f"did not accept this application ({first})"
        raise EoschaosError(
            f"the Spark master {master} {what}; check that it is a running Spark "
            f"{pyspark.__version__} standalone master and what its log says"
        ) from None
    finally:
        registered.set()


def _await_executor(spark: SparkSession, master: str) -> None:
    """Wait for the cluster to give this application an executor: without one, Spark's first
    job would wait forever, printing only that it "has not accepted any resources"."""
    wait_s = float(os.environ.get(EXECUTOR_WAIT_ENV, EXECUTOR_WAIT_S))
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus  # the driver counts as one
    deadline = time.monotonic() + wait_s
    while status().size() < 2:
        if time.monotonic() > deadline:
            conf = spark.sparkContext.getConf()
            memory = conf.get("spark.executor.memory", "1g")
            cores = conf.get("spark.executor.cores", "all of a worker's")
            spark.stop()
            raise EoschaosError(
                f"the Spark master {master} gave this application no executor in "
                f"{wait_s:.0f} s: no worker has spark.executor.memory={memory} and "
                f"{cores} cores free; free a worker, or lower these settings in "
                "$SPARK_CONF_DIR/spark-defaults.conf"
            )
        time.sleep(0.2)
