"""The end state is written whole or not at all: a run killed while it is read (the
open-transactions tool is a JVM that takes seconds) must leave no part of it, or its re-check
would take the missing open transactions for none and call an unfinished run complete.
Found by a kill trial (docs/benchmarks.md, "Kill trials")."""

from __future__ import annotations

import json

import pytest

from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.workloads.harness import final


class Killed(Exception):
    """Stands in for the SIGKILL that ends the harness while the last part is read."""


@pytest.fixture
def end_state_readers(monkeypatch):
    """Every part but the open transactions reads as a cluster would answer it."""
    monkeypatch.setattr(final, "admin_for", lambda bootstrap: None)
    monkeypatch.setattr(final, "end_offsets", lambda admin, topic, committed: {0: 7, 1: 9})
    monkeypatch.setattr(
        final, "_group_offsets_retrying", lambda *args: {("in", 0): 7, ("in", 1): 9}
    )


def _record(run_dir):
    final.record_end_state(
        "127.0.0.1:1",
        run_dir,
        None,
        input_topics=("in",),
        output_topics=("out",),
        group="g",
        txn_ids=None,
    )


def _rows(run_dir) -> list[dict]:
    path = run_dir / HISTORY_DIR / f"{final.END_STATE}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_an_end_state_cut_short_while_it_is_read_leaves_no_rows(
    end_state_readers, monkeypatch, tmp_path
):
    def killed_while_listing(*args):
        raise Killed

    monkeypatch.setattr(final, "open_transactions", killed_while_listing)
    with pytest.raises(Killed):
        _record(tmp_path)
    assert _rows(tmp_path) == []


def test_a_whole_end_state_has_every_part(end_state_readers, monkeypatch, tmp_path):
    hanging = {"TransactionalId": "t-1", "TransactionState": "Ongoing"}
    monkeypatch.setattr(final, "open_transactions", lambda *args: [hanging])
    _record(tmp_path)
    kinds = [row["f"] for row in _rows(tmp_path)]
    assert kinds == ["log-end"] * 4 + ["group-offset"] * 2 + ["open-txn"]
