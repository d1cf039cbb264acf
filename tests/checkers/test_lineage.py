"""Offset lineage: whole-history graph stats, anomaly subgraphs, dependency cycles.

Histories are written by hand with HistoryWriter so every node and edge count is known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from eoschaos.checkers.history_io import History, load_history
from eoschaos.checkers.lineage import lineage_section
from eoschaos.checkers.lineage.cycles import dependency_cycles, find_cycles, realtime_edges
from eoschaos.checkers.lineage.subgraphs import (
    MAX_NODES_PER_TYPE,
    anomaly_subgraphs,
    lineage_graph,
    serialize,
)
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.checks import CheckResult, results_of
from eoschaos.contract.history import HistoryWriter
from eoschaos.contract.rundir import write_manifest
from eoschaos.testing import PLANT_CHECKS, Plants, generate

INPUT, OUTPUT = "input-topic", "output-topic"


@dataclass
class Txn:
    """A processor transaction and the output records it wrote: (id, partition, offset)."""

    instance: int
    seq: int
    outputs: list[tuple[int, int, int]]
    fate: str = "commit"
    incarnation: int = 0

    @property
    def key(self) -> str:
        return f"{self.instance}.{self.incarnation}.{self.seq}"


# A correct run: inputs 0..7 (input partition id % 2, offset id // 2); transaction 1.0.0
# aborts and id 1 is redone by 1.0.1.
CLEAN = [
    Txn(0, 0, [(0, 0, 0), (2, 1, 0)]),
    Txn(0, 1, [(4, 0, 1), (6, 1, 1)]),
    Txn(1, 0, [(1, 0, 2)], fate="abort"),
    Txn(1, 1, [(1, 0, 3), (3, 1, 2)]),
    Txn(1, 2, [(5, 0, 4), (7, 1, 3)]),
]
# Planted: id 2 written again by a zombie transaction 2.0.0 (duplicate); id 7 never processed
# (lost); the observer read the aborted record at output p0@2.
PLANTED = [
    *CLEAN[:4],
    Txn(1, 2, [(5, 0, 4)]),
    Txn(2, 0, [(2, 0, 5)]),
]


def write_run(run_dir: Path, txns: list[Txn], *, ids: range = range(8), dirty_reads=()) -> Path:
    run_dir.mkdir(parents=True)
    write_manifest(run_dir, {"workload": "kip447", "mode": "eos", "input_topic": INPUT})
    with HistoryWriter(run_dir, "seeder") as seeder:
        for id_ in ids:
            seeder.record("send", "invoke", "send", id=id_, topic=INPUT, partition=id_ % 2)
            seeder.record("send", "ok", "send", id=id_, partition=id_ % 2, offset=id_ // 2)
    records: list[tuple[Txn, dict]] = []
    for txn in txns:
        with HistoryWriter(run_dir, f"processor-{txn.instance}.{txn.incarnation}") as writer:
            common = {
                "instance": txn.instance,
                "incarnation": txn.incarnation,
                "txn_seq": txn.seq,
                "txn_id": f"kip447-{txn.instance}",
                "generation": 1,
            }
            consumed = [{"partition": i % 2, "offset": i // 2 + 1} for i, _, _ in txn.outputs]
            writer.record("txn", "invoke", "begin", fate=txn.fate, **common)
            writer.record("txn", "ok", "produce", count=len(txn.outputs), **common)
            writer.record("txn", "ok", "send-offsets", offsets=consumed[-1:], **common)
            writer.record("txn", "invoke", txn.fate, **common)
            writer.record("txn", "ok", txn.fate, **common)
        for id_, partition, offset in txn.outputs:
            record = {
                "topic": OUTPUT,
                "partition": partition,
                "offset": offset,
                "id": id_,
                "src_partition": id_ % 2,
                "src_offset": id_ // 2,
                "fate": txn.fate,
                "txn_size": len(txn.outputs),
                **common,
            }
            records.append((txn, record))
    for reader in ("observer", "final-committed", "final-uncommitted"):
        with HistoryWriter(run_dir, reader) as writer:
            if reader.startswith("final"):
                for id_ in ids:
                    place = {"partition": id_ % 2, "offset": id_ // 2}
                    writer.record("read", "ok", "poll", topic=INPUT, id=id_, **place)
            for txn, record in records:
                visible = txn.fate == "commit" or reader == "final-uncommitted"
                if visible or (reader == "observer" and txn.key in dirty_reads):
                    writer.record("read", "ok", "poll", **record)
    return run_dir


def failing(name: str, *examples: dict) -> dict[str, CheckResult]:
    return {name: CheckResult("FAIL", len(examples), "", examples=list(examples))}


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory) -> History:
    return load_history(spark, write_run(tmp_path_factory.mktemp("clean") / "run", CLEAN))


@pytest.fixture(scope="module")
def planted(spark, tmp_path_factory) -> History:
    run_dir = tmp_path_factory.mktemp("planted") / "run"
    return load_history(spark, write_run(run_dir, PLANTED, dirty_reads={"1.0.0"}))


@pytest.fixture(scope="module")
def clean_section(clean: History) -> dict:
    passing = {"delivery.lost": CheckResult("PASS", 0, "")}
    return lineage_section(clean, passing)


@pytest.fixture(scope="module")
def planted_section(planted: History) -> dict:
    """Example rows shaped as the checkers report them."""
    checks = {
        **failing("delivery.duplicate", {"id": 2, "copies": 2}),
        **failing("delivery.lost", {"id": 7, "partition": 1, "offset": 3, "acked": True}),
        **failing(
            "isolation.aborted-read",
            {"partition": 0, "offset": 2, "id": 1, "reader": "observer", "fate": "abort"}
            | {"instance": 1, "incarnation": 0, "txn_seq": 0},
        ),
        **failing("fencing.zombie-write", {"instance": 2, "incarnation": 0, "txn_seq": 0}),
    }
    return lineage_section(planted, checks)


def anomaly(section: dict, check: str) -> dict:
    return next(a for a in section["anomalies"] if a["check"] == check)


def marked(drawing: dict) -> set[str]:
    return {node["id"] for node in drawing["nodes"] if node["anomalous"]}


def test_stats_count_every_node_and_edge_type_of_the_history(clean_section):
    stats = clean_section["stats"]
    assert stats["nodes"] == {"input": 8, "txn": 5, "output": 9, "read": 25, "offsets": 5}
    assert stats["edges"] == {
        "consumed-by": 9,  # id 1 was consumed by the aborted 1.0.0 and by 1.0.1
        "produced": 9,
        "read-by": 25,  # observer and final-committed read 8 outputs, final-uncommitted 9
        "committed-offsets": 5,
    }
    assert stats["committed_transactions"] == 4
    assert stats["transactions_per_input_partition"] == {"0": 2, "1": 3}


def test_stats_of_a_correct_run_show_one_committed_output_per_input(clean_section):
    stats = clean_section["stats"]
    assert stats["committed_outputs_per_input_max"] == 1
    assert stats["inputs_without_consumer"] == 0
    assert stats["inputs_without_committed_output"] == 0
    assert stats["inputs_with_several_committed_outputs"] == 0


def test_stats_show_the_duplicated_and_the_lost_input(planted_section):
    stats = planted_section["stats"]
    assert stats["committed_outputs_per_input_max"] == 2
    assert stats["inputs_with_several_committed_outputs"] == 1
    assert stats["inputs_without_consumer"] == 1
    assert stats["inputs_without_committed_output"] == 1


def test_stats_keep_apart_transactions_whose_fields_do_not_fit_one_long(spark, tmp_path):
    # 1.0.2**32 (the aborted attempt of id 1) and 1.1.0 (its redo) pack to the same long
    unfit = [
        *CLEAN[:2],
        Txn(1, 2**32, [(1, 0, 2)], fate="abort"),
        Txn(1, 0, [(1, 0, 3), (3, 1, 2)], incarnation=1),
        CLEAN[4],
    ]
    stats = lineage_section(load_history(spark, write_run(tmp_path / "run", unfit)), {})["stats"]
    assert stats["nodes"]["txn"] == 5
    assert stats["edges"]["consumed-by"] == 9  # id 1 by the aborted attempt and by its redo


def test_passing_checks_draw_no_anomaly(clean_section):
    assert clean_section["anomalies"] == []


def test_duplicate_subgraph_holds_the_input_and_both_committed_outputs_marked(planted_section):
    drawing = anomaly(planted_section, "delivery.duplicate")
    outputs = {node["id"] for node in drawing["nodes"] if node["type"] == "output"}
    assert outputs == {"out:1:0", "out:0:5"}
    assert marked(drawing) == {"in:2", "out:1:0", "out:0:5"}
    consumers = {edge["target"] for edge in drawing["edges"] if edge["source"] == "in:2"}
    assert consumers == {"txn:0.0.0", "txn:2.0.0"}


def test_lost_input_has_no_outgoing_edge(planted_section):
    drawing = anomaly(planted_section, "delivery.lost")
    assert marked(drawing) == {"in:7"}
    assert [edge for edge in drawing["edges"] if edge["source"] == "in:7"] == []
    assert not any(node["type"] == "output" for node in drawing["nodes"])


def test_aborted_read_marks_the_read_of_an_aborted_transaction(planted_section):
    drawing = anomaly(planted_section, "isolation.aborted-read")
    assert marked(drawing) == {"read:observer:0:2"}
    labels = {node["id"]: node["label"] for node in drawing["nodes"]}
    assert labels["txn:1.0.0"].endswith("aborted")
    assert {"source": "txn:1.0.0", "target": "out:0:2", "type": "produced"} in drawing["edges"]
    assert {"source": "out:0:2", "target": "read:observer:0:2", "type": "read-by"} in (
        drawing["edges"]
    )


def test_zombie_write_marks_the_transaction_with_its_committed_offsets(planted_section):
    drawing = anomaly(planted_section, "fencing.zombie-write")
    assert marked(drawing) == {"txn:2.0.0"}
    assert {
        "source": "txn:2.0.0",
        "target": "offsets:2.0.0:0",
        "type": "committed-offsets",
    } in drawing["edges"]


def test_max_anomalies_bounds_the_number_of_subgraphs(planted):
    checks = failing("delivery.lost", *({"id": id_} for id_ in range(8)))
    assert len(anomaly_subgraphs(planted, checks, (INPUT,), (OUTPUT,), max_anomalies=3)) == 3


def test_every_failing_check_is_drawn_before_any_is_drawn_twice(planted):
    checks = {
        **failing("delivery.lost", *({"id": id_} for id_ in range(8))),
        **failing("delivery.duplicate", {"id": 2}),
    }
    drawn = anomaly_subgraphs(planted, checks, (INPUT,), (OUTPUT,), max_anomalies=2)
    assert [a["check"] for a in drawn] == ["delivery.lost", "delivery.duplicate"]


def test_every_record_anomaly_the_checkers_report_is_drawn_with_its_nodes_marked(spark, tmp_path):
    run = generate(spark, tmp_path / "run", plants=Plants(**dict.fromkeys(PLANT_CHECKS, 1)))
    checks = results_of(check_run(spark, run.run_dir, lineage=False))
    failed = {name for name, check in checks.items() if check.failed}
    drawn = anomaly_subgraphs(load_history(spark, run.run_dir), checks, (INPUT,), (OUTPUT,), 20)
    # liveness examples name partitions and transactional.ids (unseen's name input records),
    # aggregate ones keys, stale commits a transactional.id and a moment: no lineage
    not_records = ("liveness.", "aggregate.", "fencing.stale-commit")
    records = {n for n in failed if not n.startswith(not_records) or n == "liveness.unseen"}
    assert {a["check"] for a in drawn} == records
    assert all(marked(drawing) for drawing in drawn)


def test_serial_transactions_form_no_cycle(clean_section):
    cycles = clean_section["cycles"]
    assert (cycles["G0"], cycles["G1c"], cycles["examples"]) == (0, 0, [])
    assert cycles["ww_edges"] == 3  # 0.0.0 → 0.0.1 → 1.0.1 → 1.0.2 on both partitions


def test_transactions_interleaved_across_partitions_form_a_g0_cycle(spark, tmp_path):
    crossed = [Txn(0, 0, [(0, 0, 0), (2, 1, 1)]), Txn(1, 0, [(1, 0, 1), (3, 1, 0)])]
    history = load_history(spark, write_run(tmp_path / "run", crossed, ids=range(4)))
    cycles = dependency_cycles(history, (INPUT,), (OUTPUT,))
    assert (cycles["G0"], cycles["G1c"]) == (1, 0)
    assert cycles["examples"][0]["cycle"] == ["0.0.0", "1.0.0", "0.0.0"]
    assert "not part of the verdict" in cycles["note"]


def test_serial_transactions_form_no_process_or_realtime_cycle(clean_section):
    cycles = clean_section["cycles"]
    assert (cycles["G0-process"], cycles["G0-realtime"]) == (0, 0)
    assert cycles["process_edges"] == 2  # 0.0.0 → 0.0.1 and 1.0.1 → 1.0.2: 1.0.0 aborted
    assert cycles["realtime_edges"] == 3  # written one after another: a chain of the four


def test_a_cycle_through_one_processors_order_is_g0_process_and_g0_realtime(spark, tmp_path):
    # 0.0.0 then 0.0.1 in one process; ww 0.0.1 → 1.0.0 on p0 and 1.0.0 → 0.0.0 on p1
    txns = [Txn(0, 0, [(3, 1, 1)]), Txn(0, 1, [(0, 0, 0)]), Txn(1, 0, [(2, 0, 1), (1, 1, 0)])]
    history = load_history(spark, write_run(tmp_path / "run", txns, ids=range(4)))
    cycles = dependency_cycles(history, (INPUT,), (OUTPUT,))
    assert (cycles["G0"], cycles["G0-process"], cycles["G0-realtime"]) == (0, 1, 1)
    example = next(e for e in cycles["examples"] if e["anomaly"] == "G0-process")
    assert example["cycle"] == ["0.0.0", "0.0.1", "1.0.0", "0.0.0"]
    assert [edge["type"] for edge in example["edges"]] == ["process", "ww", "ww"]


def test_a_ww_cycle_against_the_order_transactions_ran_in_is_also_g0_realtime(spark, tmp_path):
    crossed = [Txn(0, 0, [(0, 0, 0), (2, 1, 1)]), Txn(1, 0, [(1, 0, 1), (3, 1, 0)])]
    history = load_history(spark, write_run(tmp_path / "run", crossed, ids=range(4)))
    cycles = dependency_cycles(history, (INPUT,), (OUTPUT,))
    assert (cycles["G0"], cycles["G0-process"], cycles["G0-realtime"]) == (1, 0, 1)
    assert cycles["implies"]["G0"] == ["G0-process", "G1c"]


def test_realtime_edges_skip_an_order_another_edge_pair_implies():
    times = {"a": (0.0, 1.0), "b": (2.0, 3.0), "c": (0.5, 4.0), "d": (5.0, 6.0), "e": (6.0, 7.0)}
    # a before b before d: no a → d; c overlaps a and b; e begins the instant d ends
    assert realtime_edges(times) == [
        ("a", "b", "realtime"),
        ("b", "d", "realtime"),
        ("c", "d", "realtime"),
        ("b", "e", "realtime"),
        ("c", "e", "realtime"),
    ]


def test_a_cycle_through_a_wr_edge_is_g1c_not_g0():
    cycles = find_cycles([("a", "b", "ww"), ("b", "a", "wr"), ("c", "d", "ww")])
    assert (cycles["G0"], cycles["G1c"]) == (0, 1)
    assert cycles["examples"][0]["edges"] == [
        {"source": "b", "target": "a", "type": "wr"},
        {"source": "a", "target": "b", "type": "ww"},
    ]


def test_a_large_transaction_is_drawn_nearest_the_anomaly_and_the_rest_counted():
    rows = [
        {
            "topic": OUTPUT,
            "partition": 0,
            "offset": offset,
            "id": offset,
            "process": "final-committed",
            "instance": 0,
            "incarnation": 0,
            "txn_seq": 0,
        }
        for offset in range(50)
    ]
    graph = lineage_graph(rows, [], [], (INPUT,), (OUTPUT,))
    drawing = serialize(graph, {"out:0:49"})
    outputs = [node["id"] for node in drawing["nodes"] if node["type"] == "output"]
    assert len(outputs) == MAX_NODES_PER_TYPE
    assert "out:0:49" in outputs
    assert drawing["omitted"]["output"] == 50 - MAX_NODES_PER_TYPE


def test_the_section_is_plain_json_for_verdict_json(planted_section):
    assert json.loads(json.dumps(planted_section)) == planted_section


def test_the_verdict_carries_the_lineage_of_the_history_it_judged(spark, tmp_path):
    run = generate(spark, tmp_path / "run", plants=Plants(lost=1, duplicate=1))
    verdict = check_run(spark, run.run_dir)
    failed = {name for name, check in verdict["checks"].items() if check["verdict"] == "FAIL"}
    assert set(verdict["lineage"]) == {"stats", "anomalies", "cycles"}
    assert {a["check"] for a in verdict["lineage"]["anomalies"]} == failed
    assert failed == {"delivery.lost", "delivery.duplicate"}
