"""The client's transactions against the brokers' logs, per transaction
(eoschaos.checkers.agreement): on a synthetic eos run written with its brokers' logs, every
client transaction pairs with one coordinator transaction of the same fate and records; each
test then breaks one side of one transaction the way a client, broker or reader bug would, and
the agreement (the verdict's stats.transactions.agreement) names it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from eoschaos.checkers.agreement import fate_counts, history_agreement
from eoschaos.checkers.history_io import load_history
from eoschaos.checkers.log_transactions import offset_commits, producer_rows
from eoschaos.checkers.log_transactions import transaction_table as log_transaction_table
from eoschaos.checkers.transactions import outcome_counts, transaction_table
from eoschaos.contract.history import FINAL_UNCOMMITTED, LOG_BATCH, LOG_BATCH_KIND, LOG_BATCHES
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.testing import RunShape, generate

SHAPE = RunShape(broker_logs=True)
PROCESSOR = "processor-0.1"  # instance 0's only incarnation


@pytest.fixture(scope="module")
def logged_run(spark, tmp_path_factory) -> Path:
    """The correct synthetic run with its brokers' logs, written once; each test judges a copy."""
    return generate(spark, tmp_path_factory.mktemp("logged"), SHAPE, parquet=False).run_dir


@pytest.fixture
def agreement_after(spark, logged_run, tmp_path) -> Callable[..., dict]:
    """The verdict's agreement once `change` rewrote the events of one writer of a copy of the
    run: `change(events)` edits the list of that writer's events in place."""

    def judge(writer: str, change: Callable[[list[dict]], None]) -> dict:
        run_dir = shutil.copytree(logged_run, tmp_path / "run")
        path = run_dir / HISTORY_DIR / f"{writer}.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines()]
        change(events)
        path.write_text("".join(json.dumps(event) + "\n" for event in events))
        return _agreement(spark, run_dir)

    return judge


def _agreement(spark, run_dir: Path) -> dict:
    """The agreement alone, from the tables the verdict builds for it (a whole verdict per
    test would judge every check again)."""
    history = load_history(spark, run_dir)
    try:
        log = history.kind(LOG_BATCH_KIND)
        topics = history.topics
        log_rows = producer_rows(log, offset_commits(log), topics.inputs, topics.written)
        log_txns = log_transaction_table(log_rows, topics.all)
        txns = [row.asDict() for row in transaction_table(history).collect()]
        table = [row.asDict(recursive=True) for row in log_txns.collect()]
        counts = (outcome_counts(txns), fate_counts(table))
        return history_agreement(history, txns, log_txns, log_rows, counts, 5)
    finally:
        history.release()


def _seq_of_first(events: list[dict], f: str) -> int:
    return next(e["txn_seq"] for e in events if e.get("f") == f)


def test_every_transaction_of_a_correct_run_pairs_with_one_of_the_logs(agreement_after):
    agreement = agreement_after(PROCESSOR, lambda events: None)
    assert (agreement["transactions"], agreement["counts"]) == (SHAPE.attempts, {})
    assert agreement["disagreements"] == []


def test_a_commit_the_client_saw_where_the_coordinator_aborted_disagrees_on_fate(
    agreement_after,
):
    def abort_told_committed(events: list[dict]) -> None:
        seq = _seq_of_first(events, "abort")
        for event in events:
            if event.get("txn_seq") == seq and event["f"] == "abort":
                event["f"] = "commit"

    agreement = agreement_after(PROCESSOR, abort_told_committed)
    assert agreement["counts"] == {"committed-count": 1, "fate": 1}
    [fate] = [d for d in agreement["disagreements"] if d["kind"] == "fate"]
    assert (fate["instance"], fate["outcome"]) == (0, "committed")
    assert [log["fate"] for log in fate["logs"]] == ["ABORT"]


def test_a_record_whose_headers_name_another_transaction_splits_one_and_is_shared_by_another(
    agreement_after,
):
    """A record of one transaction read as the next one's: the next one's records lie in two
    of the coordinator's transactions, and the first one's holds records of two clients."""

    def relabelled(events: list[dict]) -> None:
        record = next(e for e in events if e.get("topic") == "output-topic" and e["instance"] == 0)
        record["txn_seq"] += 2  # instance 0's next attempt

    agreement = agreement_after(FINAL_UNCOMMITTED, relabelled)
    assert agreement["counts"] == {"split": 1, "shared": 1}
    shared = next(d for d in agreement["disagreements"] if d["kind"] == "shared")
    assert len(shared["clients"]) == 2


def test_a_committed_transaction_whose_batch_the_logs_lack_is_unplaced(agreement_after):
    def first_batch_lost(events: list[dict]) -> None:
        events.remove(next(e for e in events if e["f"] == LOG_BATCH and e["offset"] == 0))

    agreement = agreement_after(LOG_BATCHES, first_batch_lost)
    assert agreement["counts"]["unplaced"] == 1
    [unplaced] = [d for d in agreement["disagreements"] if d["kind"] == "unplaced"]
    assert (unplaced["outcome"], unplaced["unplaced"]) == ("committed", SHAPE.per_partition)


def test_a_committed_transaction_the_client_produced_more_records_for_disagrees_on_records(
    agreement_after,
):
    def one_more(events: list[dict]) -> None:
        seq = _seq_of_first(events, "commit")
        produce = next(e for e in events if e.get("txn_seq") == seq and e["f"] == "produce")
        produce["count"] += 1

    agreement = agreement_after(PROCESSOR, one_more)
    assert agreement["counts"] == {"records": 1}
    [records] = agreement["disagreements"]
    assert (records["produced"], records["logs"][0]["records"]) == (
        SHAPE.txn_size + 1,
        SHAPE.txn_size,
    )
