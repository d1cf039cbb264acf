"""Realtime lag (commit marker to first downstream read) and unseen input over time: figures in
every verdict, and liveness.realtime-lag judged against the run's --max-lag."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoschaos.checkers.verdict import check_run
from eoschaos.contract.rundir import read_manifest, write_manifest
from eoschaos.testing import Plants, RunShape, generate

CHECK = "liveness.realtime-lag"
SLOW = RunShape(broker_logs=True, observer_lag=0.5)  # every committed record read 0.5 s late
# After its marker (0.57 of a slot) the observer reads a slot's records from 0.7 of the slot,
# the last of them 3/16 of a slot later: the lag is 0.5 s and up to 0.32 slots more, plus up
# to a millisecond as the marker's time is truncated to one.
LAG_SPAN = (0.5, 0.5 + 0.32 * SLOW.slot_seconds + 0.001)


def judged(spark, run_dir: Path, max_lag: float | None) -> dict:
    write_manifest(run_dir, read_manifest(run_dir) | {"max_lag": max_lag})
    return check_run(spark, run_dir, lineage=False)


@pytest.fixture(scope="module")
def slow_reader(spark, tmp_path_factory) -> Path:
    return generate(spark, tmp_path_factory.mktemp("slow"), SLOW, Plants(), parquet=False).run_dir


def test_the_lag_runs_from_each_records_commit_marker_to_its_first_downstream_read(
    spark, slow_reader
):
    verdict = judged(spark, slow_reader, 0.2)
    lag = verdict["stats"]["realtime_lag"]
    assert lag["records"] == SLOW.records  # every committed output record, read once
    assert LAG_SPAN[0] < lag["p99_s"] <= lag["worst_s"] <= LAG_SPAN[1]
    assert set(lag["partitions"]) == {"0", "1"}
    assert sum(p["records"] for p in lag["partitions"].values()) == SLOW.records
    series = verdict["timeline"]["realtime_lag"]
    assert {partition for _, partition, _ in series} == {0, 1}
    assert all(LAG_SPAN[0] < worst <= LAG_SPAN[1] for _, _, worst in series)


def test_a_lag_over_the_bound_fails_naming_the_slowest_reads_first(spark, slow_reader):
    check = judged(spark, slow_reader, 0.2)["checks"][CHECK]
    assert (check["verdict"], check["count"]) == ("FAIL", SLOW.records)
    assert check["counts"] == {"observer": SLOW.records}
    lags = [example["lag_s"] for example in check["examples"]]
    assert lags == sorted(lags, reverse=True) and lags[0] > 0.5
    assert check["jepsen"] == {"worst-realtime-lag": SLOW.records}


def test_a_lag_under_the_bound_passes(spark, slow_reader):
    check = judged(spark, slow_reader, 1.0)["checks"][CHECK]
    assert (check["verdict"], check["count"]) == ("PASS", 0)


def test_unseen_input_over_time_ends_at_the_records_never_consumed(spark, tmp_path):
    run = generate(spark, tmp_path / "run", RunShape(), Plants(unseen=2), parquet=False)
    verdict = check_run(spark, run.run_dir, lineage=False)
    unseen = verdict["stats"]["unseen"]
    assert unseen["at_end"] == 2 and unseen["peak"] >= 2
    series = verdict["timeline"]["unseen"]
    assert series[-1][1] == 2 and [t for t, _ in series] == list(range(len(series)))
    # without the brokers' batch headers there are no markers to measure the lag from
    assert "realtime_lag" not in verdict["stats"]
    assert "batch headers" in verdict["not_applicable"][CHECK]
