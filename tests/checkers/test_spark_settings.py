"""How eoschaos starts Spark for a check: settings chosen for histories of the size at hand."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from listening import descendants, listening_addresses, not_on_loopback

from eoschaos.checkers.spark import (
    DRIVER_MEMORY,
    DRIVER_MEMORY_ENV,
    QUICK_JIT,
    QUICK_JIT_MAX_HISTORY_BYTES,
    concurrently,
    driver_memory,
    failures_explained,
    java_options_for,
)
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.testing import RunShape, generate


def _history_of(run_dir: Path, size: int) -> Path:
    history = run_dir / HISTORY_DIR
    history.mkdir()
    with (history / "observer.jsonl").open("wb") as handle:
        handle.truncate(size)  # sparse: the size is what counts
    return run_dir


def test_a_small_history_is_checked_with_the_quick_jit(tmp_path):
    assert java_options_for(_history_of(tmp_path, 20 << 20)) == QUICK_JIT


def test_a_large_history_keeps_the_jvms_optimising_jit(tmp_path):
    assert java_options_for(_history_of(tmp_path, QUICK_JIT_MAX_HISTORY_BYTES + 1)) == ""


def test_the_session_records_no_python_call_site_per_dataframe_call(spark):
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"


def test_the_checkers_spark_listens_on_loopback_only(spark):
    jvm = descendants(os.getpid())
    assert listening_addresses(jvm), "Spark's driver JVM listens somewhere: it must be seen"
    assert not_on_loopback(jvm) == {}


def test_the_driver_heap_can_be_raised_from_the_environment(monkeypatch):
    assert driver_memory() == DRIVER_MEMORY
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "16g")
    assert driver_memory() == "16g"


def test_running_out_of_memory_is_one_line_naming_the_setting_to_raise():
    expected = f"ran out of memory checking R .*{DRIVER_MEMORY_ENV}"
    with pytest.raises(EoschaosError, match=expected), failures_explained("checking R"):
        raise RuntimeError("o123.collect: java.lang.OutOfMemoryError: Java heap space")


def test_other_spark_failures_pass_through_unchanged(spark):
    with pytest.raises(RuntimeError, match="not about memory"), failures_explained("checking R"):
        raise RuntimeError("not about memory")


def test_a_warm_session_judges_the_next_run_without_compiling_its_plans_again(spark, tmp_path):
    """A verdict's plans compile to ~190 classes of generated code (a synthetic run; ~400 for a
    kip447 one), more than Spark keeps by default: every verdict compiled them all again.
    Kept, the next run's verdict finds them compiled: the code does not depend on the run."""
    compilations = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME
    first, second = (
        generate(spark, tmp_path / f"run-{seed}", RunShape(), seed=seed) for seed in (1, 2)
    )
    check_run(spark, first.run_dir, lineage=False)
    before = compilations().getCount()
    check_run(spark, second.run_dir, lineage=False)
    assert compilations().getCount() - before < 20


def test_verdict_parts_run_side_by_side_and_return_in_call_order(spark):
    both_running = threading.Barrier(2, timeout=10)  # broken unless the two overlap

    def part(value, delay):
        both_running.wait()
        time.sleep(delay)
        return value

    assert concurrently(spark, lambda: part("first", 0.3), lambda: part("second", 0.0)) == [
        "first",
        "second",
    ]


def test_a_failing_part_fails_the_verdict_and_parts_not_begun_never_begin(spark):
    begun = []

    def failing():
        raise ValueError("this part failed")

    def slow():
        begun.append(1)
        time.sleep(0.3)

    with pytest.raises(ValueError, match="this part failed"):
        concurrently(spark, failing, *[slow] * 12)
    time.sleep(1.0)  # what had begun has ended; nothing else may begin
    assert len(begun) < 12
