"""Offset lineage from the brokers' logs alone (eoschaos.checkers.lineage.from_logs): for a
pipeline with no client history of its transactions, each anomaly's drawing shows which
transactions consumed its input records (their offset commits moved the group past them) and
wrote its output records (their batches hold them), and says so in words.

The run is a bring-your-own one written by hand: two copiers, each with its own
transactional id. copier-a's transaction #1 consumes input p0 from the start to 4 and writes
ids 0-3 to output p0. copier-b starts from a stale offset: its transaction #1 writes ids 0-1 to
output p1 and commits 2 (backwards: the group had 4), then its transaction #2 consumes 2-6 and
writes ids 2-5. So ids 0-3 are duplicated; ids 2 and 3 were consumed by two transactions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from eoschaos.checkers.history_io import History, load_history
from eoschaos.checkers.lineage.from_logs import Around, LogTransactions, log_txn_of
from eoschaos.checkers.lineage.subgraphs import anomaly_subgraphs
from eoschaos.checkers.log_transactions import offset_commits, producer_rows, transaction_table
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.checks import CheckResult
from eoschaos.contract.history import (
    CONSUMER_OFFSETS_TOPIC,
    LOG_BATCH,
    LOG_BATCH_KIND,
    LOG_BATCHES,
    OFFSET_COMMIT,
    TRANSACTION_STATE_TOPIC,
    TXN_STATE,
    HistoryWriter,
)
from eoschaos.contract.rundir import HISTORY_DIR, write_manifest

INPUT, OUTPUT, GROUP = "input-topic", "output-topic", "copiers"
T0 = time.time()  # the clock the history writers stamp the sends and reads with
COPIER_A, COPIER_B = (100, "copier-a"), (200, "copier-b")
A1, B1, B2 = "logtxn:100.1", "logtxn:200.1", "logtxn:200.2"  # transaction #n of a producer


class Logs:
    """The log rows of transactional copiers, as the run records them (docs/history.md)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.clock = T0
        self.state_at = 0
        self.commit_at = 0

    def _row(self, f: str, topic: str, partition: int, offset: int, params: dict, **more):
        self.clock += 0.01
        self.rows.append(
            {
                "kind": LOG_BATCH_KIND,
                "type": "ok",
                "f": f,
                "process": LOG_BATCHES,
                "time": self.clock,
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "params": json.dumps(params),
                **more,
            }
        )

    def _state(self, producer: tuple[int, str], state: str, partitions: list[str]) -> None:
        params = {
            "producer_id": producer[0],
            "producer_epoch": 0,
            "state": state,
            "partitions": partitions,
            "last_update_ms": round(self.clock * 1000),
        }
        self._row(TXN_STATE, TRANSACTION_STATE_TOPIC, 0, self.state_at, params, txn_id=producer[1])
        self.state_at += 1

    def _batch(self, producer: int, partition: int, offset: int, count: int, control: bool):
        params = {
            "last_offset": offset + count - 1,
            "producer_id": producer,
            "producer_epoch": 0,
            "transactional": True,
            "control": control,
            "create_time": round(self.clock * 1000),
        }
        self._row(LOG_BATCH, OUTPUT, partition, offset, params, count=count)

    def session(self, producer: tuple[int, str]) -> None:
        self._state(producer, "Empty", [])

    def transaction(
        self, producer: tuple[int, str], out: tuple[int, int, int], commits: int
    ) -> None:
        """Write `out` (partition, first offset, records), commit input p0's offset `commits`
        in the transaction, and commit it."""
        partition, first, records = out
        parts = [f"{OUTPUT}-{partition}", f"{CONSUMER_OFFSETS_TOPIC}-0"]
        self._state(producer, "Ongoing", parts)
        self._batch(producer[0], partition, first, records, control=False)
        self._state(producer, "PrepareCommit", parts)
        self._batch(producer[0], partition, first + records, 1, control=True)
        params = {
            "group": GROUP,
            "log_partition": 0,
            "log_offset": self.commit_at,
            "producer_id": producer[0],
            "producer_epoch": 0,
            "transactional": True,
            "marker": "COMMIT",
            "marker_offset": self.commit_at + 1,
            "marker_time": round(self.clock * 1000),
        }
        self._row(OFFSET_COMMIT, INPUT, 0, commits, params)
        self.commit_at += 2
        self._state(producer, "CompleteCommit", [])


# Output records as the final scan reads them: (partition, offset, id)
OUTPUTS = [
    *[(0, offset, offset) for offset in range(4)],  # copier-a #1
    (1, 0, 0),  # copier-b #1
    (1, 1, 1),
    *[(1, 3 + i, 2 + i) for i in range(4)],  # copier-b #2, after #1's marker at p1@2
]


def write_run(run_dir: Path) -> Path:
    run_dir.mkdir(parents=True)
    write_manifest(
        run_dir,
        {"workload": "byo", "mode": "eos", "input_topic": INPUT, "output_topic": OUTPUT},
    )
    with HistoryWriter(run_dir, "seeder") as seeder:
        for id_ in range(6):
            seeder.record("send", "invoke", "send", id=id_, topic=INPUT, partition=0)
            seeder.record("send", "ok", "send", id=id_, topic=INPUT, partition=0, offset=id_)
    with HistoryWriter(run_dir, "final-committed") as scan:
        for id_ in range(6):
            scan.record("read", "ok", "poll", topic=INPUT, partition=0, offset=id_, id=id_)
        for partition, offset, id_ in OUTPUTS:
            scan.record(
                "read", "ok", "poll", topic=OUTPUT, partition=partition, offset=offset, id=id_
            )
    logs = Logs()
    logs.session(COPIER_A)
    logs.transaction(COPIER_A, (0, 0, 4), commits=4)
    logs.session(COPIER_B)
    logs.transaction(COPIER_B, (1, 0, 2), commits=2)
    logs.transaction(COPIER_B, (1, 3, 4), commits=6)
    with (run_dir / HISTORY_DIR / f"{LOG_BATCHES}.jsonl").open("w") as log:
        log.writelines(json.dumps(row) + "\n" for row in logs.rows)
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("copiers") / "run")


@pytest.fixture(scope="module")
def history(spark, run_dir) -> History:
    return load_history(spark, run_dir)


@pytest.fixture(scope="module")
def log_txns(history: History):
    log = history.kind(LOG_BATCH_KIND)
    rows = producer_rows(log, offset_commits(log), (INPUT,), (OUTPUT,))
    return transaction_table(rows, (INPUT, OUTPUT)).cache()


def drawn(history: History, log_txns, check: str, example: dict) -> list[dict]:
    """The anomaly drawings of one failing example (the section's, without its whole-history
    parts)."""
    checks = {check: CheckResult("FAIL", 1, "", examples=[example])}
    return anomaly_subgraphs(history, checks, (INPUT,), (OUTPUT,), 12, log_txns)


def edges(anomaly: dict, kind: str) -> set[tuple[str, str]]:
    return {(e["source"], e["target"]) for e in anomaly["edges"] if e["type"] == kind}


def test_an_input_consumed_by_two_transactions_is_drawn_through_both(history, log_txns):
    [anomaly] = drawn(history, log_txns, "delivery.duplicate", {"id": 2, "copies": 2})
    assert edges(anomaly, "consumed-by") == {("in:2", A1), ("in:2", B2)}
    assert edges(anomaly, "produced") == {(A1, "out:0:2"), (B2, "out:1:3")}
    offsets = {n["label"] for n in anomaly["nodes"] if n["type"] == "offsets"}
    assert offsets == {"p0 the start → 4 (COMMIT)", "p0 2 → 6 (COMMIT)"}


def test_the_words_name_the_transactions_that_consumed_and_wrote_each_record(history, log_txns):
    [anomaly] = drawn(history, log_txns, "delivery.duplicate", {"id": 2, "copies": 2})
    words = anomaly["from_logs"]
    a1 = "transaction #1 of copier-a (producer 100, epoch 0, COMMIT)"
    b2 = "transaction #2 of copier-b (producer 200, epoch 0, COMMIT)"
    assert f"input id 2 at p0@2 was consumed by {a1} and {b2}" in words
    assert f"output p0@2 (id 2) was written by {a1}" in words
    assert f"output p1@3 (id 2) was written by {b2}" in words


def test_a_transaction_whose_commit_went_backwards_consumed_nothing_by_the_logs(history, log_txns):
    """copier-b #1 wrote copies of ids 0 and 1, but its commit (2, after the group's 4) says
    nothing of where it read from: it is drawn as their writer, never as their consumer, and
    its copy keeps the direct edge from the input whose id it carries."""
    [anomaly] = drawn(history, log_txns, "delivery.duplicate", {"id": 0, "copies": 2})
    assert edges(anomaly, "consumed-by") == {("in:0", A1)}
    assert edges(anomaly, "produced") == {(A1, "out:0:0"), (B1, "out:1:0"), ("in:0", "out:1:0")}
    assert B2 not in {node["id"] for node in anomaly["nodes"]}


def test_a_transaction_named_by_its_example_is_drawn_with_its_ranges_and_marked(history, log_txns):
    example = {"txn_id": "copier-b", "producer_id": 200, "producer_epoch": 0, "log_txn_seq": 2}
    [anomaly] = drawn(history, log_txns, "delivery.torn-transaction", example)
    marked = {node["id"] for node in anomaly["nodes"] if node["anomalous"]}
    assert marked == {B2}
    labels = {node["label"] for node in anomaly["nodes"]}
    assert "p1@3..6 (4 records, COMMIT)" in labels
    assert anomaly["from_logs"] == [
        "transaction #2 of copier-b (producer 200, epoch 0, COMMIT) wrote "
        "p1@3..6 (4 records, COMMIT) and committed p0 2 → 6 (COMMIT)"
    ]


def test_the_transactions_around_thousands_of_records_are_found_in_one_query(log_txns):
    """A drawing of a 200-record transaction asks about every record of it, and twelve
    drawings about thousands."""
    inputs = frozenset((0, offset) for offset in range(5000))
    outputs = frozenset((1, offset) for offset in range(5000))
    found = LogTransactions.around(log_txns, [Around(inputs=inputs), Around(outputs=outputs)])
    assert sorted(log_txn_of(row) for row in found.rows) == [(100, 1), (200, 1), (200, 2)]


def test_without_the_logs_table_a_transaction_only_example_is_not_drawn(history):
    example = {"txn_id": "copier-b", "producer_id": 200, "producer_epoch": 0, "log_txn_seq": 2}
    assert drawn(history, None, "delivery.torn-transaction", example) == []


def test_without_the_logs_a_byo_duplicate_is_drawn_input_to_output_with_no_words(history):
    [anomaly] = drawn(history, None, "delivery.duplicate", {"id": 2})
    assert edges(anomaly, "produced") == {("in:2", "out:0:2"), ("in:2", "out:1:3")}
    assert "from_logs" not in anomaly


def test_the_verdict_explains_each_failing_example_from_the_logs(spark, run_dir, tmp_path):
    verdict = check_run(spark, run_dir)
    failed = {name for name, check in verdict["checks"].items() if check["verdict"] == "FAIL"}
    assert {"delivery.duplicate", "delivery.input-committed-twice"} <= failed
    anomalies = {a["check"]: a for a in verdict["lineage"]["anomalies"]}
    twice = anomalies["delivery.input-committed-twice"]
    assert edges(twice, "consumed-by") == {("in:2", A1), ("in:2", B2)}
    assert all(anomaly["from_logs"] for anomaly in anomalies.values())
