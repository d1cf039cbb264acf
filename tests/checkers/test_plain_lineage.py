"""Offset lineage of a pipeline without transactions, from the brokers' logs alone
(eoschaos.checkers.lineage.from_logs.PlainLog): an at-least-once pipeline's duplicates are
explained by its group's plain offset commits and the output's batches.

The run is a bring-your-own one written by hand, in mode alos. One consumer copies ids 0-1 to
output p0@0-1, commits input p0's offset 2, copies ids 2-3 to p0@2-3 and dies before its next
commit. Its replacement starts from the committed 2, copies ids 2-5 to p0@4-7 and commits 6.
So ids 2 and 3 are duplicated, both copies written before the group first committed past them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from eoschaos.checkers.history_io import History, load_history
from eoschaos.checkers.lineage.from_logs import PlainLog
from eoschaos.checkers.lineage.subgraphs import anomaly_subgraphs
from eoschaos.checkers.log_transactions import offset_commits, topic_batches
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.checks import CheckResult
from eoschaos.contract.history import (
    LOG_BATCH,
    LOG_BATCH_KIND,
    LOG_BATCHES,
    OFFSET_COMMIT,
    HistoryWriter,
)
from eoschaos.contract.rundir import HISTORY_DIR, write_manifest

INPUT, OUTPUT, GROUP = "input-topic", "output-topic", "counters"
T0 = time.time()  # the clock the history writers stamp the sends and reads with
FIRST, REPLACEMENT = 300, 301  # the two consumers' (idempotent) producers
# (producer, output offset of its batch, the ids it holds), in the order they were written,
# and after each the input offset the group committed, if any
STEPS = [(FIRST, 0, [0, 1], 2), (FIRST, 2, [2, 3], None), (REPLACEMENT, 4, [2, 3, 4, 5], 6)]


def _log_row(f: str, at: float, topic: str, offset: int, params: dict, **more) -> dict:
    return {
        "kind": LOG_BATCH_KIND,
        "type": "ok",
        "f": f,
        "process": LOG_BATCHES,
        "time": at,
        "topic": topic,
        "partition": 0,
        "offset": offset,
        "params": json.dumps(params),
        **more,
    }


def write_run(run_dir: Path) -> Path:
    run_dir.mkdir(parents=True)
    manifest = {"workload": "byo", "mode": "alos", "input_topic": INPUT, "output_topic": OUTPUT}
    write_manifest(run_dir, manifest)
    with HistoryWriter(run_dir, "seeder") as seeder:
        for id_ in range(6):
            seeder.record("send", "invoke", "send", id=id_, topic=INPUT, partition=0)
            seeder.record("send", "ok", "send", id=id_, topic=INPUT, partition=0, offset=id_)
    rows, outputs, previous = [], [], None
    for step, (producer, first, ids, committed) in enumerate(STEPS):
        written = T0 + 1 + 2 * step
        params = {
            "last_offset": first + len(ids) - 1,
            "producer_id": producer,
            "producer_epoch": 0,
            "transactional": False,
            "control": False,
            "create_time": round(written * 1000),
        }
        rows.append(_log_row(LOG_BATCH, written, OUTPUT, first, params, count=len(ids)))
        outputs += [(first + n, id_) for n, id_ in enumerate(ids)]
        if committed is not None:
            commit = {
                "group": GROUP,
                "log_partition": 0,
                "log_offset": step,
                "transactional": False,
            }
            rows.append(_log_row(OFFSET_COMMIT, written + 0.5, INPUT, committed, commit))
            previous = committed
    assert previous == 6
    with HistoryWriter(run_dir, "final-committed") as scan:
        for id_ in range(6):
            scan.record("read", "ok", "poll", topic=INPUT, partition=0, offset=id_, id=id_)
        for offset, id_ in outputs:
            scan.record("read", "ok", "poll", topic=OUTPUT, partition=0, offset=offset, id=id_)
    with (run_dir / HISTORY_DIR / f"{LOG_BATCHES}.jsonl").open("w") as log:
        log.writelines(json.dumps(row) + "\n" for row in rows)
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("alos") / "run")


@pytest.fixture(scope="module")
def history(spark, run_dir) -> History:
    return load_history(spark, run_dir)


def words_of_duplicate(history: History, id_: int) -> list[str]:
    log = history.kind(LOG_BATCH_KIND)
    plain = PlainLog(offset_commits(log), topic_batches(log, OUTPUT))
    checks = {"delivery.duplicate": CheckResult("FAIL", 1, "", examples=[{"id": id_}])}
    [anomaly] = anomaly_subgraphs(history, checks, (INPUT,), (OUTPUT,), 12, None, plain)
    return anomaly["from_logs"]


def test_a_duplicate_s_input_was_copied_twice_before_the_group_first_committed_past_it(history):
    words = words_of_duplicate(history, 2)
    assert any(
        w.startswith("the group first committed past input id 2 at p0@2 at")
        and w.endswith("(p0 offset 2 → 6)")
        for w in words
    )
    assert (
        "2 copies of input id 2 were written before that commit: whoever started over in "
        "between (a crash, a rebalance) read it again from offset 2"
    ) in words


def test_each_copy_is_named_with_its_producer_and_when_it_was_written(history):
    words = words_of_duplicate(history, 3)
    writes = [w for w in words if w.startswith("output p0@")]
    assert [w.split(" was written at ")[0] for w in writes] == [
        "output p0@3 (id 3)",
        "output p0@5 (id 3)",
    ]
    assert [w.split(" by producer ")[1] for w in writes] == [
        f"{FIRST}, outside any transaction",
        f"{REPLACEMENT}, outside any transaction",
    ]


def test_the_verdict_of_an_alos_run_explains_its_duplicates_from_the_logs(spark, run_dir):
    verdict = check_run(spark, run_dir)
    assert verdict["checks"]["delivery.duplicate"]["count"] == 2
    duplicates = [a for a in verdict["lineage"]["anomalies"] if a["check"] == "delivery.duplicate"]
    assert len(duplicates) == 2
    assert all(any("copies of input id" in w for w in a["from_logs"]) for a in duplicates)
