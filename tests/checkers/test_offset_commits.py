"""delivery.input-committed-twice follows each group's committed offsets in the order they took
effect in the coordinator's log: a transactional commit at its COMMIT marker, not where its
record was written; an aborted or still open commit never took effect."""

from __future__ import annotations

import json
from pathlib import Path

from eoschaos.checkers.verdict import check_run
from eoschaos.contract.history import LOG_BATCH_KIND, LOG_BATCHES, OFFSET_COMMIT
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.testing import GROUP, INPUT_TOPIC, RunShape, generate

SHAPE = RunShape()
LATE = 100_000  # a __consumer_offsets position after every commit of the synthetic run
HIGHEST = SHAPE.records // SHAPE.partitions  # what the run's last slot commits per partition
CHECK = "delivery.input-committed-twice"


def commit(
    offset: int, log_offset: int, producer_id: int, marker: str | None, marker_at: int = 0
) -> dict:
    """A transactional commit at `log_offset` resolved by `marker` at `marker_at`."""
    params = {
        "group": GROUP,
        "log_partition": 0,
        "log_offset": log_offset,
        "producer_id": producer_id,
        "producer_epoch": 0,
        "transactional": True,
        "marker": marker,
        "marker_offset": marker_at if marker is not None else None,
    }
    return {
        "kind": LOG_BATCH_KIND,
        "type": "ok",
        "f": OFFSET_COMMIT,
        "process": LOG_BATCHES,
        "time": SHAPE.start + 1000 + log_offset / 1000,
        "topic": INPUT_TOPIC,
        "partition": 0,
        "offset": offset,
        "params": json.dumps(params),
    }


def judged(spark, tmp_path: Path, *commits: dict) -> dict:
    run = generate(spark, tmp_path / "run", SHAPE, parquet=False)
    with (run.run_dir / HISTORY_DIR / f"{LOG_BATCHES}.jsonl").open("a") as log:
        log.writelines(json.dumps(c) + "\n" for c in commits)
    return check_run(spark, run.run_dir, lineage=False)["checks"][CHECK]


def test_a_correct_history_passes(spark, tmp_path):
    assert judged(spark, tmp_path)["verdict"] == "PASS"


def test_the_99_duplicates_pattern_fails_with_both_commits_named(spark, tmp_path):
    """A commit pending across a coordinator move (its marker comes late) and, meanwhile, a new
    owner's commit from an old offset that takes effect first: docs/findings.md."""
    pending = commit(HIGHEST + 99, LATE, producer_id=2000, marker="COMMIT", marker_at=LATE + 10)
    restarted = commit(21, LATE + 1, producer_id=1, marker="COMMIT", marker_at=LATE + 2)
    result = judged(spark, tmp_path, pending, restarted)
    assert (result["verdict"], result["count"]) == ("FAIL", 1)
    [example] = result["examples"]
    assert (example["partition"], example["offset"], example["producer_id"]) == (0, 21, 1)
    assert example["committed_before"] == HIGHEST
    assert example["recommitted"] == HIGHEST - 21
    assert example["earlier_producer_id"] == 1000  # the instance that owned partition 0


def test_an_aborted_or_open_commit_below_never_took_effect(spark, tmp_path):
    aborted = commit(5, LATE, producer_id=1, marker="ABORT", marker_at=LATE + 1)
    still_open = commit(6, LATE + 2, producer_id=2, marker=None)
    assert judged(spark, tmp_path, aborted, still_open)["verdict"] == "PASS"
