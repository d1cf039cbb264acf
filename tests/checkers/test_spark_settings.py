"""How eoschaos starts Spark for a check: settings chosen for histories of the size at hand."""

from __future__ import annotations

import os
from pathlib import Path

from listening import descendants, listening_addresses, not_on_loopback

from eoschaos.checkers.spark import QUICK_JIT, QUICK_JIT_MAX_HISTORY_BYTES, java_options_for
from eoschaos.contract.rundir import HISTORY_DIR


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
