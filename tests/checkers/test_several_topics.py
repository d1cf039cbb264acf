"""A run with several input topics, an output topic and a dead-letter topic (byo's
--input-topics, --output-topics, --dead-letter-topics), judged from histories written by hand.

Orders arrive on two input topics, one partition each, so both topics hold records at the
same offsets: ids 0, 2, 4, 6 on web-orders p0@0-3, ids 1, 3, 5, 7 on shop-orders p0@0-3. The
pipeline writes each order to `enriched`, or to `rejected` (the dead-letter topic) if it
refuses it. Delivery judges each id once across both; a planted fault puts one id into both
topics, another twice into one, and drops a third. Declared as a fan-out topic, `audit` must
hold every id once on its own.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eoschaos.checkers.verdict import check_run
from eoschaos.contract.history import END_STATE, FINAL_COMMITTED, HistoryWriter
from eoschaos.contract.rundir import write_manifest

WEB, SHOP, ENRICHED, REJECTED = "web-orders", "shop-orders", "enriched", "rejected"
IDS = range(8)
T0 = time.time()


def _input_place(id_: int) -> tuple[str, int]:
    return (WEB if id_ % 2 == 0 else SHOP), id_ // 2


def write_run(
    run_dir: Path,
    outputs: list[tuple[str, int]],
    committed: dict[str, int] | None = None,
    fan_outs: tuple[str, ...] = (),
) -> Path:
    """A finished run whose final committed scan found `outputs` (topic, id), in order, and
    whose group committed `committed` (input topic -> offset of its one partition; by
    default the end of each)."""
    run_dir.mkdir(parents=True)
    write_manifest(
        run_dir,
        {
            "workload": "byo",
            "mode": "eos",
            "input_topic": WEB,
            "output_topic": ENRICHED,
            "input_topics": [WEB, SHOP],
            "dead_letter_topics": [REJECTED],
            "fan_out_topics": list(fan_outs),
        },
    )
    with HistoryWriter(run_dir, "seeder") as seeder:
        for id_ in IDS:
            topic, offset = _input_place(id_)
            at = T0 + id_ * 0.01
            seeder.record("send", "invoke", "send", id=id_, topic=topic, partition=0, time=at)
            seeder.record(
                "send", "ok", "send", id=id_, topic=topic, partition=0, offset=offset, time=at
            )
    ends: dict[str, int] = {WEB: 4, SHOP: 4, ENRICHED: 0, REJECTED: 0, **dict.fromkeys(fan_outs, 0)}
    with HistoryWriter(run_dir, FINAL_COMMITTED) as scan:
        for id_ in IDS:
            topic, offset = _input_place(id_)
            scan.record("read", "ok", "poll", id=id_, topic=topic, partition=0, offset=offset)
        for topic, id_ in outputs:
            offset, ends[topic] = ends[topic], ends[topic] + 1
            scan.record("read", "ok", "poll", id=id_, topic=topic, partition=0, offset=offset)
    with HistoryWriter(run_dir, END_STATE) as end:
        for topic, offset in ends.items():
            end.record("end", "ok", "log-end", topic=topic, partition=0, offset=offset, lso=offset)
        for topic, offset in (committed or {WEB: 4, SHOP: 4}).items():
            end.record("end", "ok", "group-offset", topic=topic, partition=0, offset=offset)
    return run_dir


CORRECT = [(ENRICHED, id_) for id_ in range(6)] + [(REJECTED, 6), (REJECTED, 7)]
# id 2 both enriched and rejected, id 4 enriched twice, id 5 nowhere
FAULTY = [
    (ENRICHED, 0),
    (ENRICHED, 1),
    (ENRICHED, 2),
    (REJECTED, 2),
    (ENRICHED, 3),
    (ENRICHED, 4),
    (ENRICHED, 4),
    (REJECTED, 6),
    (REJECTED, 7),
]


@pytest.fixture(scope="module")
def correct(spark, tmp_path_factory):
    run_dir = write_run(tmp_path_factory.mktemp("several") / "correct", CORRECT)
    return check_run(spark, run_dir, lineage=False)


@pytest.fixture(scope="module")
def faulty(spark, tmp_path_factory):
    run_dir = write_run(tmp_path_factory.mktemp("several") / "faulty", FAULTY)
    return check_run(spark, run_dir)


def test_an_id_in_the_dead_letter_topic_counts_as_delivered(correct):
    for name in ("delivery.lost", "delivery.duplicate", "delivery.phantom"):
        assert correct["checks"][name]["verdict"] == "PASS", name
    assert correct["stats"]["output_committed"] == 8


def test_records_of_two_input_topics_at_the_same_offsets_are_not_confused(correct):
    assert correct["checks"]["delivery.duplicate-input"]["verdict"] == "PASS"
    assert correct["checks"]["isolation.inconsistent-offsets"]["verdict"] == "PASS"
    assert correct["stats"]["input_records"] == 8


def test_an_id_in_an_output_and_the_dead_letter_topic_is_a_duplicate(faulty):
    duplicate = faulty["checks"]["delivery.duplicate"]
    assert duplicate["verdict"] == "FAIL" and duplicate["count"] == 2
    both = next(e for e in duplicate["examples"] if e["id"] == 2)
    assert (both["first"]["topic"], both["last"]["topic"]) == (ENRICHED, REJECTED)
    twice = next(e for e in duplicate["examples"] if e["id"] == 4)
    assert twice["first"]["topic"] == twice["last"]["topic"] == ENRICHED


def test_a_lost_record_names_its_input_topic(faulty):
    lost = faulty["checks"]["delivery.lost"]
    assert lost["verdict"] == "FAIL" and lost["count"] == 1
    assert lost["examples"][0] | {"acked": True} == {
        "id": 5,
        "partition": 0,
        "offset": 2,
        "topic": SHOP,
        "acked": True,
    }


def test_a_duplicate_across_topics_is_drawn_with_both_copies(faulty):
    drawn = next(a for a in faulty["lineage"]["anomalies"] if a["check"] == "delivery.duplicate")
    outputs = {n["id"] for n in drawn["nodes"] if n["type"] == "output"}
    assert outputs == {"out:0:2", f"out:{REJECTED}:0:0"}


def test_a_record_the_group_never_moved_past_is_unseen_on_its_own_input_topic(spark, tmp_path):
    """Both topics hold a record at offset 2 whose output is missing (ids 4 and 5): the group
    moved past web-orders' (lost) but not shop-orders' (unseen)."""
    outputs = [(ENRICHED, id_) for id_ in (0, 1, 2, 3, 6, 7)]
    run = write_run(tmp_path / "run", outputs, committed={WEB: 4, SHOP: 2})
    verdict = check_run(spark, run)
    lost, unseen = (verdict["checks"][name] for name in ("delivery.lost", "liveness.unseen"))
    assert [(e["id"], e["topic"]) for e in lost["examples"]] == [(4, WEB)]
    assert unseen["verdict"] == "FAIL" and unseen["count"] == 1
    assert unseen["examples"][0] | {"acked": True} == {
        "id": 5,
        "topic": SHOP,
        "partition": 0,
        "offset": 2,
        "group_offset": 2,
        "acked": True,
    }
    drawn = next(a for a in verdict["lineage"]["anomalies"] if a["check"] == "liveness.unseen")
    assert drawn["nodes"], drawn


def test_every_input_record_past_the_groups_offsets_is_not_unseen(correct):
    assert correct["checks"]["liveness.unseen"]["verdict"] == "PASS"


def test_the_group_is_judged_on_every_input_topic(correct, spark, tmp_path):
    assert correct["checks"]["liveness.group-offsets"]["verdict"] == "PASS"
    behind = write_run(tmp_path / "behind", CORRECT, committed={WEB: 4, SHOP: 3})
    group = check_run(spark, behind, lineage=False)["checks"]["liveness.group-offsets"]
    assert group["verdict"] == "FAIL"
    assert group["examples"][0] == {
        "topic": SHOP,
        "partition": 0,
        "group_offset": 3,
        "log_end": 4,
        "stalled_since_s": 0.1,  # id 7, the first it never committed past, sent at 0.07 s
    }


def test_the_verdict_lists_the_ids_in_each_dead_letter_topic(correct):
    assert correct["stats"]["dead_letters"] == {REJECTED: {"records": 2, "ids": [6, 7]}}


AUDIT = "audit"


def test_a_fan_out_topic_holding_each_id_once_passes(spark, tmp_path):
    audited = CORRECT + [(AUDIT, id_) for id_ in IDS]
    verdict = check_run(spark, write_run(tmp_path / "run", audited, fan_outs=(AUDIT,)))
    assert verdict["verdict"] == "PASS", {
        name: check["examples"] for name, check in verdict["checks"].items() if check["count"]
    }


def test_a_fan_out_topic_missing_an_id_or_holding_it_twice_fails_naming_the_topic(spark, tmp_path):
    audited = CORRECT + [(AUDIT, id_) for id_ in (0, 1, 1, 2, 4, 5, 6, 7)]  # 1 twice, no 3
    checks = check_run(
        spark, write_run(tmp_path / "run", audited, fan_outs=(AUDIT,)), lineage=False
    )["checks"]
    (lost,) = checks["delivery.lost"]["examples"]
    assert (lost["id"], lost["missing_from"]) == (3, AUDIT)
    (duplicate,) = checks["delivery.duplicate"]["examples"]
    assert (duplicate["id"], duplicate["topic"], duplicate["copies"]) == (1, AUDIT, 2)
