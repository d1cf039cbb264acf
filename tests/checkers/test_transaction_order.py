"""Order inside one committed transaction (Jepsen's int-* family), on histories written by hand:
each output record is (transaction, place among its sends, output offset, input offset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoschaos.checkers.findings import tally
from eoschaos.checkers.history_io import load_history
from eoschaos.checkers.transaction_order import transaction_order_findings
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.checks import (
    INT_NONMONOTONIC_POLL,
    INT_NONMONOTONIC_SEND,
    INT_POLL_SKIP,
    INT_SEND_SKIP,
)
from eoschaos.contract.history import FINAL_COMMITTED, HistoryWriter
from eoschaos.contract.rundir import write_manifest

INPUT, OUTPUT = "input-topic", "output-topic"
INPUT_RECORDS = 8  # input partition 0, offsets 0..7, id = offset
IN_TRANSACTION = [INT_NONMONOTONIC_POLL, INT_POLL_SKIP, INT_NONMONOTONIC_SEND]


def write_run(
    run_dir: Path,
    outputs: list[tuple[int, int | None, int, int]],
    sizes: dict[int, int] | None = None,
) -> Path:
    """outputs: (txn_seq of instance 0, txn_index, output offset on partition 0, input offset).
    A transaction's size is the number of its distinct places unless `sizes` says otherwise."""
    places: dict[int, set[int | None]] = {}
    for seq, index, _, _ in outputs:
        places.setdefault(seq, set()).add(index)
    size = {seq: len(indexes) for seq, indexes in places.items()} | (sizes or {})
    run_dir.mkdir(parents=True)
    write_manifest(run_dir, {"workload": "kip447", "mode": "eos", "input_topic": INPUT})
    with HistoryWriter(run_dir, FINAL_COMMITTED) as scan:
        for offset in range(INPUT_RECORDS):
            scan.record("read", "ok", "poll", topic=INPUT, partition=0, offset=offset, id=offset)
        for seq, index, offset, src in outputs:
            scan.record(
                "read",
                "ok",
                "poll",
                topic=OUTPUT,
                partition=0,
                offset=offset,
                id=src,
                src_partition=0,
                src_offset=src,
                instance=0,
                incarnation=1,
                txn_seq=seq,
                txn_size=size[seq],
                txn_id="kip447-0",
                txn_index=index,
                fate="commit",
            )
    return run_dir


def found(spark, tmp_path: Path, outputs, sizes=None) -> dict[str, tuple[int, dict[str, int]]]:
    history = load_history(spark, write_run(tmp_path / "run", outputs, sizes))
    return {
        name: (entry.count, entry.counts)
        for name, entry in tally(transaction_order_findings(history), 10).items()
    }


def test_a_transaction_read_and_sent_in_order_has_no_anomaly(spark, tmp_path):
    assert found(spark, tmp_path, [(0, 0, 0, 0), (0, 1, 1, 1), (1, 0, 2, 2), (1, 1, 3, 3)]) == {}


def test_a_read_back_to_an_earlier_input_offset_is_int_nonmonotonic_poll(spark, tmp_path):
    # reads input 0, 2, 1: a skip from 0 over 1 to 2, then back to 1 (Jepsen counts both)
    outputs = [(0, 0, 0, 0), (0, 1, 1, 2), (0, 2, 2, 1)]
    assert found(spark, tmp_path, outputs) == {
        INT_POLL_SKIP.name: (1, {}),
        INT_NONMONOTONIC_POLL.name: (1, {"backwards": 1}),
    }


def test_a_record_read_twice_in_one_transaction_is_a_repeat(spark, tmp_path):
    outputs = [(0, 0, 0, 0), (0, 1, 1, 0)]
    assert found(spark, tmp_path, outputs) == {INT_NONMONOTONIC_POLL.name: (1, {"repeat": 1})}


def test_an_input_record_stepped_over_is_int_poll_skip(spark, tmp_path):
    outputs = [(0, 0, 0, 0), (0, 1, 1, 3), (1, 0, 2, 1), (1, 1, 3, 2)]
    result = found(spark, tmp_path, outputs)
    assert result == {INT_POLL_SKIP.name: (1, {})}


def test_a_torn_transaction_is_not_judged(spark, tmp_path):
    # transaction 0 sent 3 records (input 0, 1, 2); a stale commit made visible the copies of
    # 0 and 2 only, and transaction 1 wrote all three again: the gap at input 1 is the tear's
    outputs = [(0, 0, 0, 0), (0, 2, 1, 2), (1, 0, 2, 0), (1, 1, 3, 1), (1, 2, 4, 2)]
    assert found(spark, tmp_path, outputs, sizes={0: 3}) == {}


def test_a_later_send_at_a_lower_offset_is_int_nonmonotonic_send(spark, tmp_path):
    outputs = [(0, 1, 0, 1), (0, 0, 1, 0)]
    assert found(spark, tmp_path, outputs) == {INT_NONMONOTONIC_SEND.name: (1, {})}


def test_another_transactions_record_between_two_sends_is_counted_as_int_send_skip(spark, tmp_path):
    outputs = [(0, 0, 0, 0), (1, 0, 1, 2), (0, 1, 2, 1)]
    assert found(spark, tmp_path, outputs) == {INT_SEND_SKIP: (1, {})}


def test_one_send_appended_twice_is_not_read_or_sent_out_of_order(spark, tmp_path):
    outputs = [(0, 0, 0, 0), (0, 0, 1, 0), (0, 1, 2, 1)]
    assert found(spark, tmp_path, outputs) == {}


@pytest.fixture(scope="module")
def unindexed_verdict(spark, tmp_path_factory) -> dict:
    """A run recorded before output records named their place in their transaction."""
    outputs = [(0, None, 0, 0), (0, None, 1, 1)]
    return check_run(spark, write_run(tmp_path_factory.mktemp("old") / "run", outputs))


@pytest.mark.parametrize("check", IN_TRANSACTION)
def test_without_send_places_the_int_checks_are_not_applicable(unindexed_verdict, check):
    assert "eoschaos.txn.index" in unindexed_verdict["not_applicable"][check.name]


def test_int_send_skip_is_in_the_verdicts_statistics_and_fails_no_check(spark, tmp_path):
    verdict = check_run(
        spark, write_run(tmp_path / "run", [(0, 0, 0, 0), (1, 0, 1, 2), (0, 1, 2, 1)])
    )
    interleaved = verdict["stats"]["transactions"][INT_SEND_SKIP]
    assert (interleaved["count"], interleaved["examples"][0]["offset"]) == (1, 2)
    assert all(verdict["checks"][check.name]["verdict"] == "PASS" for check in IN_TRANSACTION)
