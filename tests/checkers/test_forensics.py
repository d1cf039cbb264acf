"""Broker-log forensics: each failed example's records placed in the batches the brokers wrote,
and the pattern the headers show stated in words."""

from __future__ import annotations

import json

import pytest

from eoschaos.checkers.forensics import forensics_section, pattern
from eoschaos.checkers.history_io import load_history
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.checks import results_of
from eoschaos.contract.history import LOG_BATCH_KIND, LOG_BATCHES
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.testing import Plants, RunShape, generate


def place(
    producer: int,
    epoch: int = 0,
    sequence: int = 0,
    aborted_at: int | None = None,
    topic: str = "output-topic",
    transactional: bool = True,
):
    batch = {
        "producer_id": producer,
        "producer_epoch": epoch,
        "base_sequence": sequence,
        "transactional": transactional,
    }
    return {"topic": topic, "offset": 7, "batch": batch, "aborted_by_marker_at": aborted_at}


@pytest.mark.parametrize(
    ("places", "words"),
    [
        ([place(1000), place(2001)], "appended by different producers (1000, 2001): the"),
        (
            [place(1, transactional=False), place(1001, transactional=False)],
            "different producers (1, 1001), neither in a transaction",
        ),
        ([place(5, epoch=0), place(5, epoch=1)], "under epochs 0, 1: its epoch was bumped"),
        ([place(5, sequence=3), place(5, sequence=9)], "different sequence numbers (3, 9)"),
        ([place(-1), place(-1)], "without idempotence (producer id -1)"),
        (
            [place(5, sequence=3, topic="enriched"), place(5, sequence=4, topic="rejected")],
            "one producer (5, epoch 0) appended the copies to enriched, rejected",
        ),
    ],
)
def test_two_copies_of_a_record_are_explained_by_their_batches(places, words):
    assert words in pattern("delivery.duplicate", places)


def test_a_record_read_from_an_aborted_transaction_is_named_with_its_marker():
    words = pattern("isolation.aborted-read", [place(7, aborted_at=47)])
    assert "transaction of producer 7 that was aborted (ABORT marker at offset 47)" in words


def test_copies_in_one_producers_one_batch_sequence_show_no_pattern():
    assert pattern("delivery.duplicate", [place(5), place(5)]) is None


@pytest.fixture(scope="module")
def duplicated(spark, tmp_path_factory):
    """A synthetic run with one planted duplicate, checked once."""
    run = generate(spark, tmp_path_factory.mktemp("dup"), RunShape(), Plants(duplicate=1))
    verdict = check_run(spark, run.run_dir, lineage=False)
    return run, verdict


def _write_batches(run_dir, batches: list[dict]) -> None:
    with (run_dir / HISTORY_DIR / f"{LOG_BATCHES}.jsonl").open("w") as out:
        for topic, partition, first, last, producer in batches:
            params = {"last_offset": last, "producer_id": producer, "producer_epoch": 0}
            event = {
                "kind": LOG_BATCH_KIND,
                "type": "ok",
                "f": "batch",
                "process": LOG_BATCHES,
                "time": 1.0,
                "topic": topic,
                "partition": partition,
                "offset": first,
                "count": last - first + 1,
                "params": json.dumps(params | {"base_sequence": 0, "node": 1}),
            }
            out.write(json.dumps(event) + "\n")


def test_a_duplicates_copies_are_found_in_their_batches_and_explained(spark, duplicated):
    run, verdict = duplicated
    example = verdict["checks"]["delivery.duplicate"]["examples"][0]
    first, last = example["first"], example["last"]
    _write_batches(
        run.run_dir,
        [
            ("output-topic", first["partition"], first["offset"], first["offset"] + 2, 1000),
            ("output-topic", last["partition"], last["offset"] - 1, last["offset"], 2001),
        ],
    )
    section = forensics_section(load_history(spark, run.run_dir), results_of(verdict))
    assert section["recorded"] is True
    [found] = section["examples"]
    assert (found["check"], found["id"]) == ("delivery.duplicate", example["id"])
    assert [p["batch"]["producer_id"] for p in found["places"]] == [1000, 2001]
    assert [p["batch"]["first"] for p in found["places"]] == [first["offset"], last["offset"] - 1]
    assert "different producers (1000, 2001)" in found["pattern"]


def test_a_history_without_batch_headers_says_so(spark, tmp_path):
    run = generate(spark, tmp_path, RunShape(), Plants(duplicate=1))
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert verdict["forensics"] == {"recorded": False, "examples": []}


def test_a_passing_history_costs_no_forensics(spark, tmp_path):
    run = generate(spark, tmp_path, RunShape())
    assert check_run(spark, run.run_dir, lineage=False)["forensics"] == {
        "recorded": None,
        "examples": [],
    }
