"""The KIP-447 workload against a real cluster: what it writes to Kafka and to the history.

Runs only on the default Kafka version (the session cluster's parameter is overridden), as
each run takes 15-30 s. Every run uses its own topics and group on the shared cluster.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from eoschaos.clusters import kafka_dist, processes
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.contract.history import FIELDS, KINDS, SCHEMA_DDL, TYPES
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.workloads.harness.final import final_scan, record_end_state
from eoschaos.workloads.harness.pipeline import PipelineConfig
from eoschaos.workloads.kip447.workload import Kip447Workload, ProcessorSettings
from eoschaos.workloads.smoke import produce_transaction, transactional_producer

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.parametrize(
        "session_cluster", [kafka_dist.DEFAULT_KAFKA_VERSION], indirect=True, scope="session"
    ),
]

RECORDS = 3000
SMALL_RUN = PipelineConfig(records=RECORDS, seed_seconds=6.0)
MANY_ABORTS = ProcessorSettings(abort_fraction=0.3)


@dataclass
class Run:
    """A finished workload run: its config and every history event, by writer."""

    config: PipelineConfig
    run_dir: Path
    events: dict[str, list[dict[str, Any]]]

    def writers(self, prefix: str) -> list[str]:
        return sorted(w for w in self.events if w.startswith(prefix))

    def select(self, prefix: str, **match: Any) -> list[dict[str, Any]]:
        return [
            e
            for writer in self.writers(prefix)
            for e in self.events[writer]
            if all(e.get(k) == v for k, v in match.items())
        ]

    def output_reads(self, writer: str) -> list[dict[str, Any]]:
        return self.select(writer, kind="read", topic=self.config.output_topic)

    def seeded_ids(self) -> set[int]:
        return {e["id"] for e in self.select("seeder", type="ok")}


def read_history(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines()]
        for path in sorted((run_dir / HISTORY_DIR).glob("*.jsonl"))
    }


def unique_config(base: PipelineConfig, **changes: Any) -> PipelineConfig:
    suffix = uuid.uuid4().hex[:8]
    return replace(
        base,
        input_topic=f"kip447-in-{suffix}",
        output_topic=f"kip447-out-{suffix}",
        group=f"kip447-group-{suffix}",
        **changes,
    )


def run_workload(
    cluster: ProcessCluster,
    config: PipelineConfig,
    run_dir: Path,
    during: Callable[[Kip447Workload], None] = lambda _workload: None,
) -> Run:
    """setup → start → `during` → seeded → caught up → stop → final scans; nothing survives."""
    with Kip447Workload(
        config, cluster.bootstrap, run_dir, cluster.dist, settings=MANY_ABORTS
    ) as workload:
        workload.setup()
        workload.start()
        during(workload)
        assert workload.wait_seeded(60), "the seeder did not get every delivery report"
        assert workload.wait_caught_up(90), "the group did not commit to the input's end"
        workload.stop()
        scans = workload.final_scans()
        assert all(scan.complete for scan in scans.values())
    assert processes.still_alive(workload.pid_dir) == []
    return Run(config, run_dir, read_history(run_dir))


def wait_for_history(
    path: Path, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 60
) -> None:
    """Wait until the events written so far to one history file satisfy `predicate`.

    The writer is running: a line still being appended is not read until it is whole.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate(written_events(path)):
            return
        time.sleep(0.2)
    raise AssertionError(f"{path.name}: the awaited events did not appear in {timeout}s")


def written_events(path: Path) -> list[dict[str, Any]]:
    """The whole lines a running writer has appended to one history file so far."""
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    return [json.loads(line) for line in lines if line.endswith("\n")]


def has_event(**match: Any) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda events: any(all(e.get(k) == v for k, v in match.items()) for e in events)


@pytest.fixture(scope="module")
def eos_run(session_cluster: ProcessCluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One eos run without faults, shared by the tests that only read its history."""
    run_dir = tmp_path_factory.mktemp("kip447-eos")
    return run_workload(session_cluster, unique_config(SMALL_RUN), run_dir)


@pytest.fixture(scope="module")
def eos_kill_run(session_cluster: ProcessCluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One eos run in which instance 1 is killed (kill -9) after its first commit."""
    run_dir = tmp_path_factory.mktemp("kip447-eos-kill")

    def kill_after_first_commit(workload: Kip447Workload) -> None:
        history = run_dir / HISTORY_DIR / "processor-1.0.jsonl"
        wait_for_history(history, has_event(f="commit", type="ok"))
        workload.kill_instance(1)

    return run_workload(session_cluster, unique_config(SMALL_RUN), run_dir, kill_after_first_commit)


# --- eos without faults ------------------------------------------------------------------


def test_eos_commits_every_seeded_id_exactly_once(eos_run: Run) -> None:
    assert len(eos_run.seeded_ids()) == RECORDS
    committed = Counter(e["id"] for e in eos_run.output_reads("final-committed"))
    assert set(committed) == eos_run.seeded_ids()
    assert set(committed.values()) == {1}


def test_eos_aborted_fate_records_reach_the_log_but_only_read_uncommitted_sees_them(
    eos_run: Run,
) -> None:
    uncommitted = Counter(e["fate"] for e in eos_run.output_reads("final-uncommitted"))
    assert uncommitted["abort"] > 0
    for reader in ("final-committed", "observer"):
        assert {e["fate"] for e in eos_run.output_reads(reader)} == {"commit"}


def test_eos_observer_sees_each_committed_output_once(eos_run: Run) -> None:
    observed = Counter(e["id"] for e in eos_run.output_reads("observer"))
    assert set(observed) == eos_run.seeded_ids()
    assert set(observed.values()) == {1}
    assert {e["isolation"] for e in eos_run.output_reads("observer")} == {"read_committed"}


def test_eos_output_records_carry_their_lineage(eos_run: Run) -> None:
    sends = {e["id"]: e for e in eos_run.select("seeder", type="ok")}
    for read in eos_run.output_reads("final-committed"):
        source = sends[read["id"]]
        assert (read["src_partition"], read["src_offset"]) == (
            source["partition"],
            source["offset"],
        )
        assert read["txn_id"] == f"{eos_run.config.group}-{read['instance']}"
        assert read["generation"] >= 1


def test_eos_output_records_name_their_place_among_their_transactions_sends(
    eos_run: Run,
) -> None:
    by_txn: dict[tuple, list[dict]] = {}
    for read in eos_run.output_reads("final-committed"):
        by_txn.setdefault((read["instance"], read["incarnation"], read["txn_seq"]), []).append(read)
    assert by_txn
    for reads in by_txn.values():
        reads.sort(key=lambda read: read["txn_index"])
        assert [read["txn_index"] for read in reads] == list(range(reads[0]["txn_size"]))
        for partition in {read["src_partition"] for read in reads}:  # sent in the order read
            sources = [read["src_offset"] for read in reads if read["src_partition"] == partition]
            assert sources == sorted(sources)


def test_eos_transactions_commit_the_offsets_they_consumed(eos_run: Run) -> None:
    commits = eos_run.select("processor-", kind="txn", f="commit", type="ok")
    assert commits
    for commit in commits:
        sent = eos_run.select(
            commit["process"], f="send-offsets", type="ok", txn_seq=commit["txn_seq"]
        )
        produced = eos_run.select(
            commit["process"], f="produce", type="ok", txn_seq=commit["txn_seq"]
        )
        assert len(sent) == 1 and len(produced) == 1
        consumed = {(o["partition"], o["offset"]) for o in produced[0]["offsets"]}
        assert consumed <= {(o["partition"], o["offset"]) for o in sent[0]["offsets"]}
        assert produced[0]["count"] == commit["txn_size"]


def test_eos_end_state_has_no_open_transaction_and_the_group_at_the_input_end(
    eos_run: Run,
) -> None:
    ends = eos_run.select("end-state", f="log-end")
    assert len(ends) == 2 * eos_run.config.partitions
    assert all(e["lso"] == e["offset"] for e in ends)
    input_ends = {
        e["partition"]: e["offset"] for e in ends if e["topic"] == eos_run.config.input_topic
    }
    group = {e["partition"]: e["offset"] for e in eos_run.select("end-state", f="group-offset")}
    assert group == input_ends
    assert eos_run.select("end-state", f="open-txn") == []


def test_eos_processors_exit_cleanly_on_stop(eos_run: Run) -> None:
    exits = eos_run.select("supervisor", f="exit")
    assert [e["error"] for e in exits] == ["0"] * eos_run.config.instances


def test_history_lines_match_the_schema(eos_run: Run) -> None:
    python_types = {"STRING": str, "DOUBLE": float, "LONG": int, "INT": int}
    declared = dict(part.split(" ", 1) for part in SCHEMA_DDL.split(", ") if " " in part)
    for writer, events in eos_run.events.items():
        for event in events:
            assert set(event) <= set(FIELDS), (writer, event)
            assert event["kind"] in KINDS and event["type"] in TYPES
            assert event["process"] == writer
            for field, value in event.items():
                kind = declared.get(field, "ARRAY")
                expected = python_types.get(kind, list)
                assert isinstance(value, expected) or (expected is float and type(value) is int)


# --- faults on instances -------------------------------------------------------------------


def test_killed_instance_is_replaced_by_its_next_incarnation_with_the_same_transactional_id(
    eos_kill_run: Run,
) -> None:
    instance_1 = eos_kill_run.select("supervisor", instance=1)
    assert [(e["f"], e["incarnation"], e.get("error")) for e in instance_1] == [
        ("start", 0, None),
        ("exit", 0, "-9"),
        ("start", 1, None),
        ("exit", 1, "0"),
    ]
    assert {e["txn_id"] for e in instance_1} == {f"{eos_kill_run.config.group}-1"}


def test_a_second_crash_right_after_the_first_hits_the_replacement(
    session_cluster: ProcessCluster, tmp_path: Path
) -> None:
    def crash_twice(workload: Kip447Workload) -> None:
        wait_for_history(tmp_path / HISTORY_DIR / "processor-1.0.jsonl", has_event(f="commit"))
        workload.kill_instance(1)
        workload.kill_instance(1)  # as from a late schedule: before the supervisor replaced it

    run = run_workload(session_cluster, unique_config(SMALL_RUN), tmp_path, crash_twice)
    exits = [(e["incarnation"], e["error"]) for e in run.select("supervisor", instance=1, f="exit")]
    assert exits == [(0, "-9"), (1, "-9"), (2, "0")]


def test_after_a_kill_processing_completes_exactly_once(eos_kill_run: Run) -> None:
    assert eos_kill_run.select("processor-1.1", f="commit", type="ok")
    committed = Counter(e["id"] for e in eos_kill_run.output_reads("final-committed"))
    assert set(committed) == eos_kill_run.seeded_ids()
    assert set(committed.values()) == {1}


def test_group_generation_from_the_metadata_grows_with_each_rebalance(eos_kill_run: Run) -> None:
    first = [e["generation"] for e in eos_kill_run.select("processor-1.0", kind="rebalance")]
    replacement = [e["generation"] for e in eos_kill_run.select("processor-1.1", kind="rebalance")]
    assert min(first) >= 1
    assert min(replacement) > max(first)
    for process in eos_kill_run.writers("processor-"):
        generations = [e["generation"] for e in eos_kill_run.select(process, kind="rebalance")]
        assert generations == sorted(generations), process


def test_alos_commits_acked_offsets_outside_transactions_and_duplicates_after_a_crash(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    processor = tmp_path / HISTORY_DIR / "processor-1.0.jsonl"

    def written_and_not_yet_committed(reads: list[dict[str, Any]]) -> bool:
        """The observer read output of instance 1 whose input offset no commit of it covers
        yet. Its history's produce records enqueuing, not delivery: a kill right after it
        can lose the records still in the client's buffer, and then nothing is done twice."""
        committed: dict[int, int] = {}
        for event in written_events(processor):
            if event.get("f") == "commit-offsets" and event.get("type") == "ok":
                committed |= {o["partition"]: o["offset"] for o in event["offsets"]}
        return any(
            (r.get("instance"), r.get("incarnation")) == (1, 0)
            and r["src_offset"] >= committed.get(r["src_partition"], 0)
            for r in reads
        )

    def kill_with_output_not_yet_committed(workload: Kip447Workload) -> None:
        wait_for_history(tmp_path / HISTORY_DIR / "observer.jsonl", written_and_not_yet_committed)
        workload.kill_instance(1)

    config = unique_config(SMALL_RUN, mode="alos")
    run = run_workload(cluster, config, tmp_path, kill_with_output_not_yet_committed)

    commits = run.select("processor-", f="commit-offsets", type="ok")
    assert commits and {e["fate"] for e in commits} == {"none"}
    assert run.select("processor-", f="begin") == []
    committed = Counter(e["id"] for e in run.output_reads("final-committed"))
    assert set(committed) == run.seeded_ids()
    assert max(committed.values()) > 1  # the killed instance's uncommitted work, done again


def test_read_uncommitted_observer_sees_aborted_output_that_committed_readers_never_see(
    session_cluster: ProcessCluster, tmp_path: Path
) -> None:
    run = run_workload(session_cluster, unique_config(SMALL_RUN, mode="read-uncommitted"), tmp_path)

    observed = run.output_reads("observer")
    assert {e["isolation"] for e in observed} == {"read_uncommitted"}
    assert Counter(e["fate"] for e in observed)["abort"] > 0
    assert {e["fate"] for e in run.output_reads("final-committed")} == {"commit"}


def test_end_state_records_an_open_transaction_and_the_committed_scan_stops_at_its_lso(
    session_cluster: ProcessCluster, tmp_path: Path
) -> None:
    config = unique_config(SMALL_RUN)
    bootstrap = session_cluster.bootstrap
    workload = Kip447Workload(config, bootstrap, tmp_path, session_cluster.dist)
    workload.setup()
    txn_id = f"kip447-open-{uuid.uuid4().hex[:8]}"
    producer = transactional_producer(bootstrap, txn_id)
    produce_transaction(producer, config.output_topic, ["committed"], commit=True)
    producer.begin_transaction()
    producer.produce(config.output_topic, value=b"left open")
    producer.flush(10)
    try:
        scan = final_scan(bootstrap, tmp_path, [config.output_topic], "read_committed", 30, print)
        record_end_state(
            bootstrap,
            tmp_path,
            session_cluster.dist,
            input_topics=(config.input_topic,),
            output_topics=(config.output_topic,),
            group=config.group,
            txn_ids={txn_id},
        )
    finally:
        producer.abort_transaction(30)

    assert scan.complete
    assert [e["offset"] for e in read_history(tmp_path)["final-committed"]] == [0]
    end_state = read_history(tmp_path)["end-state"]
    assert [e["txn_id"] for e in end_state if e["f"] == "open-txn"] == [txn_id]
    open_partitions = [e for e in end_state if e["f"] == "log-end" and e["lso"] < e["offset"]]
    assert len(open_partitions) == 1
