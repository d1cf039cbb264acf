"""Realtime lag (commit marker to first downstream read) and unseen input over time: figures in
every verdict, and liveness.realtime-lag judged against the run's --max-lag."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from eoschaos.checkers.log_transactions import output_batches, with_markers
from eoschaos.checkers.realtime_lag import first_reads
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.history import LOG_BATCH
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


# One output partition that two producers write at once: producer 2's batches at offsets 0-9 and
# 21-30 and its COMMIT marker at 31 (9 s); producer 1's batch at 10-19 and its marker at 20 (3 s).
# Producer 2's range (0-30) holds producer 1's batch.
INTERLEAVED = [
    # offset, last offset, producer, control, written (ms)
    (0, 9, 2, False, 1000),
    (10, 19, 1, False, 2000),
    (20, 20, 1, True, 3000),
    (21, 30, 2, False, 4000),
    (31, 31, 2, True, 9000),
]


def test_the_lag_runs_from_the_marker_of_the_records_own_batch_where_producers_interleave(spark):
    # the rows as producer_rows gives them: each batch with its marker
    rows = with_markers(
        spark.createDataFrame(
            [
                (LOG_BATCH, "out", 0, offset, last, last - offset + 1, producer, 0, control, ms)
                for offset, last, producer, control, ms in INTERLEAVED
            ],
            "f string, topic string, partition int, offset long, last_offset long, count long, "
            "producer_id long, producer_epoch int, control boolean, create_time long",
        ).withColumns({"txn_id": F.lit(None).cast("string"), "marker_ms": F.lit(None).cast("long")})
    )
    reads = spark.createDataFrame(
        [("observer", "out", 0, offset, offset, 9.5, "read_committed") for offset in (15, 25)],
        "reader string, topic string, partition int, offset long, id long, time double, "
        "isolation string",
    )
    lags = first_reads(reads, output_batches(rows), ["observer"], ["out"]).collect()
    # offset 15 committed at 3 s (producer 1's marker), not at 9 s (producer 2's, whose range
    # holds it); a read_committed reader got it only once producer 2's transaction ended
    assert {row["offset"]: (row["committed_at"], row["lag"]) for row in lags} == {
        15: (3.0, 6.5),
        25: (9.0, 0.5),
    }
