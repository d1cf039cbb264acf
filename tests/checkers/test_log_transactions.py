"""Transactions judged from the brokers' logs alone (eoschaos.checkers.log_transactions): the
coordinator's records, the output's batches and markers, and the offset commits of one
producer are one transaction; delivery.torn-transaction and fencing.older-epoch-commit judge
it. Each test writes the log rows of a few transactions of one producer, as the run records them
(docs/history.md); the checks are judged on those rows alone, and the verdict as a whole (fates,
agreement with the client's history) on the synthetic run with those rows added."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eoschaos.checkers.findings import result, tally, tally_found
from eoschaos.checkers.log_findings import (
    judge_log_transactions,
    name_transactions,
    uncommitted_offset_findings,
)
from eoschaos.checkers.log_transactions import (
    offset_commits,
    output_pieces,
    producer_rows,
    transaction_table,
)
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.checks import CATALOGUE
from eoschaos.contract.history import (
    CONSUMER_OFFSETS_TOPIC,
    FINAL_COMMITTED,
    LOG_ABORTED,
    LOG_BATCH,
    LOG_BATCH_KIND,
    LOG_BATCHES,
    OFFSET_COMMIT,
    SCHEMA_DDL,
    TRANSACTION_STATE_TOPIC,
    TXN_STATE,
)
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.testing import GROUP, INPUT_TOPIC, OUTPUT_TOPIC, RunShape, generate

SHAPE = RunShape()
TORN = "delivery.torn-transaction"
OLDER_EPOCH = "fencing.older-epoch-commit"
HANGING = "liveness.hanging-transaction"
UNCOMMITTED = "isolation.uncommitted-offset-read"
DEAD_LETTERS = "rejected"  # a second topic the pipeline writes, with partitions numbered alike
CHECKS = (TORN, OLDER_EPOCH, HANGING, UNCOMMITTED)
TXN_ID = "pipeline-7"
PRODUCER = 4242
T0 = SHAPE.start + 5000.0  # after every event of the synthetic run
OUT_PARTITION = 1
IN_PARTITION = 2
OUTPUT_START = 100_000  # output offsets of these transactions, after the synthetic run's
INPUT_START = 1_000_000  # the input offsets they commit, after the synthetic run's commits
CONSUMER_OFFSETS_PARTITION = 3
RECORDED_AT = T0 + 600.0  # batch headers are dumped from the logs after the run, not as written


def _row(f: str, time: float, topic: str, partition: int, offset: int, **more) -> dict:
    params = more.pop("params")
    return {
        "kind": LOG_BATCH_KIND,
        "type": "ok",
        "f": f,
        "process": LOG_BATCHES,
        "time": time,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "params": json.dumps(params),
        **more,
    }


@dataclass
class Pipeline:
    """One transactional producer's log rows, transaction by transaction."""

    epoch: int = 0
    rows: list[dict] = field(default_factory=list)
    clock: float = T0
    output_at: int = OUTPUT_START
    input_at: int = INPUT_START
    state_at: int = 0
    offsets_at: int = 0

    def _state(self, state: str, partitions: list[str], epoch: int | None = None) -> None:
        self.clock += 0.01
        params = {
            "producer_id": PRODUCER,
            "producer_epoch": self.epoch if epoch is None else epoch,
            "state": state,
            "partitions": partitions,
            "last_update_ms": round(self.clock * 1000),
            "node": 1,
        }
        self.rows.append(
            _row(
                TXN_STATE,
                self.clock,
                TRANSACTION_STATE_TOPIC,
                0,
                self.state_at,
                txn_id=TXN_ID,
                params=params,
            )
        )
        self.state_at += 1

    def _batch(self, offset: int, count: int, control: bool, epoch: int) -> None:
        params = {
            "last_offset": offset + count - 1,
            "producer_id": PRODUCER,
            "producer_epoch": epoch,
            "transactional": True,
            "control": control,
            "create_time": round(self.clock * 1000),
            "node": 1,
        }
        self.rows.append(
            _row(
                LOG_BATCH,
                RECORDED_AT,
                OUTPUT_TOPIC,
                OUT_PARTITION,
                offset,
                count=count,
                params=params,
            )
        )

    def start_session(self) -> None:
        """InitProducerId: the coordinator's Empty state at the next epoch."""
        self.epoch += 1
        self._state("Empty", [])

    def transaction(
        self,
        records: int = 10,
        commits: str | None = "in",
        fate: str = "COMMIT",
        output_fate: str | None = None,
        epoch: int | None = None,
        until: str = "completed",
        marker: bool = True,
    ) -> None:
        """A transaction of `records` output records and input offsets: committed with the
        offsets in it ("in"), as a plain commit after it ("plain") or none (None). The
        coordinator takes it `until` "ongoing", "decided" or "completed"; `marker=False`
        leaves its output partition without a marker."""
        epoch = self.epoch if epoch is None else epoch
        out = f"{OUTPUT_TOPIC}-{OUT_PARTITION}"
        offsets = f"{CONSUMER_OFFSETS_TOPIC}-{CONSUMER_OFFSETS_PARTITION}"
        parts = ([out] if records else []) + ([offsets] if commits == "in" else [])
        self._state("Ongoing", parts, epoch)
        if records:
            self._batch(self.output_at, records, control=False, epoch=epoch)
            self.output_at += records
        if until == "ongoing":
            return
        self.input_at += 10
        commit_at = self.clock
        self._state("Prepare" + fate.capitalize(), parts, epoch)
        self.clock += 0.01
        if records and marker:
            marker = output_fate or fate
            if marker == "ABORT":
                self.rows.append(
                    _row(
                        LOG_ABORTED,
                        self.clock,
                        OUTPUT_TOPIC,
                        OUT_PARTITION,
                        self.output_at - records,
                        params={"producer_id": PRODUCER, "last_offset": self.output_at},
                    )
                )
            self._batch(self.output_at, 1, control=True, epoch=epoch)
            self.output_at += 1
        if commits is not None:
            self._offset_commit(commit_at, transactional=commits == "in", fate=fate, epoch=epoch)
        if until == "completed":
            self._state("Complete" + fate.capitalize(), [], epoch)

    def _offset_commit(self, at: float, transactional: bool, fate: str, epoch: int) -> None:
        params = {
            "group": GROUP,
            "log_partition": CONSUMER_OFFSETS_PARTITION,
            "log_offset": self.offsets_at,
            "producer_id": PRODUCER if transactional else -1,
            "producer_epoch": epoch if transactional else -1,
            "transactional": transactional,
            "commit_ms": round(at * 1000),
            "marker": fate if transactional else None,
            "marker_offset": self.offsets_at + 1 if transactional else None,
            "marker_time": round(self.clock * 1000) if transactional else None,
            "node": 1,
        }
        self.rows.append(
            _row(OFFSET_COMMIT, at, INPUT_TOPIC, IN_PARTITION, self.input_at, params=params)
        )
        self.offsets_at += 2


@pytest.fixture(scope="module")
def synthetic_run(spark, tmp_path_factory) -> Path:
    """The correct synthetic run, written once: a test of the whole verdict judges a copy
    with its own rows."""
    return generate(spark, tmp_path_factory.mktemp("synthetic"), SHAPE, parquet=False).run_dir


@pytest.fixture
def judged(spark, synthetic_run, tmp_path):
    """The whole verdict of the synthetic run with the pipeline's log rows added."""

    def judge(pipeline: Pipeline, scan: list[dict] = ()) -> dict:
        """`scan`: reads the final committed scan holds besides the synthetic run's."""
        run_dir = shutil.copytree(synthetic_run, tmp_path / "run")
        with (run_dir / HISTORY_DIR / f"{LOG_BATCHES}.jsonl").open("a") as log:
            log.writelines(json.dumps(row) + "\n" for row in pipeline.rows)
        with (run_dir / HISTORY_DIR / f"{FINAL_COMMITTED}.jsonl").open("a") as final:
            final.writelines(json.dumps(row) + "\n" for row in scan)
        return check_run(spark, run_dir, lineage=False)

    return judge


@pytest.fixture
def judged_logs(spark):
    """The checks of the logs' transaction table, judged on the pipeline's log rows alone,
    read as the history's `log` kind is: check name -> its verdict entry."""

    def judge(pipeline: Pipeline, offsets_in_transactions: bool = True) -> dict:
        """`offsets_in_transactions` False: a pipeline that keeps its offsets in its own
        checkpoints (Flink), as its capabilities say."""
        lines = spark.sparkContext.parallelize([json.dumps(row) for row in pipeline.rows])
        log = spark.read.schema(SCHEMA_DDL).json(lines)
        rows = producer_rows(log, offset_commits(log), (INPUT_TOPIC,), (OUTPUT_TOPIC,))
        table = transaction_table(rows, (INPUT_TOPIC, OUTPUT_TOPIC))
        judged = judge_log_transactions(
            table, output_pieces(rows), True, offsets_in_transactions=offsets_in_transactions
        )
        found = tally_found(judged[1], 5)
        return {name: result(CATALOGUE[name], found.get(name)).to_json() for name in CHECKS}

    return judge


@pytest.fixture
def judged_reads(spark):
    """isolation.uncommitted-offset-read of downstream reads (reader, offset, time; or reader,
    topic, offset, time) of the pipeline's output partition, or of that partition of a
    dead-letter topic, judged against its log rows alone."""

    def judge(pipeline: Pipeline, reads: list[tuple]) -> dict:
        lines = spark.sparkContext.parallelize([json.dumps(row) for row in pipeline.rows])
        log = spark.read.schema(SCHEMA_DDL).json(lines)
        written = (OUTPUT_TOPIC, DEAD_LETTERS)
        rows = producer_rows(log, offset_commits(log), (INPUT_TOPIC,), written)
        placed = [read if len(read) == 4 else (read[0], OUTPUT_TOPIC, *read[1:]) for read in reads]
        frame = spark.createDataFrame(
            [(reader, topic, OUT_PARTITION, at, at, time) for reader, topic, at, time in placed],
            "reader string, topic string, partition int, offset long, id long, time double",
        )
        found = tally(uncommitted_offset_findings(frame, output_pieces(rows)), 5)
        return result(CATALOGUE[UNCOMMITTED], found.get(UNCOMMITTED)).to_json()

    return judge


def _markers(pipeline: Pipeline) -> list[float]:
    """When each marker of the output partition was written (seconds), in offset order."""
    return [
        json.loads(row["params"])["create_time"] / 1000
        for row in pipeline.rows
        if row["f"] == LOG_BATCH and json.loads(row["params"])["control"]
    ]


def _whole(n: int = 3) -> Pipeline:
    pipeline = Pipeline()
    pipeline.start_session()
    for _ in range(n):
        pipeline.transaction()
    return pipeline


def test_whole_transactions_pass_and_are_counted_by_their_fate(judged):
    pipeline = _whole(3)
    pipeline.transaction(fate="ABORT")
    verdict = judged(pipeline)
    assert {name: verdict["checks"][name]["verdict"] for name in CHECKS} == dict.fromkeys(
        CHECKS, "PASS"
    )
    assert verdict["stats"]["transactions"]["from_logs"] == {"COMMIT": 3, "ABORT": 1}


def test_output_committed_with_offsets_committed_outside_the_transaction_is_torn(judged_logs):
    pipeline = _whole(1)
    pipeline.transaction(commits="plain")
    torn = judged_logs(pipeline)[TORN]
    assert (torn["verdict"], torn["count"]) == ("FAIL", 1)
    [example] = torn["examples"]
    assert (example["txn_id"], example["producer_id"], example["fate"]) == (
        TXN_ID,
        PRODUCER,
        "COMMIT",
    )
    assert example["torn"] == "it committed output but no offsets of the input"
    [output] = example["output"]
    assert (output["partition"], output["first_offset"], output["records"]) == (
        OUT_PARTITION,
        OUTPUT_START + 11,
        10,
    )


def test_offsets_committed_with_no_output_for_the_input_they_consumed_is_torn(judged_logs):
    pipeline = _whole(1)
    pipeline.transaction(records=0)
    torn = judged_logs(pipeline)[TORN]
    assert (torn["verdict"], torn["count"]) == ("FAIL", 1)
    assert torn["examples"][0]["torn"] == "it committed input offsets but no output for that input"
    [commit] = torn["examples"][0]["offsets"]
    assert (commit["partition"], commit["advanced"]) == (IN_PARTITION, 10)


FIRST_ID = 90_000_000  # the ids of these transactions' input, above the synthetic run's


def _read(topic: str, partition: int, offset: int, id_: int) -> dict:
    return {
        "kind": "read",
        "type": "ok",
        "f": "poll",
        "process": FINAL_COMMITTED,
        "time": RECORDED_AT,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "id": id_,
    }


def _copied(transactions: int, plain: int = 0) -> tuple[Pipeline, list[dict]]:
    """`transactions` transactions of 10 records each, and the final scan of their input and
    output: each input record's copy, the last `plain` of the last transaction's written by
    another producer outside any transaction (that transaction writes the others)."""
    pipeline = Pipeline()
    pipeline.start_session()
    scan = []
    for k in range(transactions):
        last = k == transactions - 1
        ids = range(FIRST_ID + 10 * k, FIRST_ID + 10 * k + 10)
        inside = list(ids)[: 10 - plain] if last else list(ids)
        scan += [
            _read(INPUT_TOPIC, IN_PARTITION, pipeline.input_at + j, id_)
            for j, id_ in enumerate(ids)
        ]
        scan += [
            _read(OUTPUT_TOPIC, OUT_PARTITION, pipeline.output_at + j, id_)
            for j, id_ in enumerate(inside)
        ]
        pipeline.transaction(records=len(inside))
    at = pipeline.output_at
    for j, id_ in enumerate(
        range(FIRST_ID + 10 * transactions - plain, FIRST_ID + 10 * transactions)
    ):
        params = {"last_offset": at + j, "producer_id": 7, "transactional": False, "control": False}
        pipeline.rows.append(
            _row(
                LOG_BATCH, RECORDED_AT, OUTPUT_TOPIC, OUT_PARTITION, at + j, count=1, params=params
            )
        )
        scan.append(_read(OUTPUT_TOPIC, OUT_PARTITION, at + j, id_))
    return pipeline, scan


def test_input_whose_copies_its_transaction_wrote_is_not_torn(judged):
    verdict = judged(*_copied(2))
    assert verdict["checks"][TORN]["verdict"] == "PASS"


def test_input_a_transaction_consumed_whose_copies_no_transaction_wrote_is_torn(judged):
    verdict = judged(*_copied(2, plain=2))
    torn = verdict["checks"][TORN]
    assert (torn["verdict"], torn["count"]) == ("FAIL", 1)
    [example] = torn["examples"]
    assert example["torn"].startswith("it committed input offsets over 2 records whose copies")
    first = example["written_outside"][0]
    assert (first["id"], first["input"]["offset"]) == (FIRST_ID + 18, INPUT_START + 18)
    [copy] = first["copies"]
    assert (copy["producer_id"], copy["transactional"]) == (7, False)


def test_markers_that_disagree_within_one_transaction_are_torn(judged_logs):
    pipeline = _whole(1)
    pipeline.transaction(output_fate="ABORT")
    torn = judged_logs(pipeline)[TORN]
    assert (torn["verdict"], torn["count"]) == ("FAIL", 1)
    assert torn["examples"][0]["torn"].startswith("its markers disagree")


def test_a_pipeline_keeping_its_offsets_in_checkpoints_is_not_torn_by_committing_them_apart(
    judged_logs,
):
    pipeline = _whole(1)
    pipeline.transaction(commits="plain")
    pipeline.transaction(commits=None)
    assert judged_logs(pipeline, offsets_in_transactions=False)[TORN]["verdict"] == "PASS"


def test_a_pipeline_keeping_its_offsets_in_checkpoints_is_torn_by_markers_that_disagree(
    judged_logs,
):
    pipeline = _whole(1)
    pipeline.transaction(output_fate="ABORT")  # its output ABORT, its offsets COMMIT
    torn = judged_logs(pipeline, offsets_in_transactions=False)[TORN]
    assert (torn["verdict"], torn["count"]) == ("FAIL", 1)
    assert torn["examples"][0]["torn"].startswith("its markers disagree")


def test_an_older_epoch_committing_after_a_newer_session_began_is_a_zombie(judged_logs):
    pipeline = _whole(1)
    pipeline.start_session()  # epoch 2 begins ...
    pipeline.transaction(epoch=1)  # ... and epoch 1 still commits
    older = judged_logs(pipeline)[OLDER_EPOCH]
    assert (older["verdict"], older["count"]) == ("FAIL", 1)
    [example] = older["examples"]
    assert (example["txn_id"], example["producer_epoch"], example["newer_epoch"]) == (TXN_ID, 1, 2)


def test_a_new_session_after_the_older_epochs_commit_is_no_zombie(judged_logs):
    pipeline = _whole(2)
    pipeline.start_session()
    pipeline.transaction()
    assert judged_logs(pipeline)[OLDER_EPOCH]["verdict"] == "PASS"


def test_commits_the_coordinator_made_that_no_client_history_holds_are_a_disagreement(judged):
    """The synthetic processors' history knows nothing of this producer's three commits."""
    agreement = judged(_whole(3))["stats"]["transactions"]["agreement"]
    [ours] = [row for row in agreement["disagreements"] if row["txn_id"] == TXN_ID]
    assert (ours["client_committed"], ours["client_unknown"], ours["log_committed"]) == (0, 0, 3)


def test_a_transaction_the_coordinator_never_decided_is_hanging_and_so_is_its_output(judged_logs):
    pipeline = _whole(2)
    pipeline.transaction(until="ongoing")
    hanging = judged_logs(pipeline)[HANGING]
    assert (hanging["verdict"], hanging["counts"]) == (
        "FAIL",
        {"coordinator": 1, "partition": 1},
    )
    [coordinator] = [e for e in hanging["examples"] if "partition" not in e]
    [partition] = [e for e in hanging["examples"] if "partition" in e]
    assert (coordinator["txn_id"], coordinator["producer_id"], coordinator["producer_epoch"]) == (
        TXN_ID,
        PRODUCER,
        1,
    )
    assert coordinator["hanging"] == "the coordinator never decided it"
    assert (partition["txn_id"], partition["partition"], partition["first_offset"]) == (
        TXN_ID,
        OUT_PARTITION,
        OUTPUT_START + 22,
    )
    assert partition["records"] == 10


def test_output_no_marker_closed_began_when_its_first_batch_was_written(judged_logs):
    """Not when the logs were dumped after the run."""
    pipeline = _whole(2)
    pipeline.transaction(marker=False)
    written = min(
        json.loads(row["params"])["create_time"] / 1000
        for row in pipeline.rows
        if row["f"] == LOG_BATCH and row["offset"] >= OUTPUT_START + 22
    )
    [partition] = judged_logs(pipeline)[HANGING]["examples"]
    assert partition["began"] == written


def test_a_decided_transaction_the_coordinator_never_completed_is_hanging(judged_logs):
    pipeline = _whole(2)
    pipeline.transaction(until="decided")
    hanging = judged_logs(pipeline)[HANGING]
    assert (hanging["verdict"], hanging["counts"]) == ("FAIL", {"coordinator": 1})
    assert hanging["examples"][0]["hanging"] == "decided COMMIT but never completed"


def test_output_no_marker_closed_is_hanging_though_the_coordinator_completed_it(judged_logs):
    """KIP-664's hanging transaction: the coordinator's side is whole, the partition's is not."""
    pipeline = _whole(2)
    pipeline.transaction(marker=False)
    hanging = judged_logs(pipeline)[HANGING]
    assert (hanging["verdict"], hanging["counts"]) == ("FAIL", {"partition": 1})
    assert hanging["examples"][0]["hanging"].startswith("its batches in this partition")


def test_reads_of_committed_output_after_its_marker_are_no_uncommitted_read(judged_reads):
    pipeline = _whole(2)
    first, second = _markers(pipeline)
    reads = [("observer", OUTPUT_START + 3, first + 0.002), ("observer", OUTPUT_START + 12, second)]
    assert judged_reads(pipeline, reads)["verdict"] == "PASS"


def test_a_read_before_its_transactions_marker_was_written_is_an_uncommitted_read(judged_reads):
    pipeline = _whole(2)
    first, second = _markers(pipeline)
    reads = [
        ("observer", OUTPUT_START + 3, first + 0.5),
        ("observer", OUTPUT_START + 12, second - 0.005),
    ]
    uncommitted = judged_reads(pipeline, reads)
    assert (uncommitted["verdict"], uncommitted["counts"]) == ("FAIL", {"observer": 1})
    [example] = uncommitted["examples"]
    assert (example["offset"], example["txn_id"], example["producer_id"]) == (
        OUTPUT_START + 12,
        TXN_ID,
        PRODUCER,
    )
    assert example["committed_at"] == pytest.approx(second)


def test_a_read_of_output_no_marker_ever_closed_is_an_uncommitted_read(judged_reads):
    pipeline = _whole(1)
    pipeline.transaction(until="ongoing")
    uncommitted = judged_reads(pipeline, [("observer", OUTPUT_START + 12, T0 + 60)])
    assert (uncommitted["verdict"], uncommitted["count"]) == ("FAIL", 1)
    assert "committed_at" not in uncommitted["examples"][0]  # no marker: no time


def test_a_read_is_placed_in_its_own_topic_where_two_topics_share_partitions_and_offsets(
    judged_reads,
):
    """The same partition and offsets in a dead-letter topic, committed 10 s later than the
    output's: a read there between the two markers read past the dead letters' stable offset,
    and the same read of the output did not."""
    pipeline = _whole(2)
    _, second = _markers(pipeline)
    for row in [row for row in pipeline.rows if row["topic"] == OUTPUT_TOPIC]:
        params = json.loads(row["params"])
        params["create_time"] += 10_000
        pipeline.rows.append(row | {"topic": DEAD_LETTERS, "params": json.dumps(params)})
    reads = [
        ("observer", OUTPUT_TOPIC, OUTPUT_START + 12, second + 1.0),
        ("observer", DEAD_LETTERS, OUTPUT_START + 12, second + 1.0),
    ]
    uncommitted = judged_reads(pipeline, reads)
    assert (uncommitted["verdict"], uncommitted["count"]) == ("FAIL", 1)
    [example] = uncommitted["examples"]
    assert (example["topic"], example["offset"]) == (DEAD_LETTERS, OUTPUT_START + 12)
    assert example["committed_at"] == pytest.approx(second + 10)


def test_a_read_of_an_aborted_range_is_left_to_the_aborted_read_checks(judged_reads):
    pipeline = _whole(1)
    pipeline.transaction(fate="ABORT")
    _, abort = _markers(pipeline)
    assert judged_reads(pipeline, [("observer", OUTPUT_START + 12, abort - 0.005)])["verdict"] == (
        "PASS"
    )


def test_an_aborted_offset_read_names_the_transaction_whose_abort_covers_it(spark):
    pipeline = _whole(1)
    pipeline.transaction(fate="ABORT")
    lines = spark.sparkContext.parallelize([json.dumps(row) for row in pipeline.rows])
    log = spark.read.schema(SCHEMA_DDL).json(lines)
    rows = producer_rows(log, offset_commits(log), (INPUT_TOPIC,), (OUTPUT_TOPIC,))
    example = {"topic": OUTPUT_TOPIC, "partition": OUT_PARTITION, "offset": OUTPUT_START + 15}
    input_example = {"topic": INPUT_TOPIC, "partition": OUT_PARTITION, "offset": OUTPUT_START}
    name_transactions(output_pieces(rows), [example, input_example])
    assert (example["txn_id"], example["producer_id"], example["txn_fate"]) == (
        TXN_ID,
        PRODUCER,
        "ABORT",
    )
    assert "txn_id" not in input_example


def test_batch_headers_without_the_coordinators_states_judge_reads_and_state_no_table(
    spark, synthetic_run, tmp_path
):
    """A run whose coordinators' log could not be read: its reads are still placed in the
    output's ranges, and no transaction table (nor a client/log agreement) is made up."""
    run_dir = shutil.copytree(synthetic_run, tmp_path / "run")
    rows = [row for row in _whole(2).rows if row["f"] != TXN_STATE]
    log = run_dir / HISTORY_DIR / f"{LOG_BATCHES}.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    verdict = check_run(spark, run_dir, lineage=False)
    assert verdict["checks"][UNCOMMITTED]["verdict"] == "PASS"
    assert {TORN, OLDER_EPOCH, HANGING} <= set(verdict["not_applicable"])
    assert "from_logs" not in verdict["stats"]["transactions"]
