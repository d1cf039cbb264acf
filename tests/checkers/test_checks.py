"""What the checkers promise: every check passes on a correct history and reports exactly the
anomalies planted in a synthetic one -- the planted count, with examples pointing at the planted
records -- and invents none."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from fuzzing import in_ci_and_nightly
from hypothesis import strategies as st

from eoschaos import cli
from eoschaos.checkers.verdict import check_run
from eoschaos.contract.capabilities import Capabilities
from eoschaos.contract.checks import CATALOGUE, Evidence, needing
from eoschaos.contract.history import END_STATE, FINAL_COMMITTED, FINAL_SCANS, LOG_BATCHES
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.run import WarmJudge
from eoschaos.testing import PLANT_CHECKS, Plants, RunShape, generate

SHAPE = RunShape()  # 512 records, 2 input and 2 output partitions, 2 instances, 1 abort in 3
# A synthetic run is a copy pipeline: the check of an aggregating one (--expect) never applies
# (tests/checkers/test_expected_output.py has its own runs).
EXPECT_ONLY = "aggregate.expected-output"
# Nor the checks of whole transactions from batch headers: the planter writes no output batches
# or markers (tests/checkers/test_log_transactions.py adds them to its runs).
NEEDS_BATCH_HEADERS = needing(Evidence.BATCH_HEADERS)
NEVER_APPLIED = sorted({EXPECT_ONLY, *NEEDS_BATCH_HEADERS})
COPY_CHECKS = [name for name in CATALOGUE if name not in NEVER_APPLIED]
NEEDS_TRANSACTIONS = needing(Evidence.TRANSACTIONS)
NEEDS_TXN_HISTORY = needing(Evidence.TRANSACTION_HISTORY)
NEEDS_COORDINATOR_STATES = needing(Evidence.COORDINATOR_STATES)
NEEDS_OFFSET_COMMITS = needing(Evidence.OFFSET_COMMITS)
NEEDS_FAILURE_EXITS = needing(Evidence.FAILURE_EXITS)
EVERY_ANOMALY = Plants(**{plant: 2 for plant in PLANT_CHECKS})
ALL_EXAMPLES = 1000


def matches(example: dict, target: dict) -> bool:
    """An example points at a planted record when it agrees on every field the plant names."""
    return all(example.get(key) == value for key, value in target.items())


def failing_counts(verdict: dict) -> dict[str, int]:
    return {name: c["count"] for name, c in verdict["checks"].items() if c["verdict"] == "FAIL"}


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory):
    run = generate(spark, tmp_path_factory.mktemp("clean"), SHAPE)
    return run, check_run(spark, run.run_dir, lineage=False)


@pytest.fixture(scope="module")
def planted(spark, tmp_path_factory):
    run = generate(spark, tmp_path_factory.mktemp("planted"), SHAPE, EVERY_ANOMALY, seed=7)
    return run, check_run(spark, run.run_dir, max_examples=ALL_EXAMPLES, lineage=False)


@pytest.mark.parametrize("check", COPY_CHECKS)
def test_check_passes_on_a_correct_history(clean, check):
    result = clean[1]["checks"][check]
    assert (result["verdict"], result["count"], result["examples"]) == ("PASS", 0, [])


def test_correct_history_passes_with_every_check_applied(clean):
    verdict = clean[1]
    assert (verdict["verdict"], verdict["complete"], sorted(verdict["not_applicable"])) == (
        "PASS",
        True,
        NEVER_APPLIED,
    )


def test_stats_count_records_transactions_and_readers(clean):
    run, verdict = clean
    shape = run.shape
    aborted_attempts = sum(shape.aborts(k) for k in range(shape.slots))
    stats = verdict["stats"]
    assert stats["input_records"] == stats["acked_sends"] == stats["output_committed"] == 512
    assert stats["output_uncommitted"] == 512 + aborted_attempts * shape.txn_size
    assert stats["transactions"]["committed"] == shape.slots
    assert stats["transactions"]["aborted"] == aborted_attempts
    assert stats["readers"]["observer"] == {"output-topic": 512}


def test_verdict_names_the_run_and_the_checker(clean, spark):
    verdict = clean[1]
    assert (verdict["workload"], verdict["mode"], verdict["seed"]) == ("synthetic", "eos", 0)
    assert verdict["history_schema"] == 1
    assert verdict["checker"]["spark_master"] == spark.sparkContext.master
    assert verdict["checker"]["events"] > 512 * 4


def test_the_verdict_counts_the_spark_jobs_it_ran_and_leaves_the_callers_job_group(clean, spark):
    context = spark.sparkContext
    context.setJobGroup("caller", "a caller's own group")
    try:
        # Spark's own job counter (internal): every job the session started while it judged
        first_job = context._jsc.sc().dagScheduler().nextJobId()
        verdict = check_run(spark, clean[0].run_dir, lineage=False)
        started = context._jsc.sc().dagScheduler().nextJobId() - first_job
        assert verdict["checker"]["jobs"] == started > 0
        assert context.getLocalProperty("spark.jobGroup.id") == "caller"
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)


def test_timeline_pairs_each_fault_with_its_heal(clean):
    faults = clean[1]["timeline"]["faults"]
    assert [(f["f"], f["target"]) for f in faults] == [("kill", "broker-2")]
    assert 0 < faults[0]["start"] < faults[0]["end"]


def begun_by_outcome(verdict: dict) -> dict[str, int]:
    """Transactions begun, per outcome, summed over every lane's bars."""
    begun: dict[str, int] = {}
    for lane in verdict["timeline"]["lanes"]:
        for _, _, _, counts in lane["transactions"]:
            for outcome, count in counts.items():
                begun[outcome] = begun.get(outcome, 0) + count
    return begun


def test_timeline_has_a_lane_per_process_and_per_instance_incarnation(clean):
    run, verdict = clean
    lanes = [lane["lane"] for lane in verdict["timeline"]["lanes"]]
    instances = [f"instance {i}.1" for i in range(run.shape.instances)]
    assert lanes[: 1 + len(instances)] == ["seeder", *instances]
    assert "observer" in lanes


def test_timeline_bars_count_each_transaction_once_by_its_outcome(clean):
    run, verdict = clean
    aborted = sum(run.shape.aborts(k) for k in range(run.shape.slots))
    assert begun_by_outcome(verdict) == {"committed": run.shape.slots, "aborted": aborted}


def test_timeline_bars_of_a_history_with_anomalies_still_add_up(planted):
    transactions = planted[1]["stats"]["transactions"]
    begun = begun_by_outcome(planted[1])
    assert sum(begun.values()) == transactions["total"]
    assert begun["committed"] == transactions["committed"]


def test_timeline_has_one_row_per_second_adding_up_to_the_history(clean):
    run, verdict = clean
    throughput = verdict["timeline"]["throughput"]
    assert [row["t"] for row in throughput] == list(range(len(throughput)))
    assert sum(row["sends"] for row in throughput) == 512
    assert sum(row["commits"] for row in throughput) == run.shape.slots
    assert sum(row["reads"] for row in throughput) == 512  # the observer's


@pytest.mark.parametrize("plant", PLANT_CHECKS)
def test_planted_anomaly_fails_its_check_with_the_planted_count_and_records(planted, plant):
    run, verdict = planted
    check = PLANT_CHECKS[plant]
    result = verdict["checks"][check]
    assert (result["verdict"], result["count"]) == ("FAIL", run.expected[check])
    missing = [
        target
        for target in run.planted[plant]
        if not any(matches(example, target) for example in result["examples"])
    ]
    assert len(run.planted[plant]) == getattr(EVERY_ANOMALY, plant) * (
        run.shape.txn_size if plant == "order_skip" else 1
    )
    assert missing == []


def test_an_input_duplicate_reflected_once_per_copy_is_not_blamed_on_the_pipeline(spark, tmp_path):
    """Two input records with one id are two records to process: two outputs are exactly-once."""
    run = generate(spark, tmp_path, SHAPE, Plants(duplicate_input=2), parquet=False)
    assert failing_counts(check_run(spark, run.run_dir, lineage=False)) == {
        "delivery.duplicate-input": 2
    }


def test_order_reports_backwards_reads_and_skipped_records_apart(planted):
    run, verdict = planted
    counts = verdict["checks"]["isolation.order"]["counts"]
    assert counts == {"backwards": 2, "skip": 2 * run.shape.txn_size}


def test_jepsens_names_count_what_each_check_found_under_them(planted):
    """Jepsen's nonmonotonic-poll and poll-skip are isolation.order's sub-kinds by name; its
    lost-write, duplicate and G1a are whole checks."""
    run, verdict = planted
    jepsen = {name: check["jepsen"] for name, check in verdict["checks"].items() if check["jepsen"]}
    plants = run.plants
    assert jepsen["isolation.order"] == {
        "nonmonotonic-poll": 2,
        "poll-skip": 2 * run.shape.txn_size,
    }
    assert jepsen["delivery.lost"] == {"lost-write": plants.lost}
    assert jepsen["delivery.duplicate"] == {
        "duplicate": verdict["checks"]["delivery.duplicate"]["count"]
    }
    assert jepsen["isolation.aborted-read"]["G1a"] > 0


def test_a_send_acknowledged_below_the_producers_previous_one_is_nonmonotonic(spark, tmp_path):
    """Jepsen's nonmonotonic-send: in each planted pair the later send call landed at the
    lower offset; nothing else is wrong with those records (each is copied once)."""
    run = generate(spark, tmp_path, SHAPE, Plants(nonmonotonic_send=2), parquet=False)
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert failing_counts(verdict) == {"isolation.nonmonotonic-send": 2}
    examples = verdict["checks"]["isolation.nonmonotonic-send"]["examples"]
    assert [(e["partition"], e["offset"]) for e in examples] == [
        (p["partition"], p["offset"]) for p in run.planted["nonmonotonic_send"]
    ]
    assert all(e["sent_after"]["offset"] == e["offset"] + 1 for e in examples)


def test_a_correct_history_counts_none_under_jepsens_names(clean):
    checks = clean[1]["checks"]
    assert {name: check["jepsen"] for name, check in checks.items() if check["jepsen"]} == {
        "delivery.lost": {"lost-write": 0},
        "delivery.duplicate": {"duplicate": 0},
        "isolation.aborted-read": {"G1a": 0},
        "isolation.aborted-offset-read": {"G1a": 0},
        "isolation.order": {"nonmonotonic-poll": 0, "poll-skip": 0},
        "isolation.nonmonotonic-send": {"nonmonotonic-send": 0},
        "isolation.int-nonmonotonic-poll": {"int-nonmonotonic-poll": 0},
        "isolation.int-poll-skip": {"int-poll-skip": 0},
        "isolation.int-nonmonotonic-send": {"int-nonmonotonic-send": 0},
        "isolation.inconsistent-offsets": {"inconsistent-offsets": 0},
        "liveness.unseen": {"unseen": 0},
    }


def test_examples_are_capped_but_the_count_is_not(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, Plants(lost=4))
    result = check_run(spark, run.run_dir, max_examples=3, lineage=False)["checks"]["delivery.lost"]
    assert (result["count"], len(result["examples"])) == (4, 3)


def test_a_record_the_pipeline_never_reached_is_unseen_not_lost(spark, tmp_path):
    """Jepsen's unseen against lost-write: the group's committed offset stayed at the first of
    the records never delivered, so nothing was skipped; the pipeline stalled there."""
    run = generate(spark, tmp_path, SHAPE, Plants(unseen=2), parquet=False)
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert failing_counts(verdict) == {"liveness.unseen": 2, "liveness.group-offsets": 1}
    first = run.planted["unseen"][0]
    examples = verdict["checks"]["liveness.unseen"]["examples"]
    assert [e["id"] for e in examples] == [u["id"] for u in run.planted["unseen"]]
    assert {e["group_offset"] for e in examples} == {first["offset"]}


def test_a_partition_the_group_stalled_on_says_since_when(spark, tmp_path):
    """Since the first record it never committed past was acknowledged, in seconds into the
    run: the moment the pipeline had input it would never move past."""
    run = generate(spark, tmp_path, SHAPE, Plants(unseen=2), parquet=False)
    verdict = check_run(spark, run.run_dir, lineage=False)
    first = run.planted["unseen"][0]
    rows = [
        json.loads(line)
        for path in (run.run_dir / "history").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    acked = next(
        row["time"]
        for row in rows
        if row["kind"] == "send"
        and row["type"] == "ok"
        and (row["partition"], row["offset"]) == (first["partition"], first["offset"])
    )
    start = min(row["time"] for row in rows)
    [example] = verdict["checks"]["liveness.group-offsets"]["examples"]
    assert example["partition"] == first["partition"]
    assert example["stalled_since_s"] == round(acked - start, 1) > 0


def test_without_the_groups_offsets_a_record_never_delivered_is_lost(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, Plants(unseen=2), parquet=False)
    end_state = run.run_dir / "history" / "end-state.jsonl"
    lines = end_state.read_text().splitlines(keepends=True)
    end_state.write_text("".join(line for line in lines if '"group-offset"' not in line))
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert failing_counts(verdict) == {"delivery.lost": 2}
    assert "liveness.unseen" in verdict["not_applicable"]


def test_fenced_attempts_are_counted_without_failing(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, Plants(fenced_attempts=2))
    verdict = check_run(spark, run.run_dir, lineage=False)
    zombie = verdict["checks"]["fencing.zombie-write"]
    assert (verdict["verdict"], zombie["counts"]["rejected_attempts"]) == ("PASS", 2)
    assert verdict["stats"]["transactions"]["fenced"] == 2


def test_a_call_that_hung_past_its_timeout_is_counted_not_taken_for_a_rejection(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, Plants(hung_calls=1, fenced_attempts=2))
    verdict = check_run(spark, run.run_dir, lineage=False)
    transactions = verdict["stats"]["transactions"]
    assert (verdict["verdict"], transactions["hung"], transactions["rejected_attempts"]) == (
        "PASS",
        1,
        2,
    )


def test_alos_history_lists_transactional_checks_as_not_applicable(spark, tmp_path):
    shape = RunShape(mode="alos", abort_every=0)
    run = generate(spark, tmp_path, shape, Plants(duplicate=1))
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert sorted(verdict["not_applicable"]) == sorted({*NEEDS_TRANSACTIONS, *NEVER_APPLIED})
    assert not set(NEEDS_TRANSACTIONS) & set(verdict["checks"])
    assert failing_counts(verdict) == {"delivery.duplicate": 1}


def test_history_without_end_state_lists_liveness_and_offset_reads_as_not_applicable(
    spark, tmp_path
):
    run = generate(spark, tmp_path, SHAPE, parquet=False)
    (run.run_dir / "history" / "end-state.jsonl").unlink()
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert sorted(verdict["not_applicable"]) == sorted(
        [
            "liveness.lso",
            "liveness.group-offsets",
            "liveness.unseen",
            "liveness.open-transactions",
            "isolation.aborted-offset-read",
            *NEVER_APPLIED,
        ]
    )
    # nothing failed, but a run without its end state did not reach its end (issue 17)
    assert (verdict["verdict"], verdict["unfinished"]) == (
        "UNKNOWN",
        ["no end state (log-end rows)"],
    )


@pytest.mark.parametrize("workload", ["streams", "spark", "copier", "byo"])
def test_black_box_workload_lists_per_transaction_checks_as_not_applicable(
    spark, tmp_path, workload
):
    """A run dir recorded before capabilities were: judged as its workload declared."""
    run = generate(spark, tmp_path, SHAPE, parquet=False)
    manifest = json.loads((run.run_dir / "run.json").read_text())
    del manifest["capabilities"]
    (run.run_dir / "run.json").write_text(json.dumps({**manifest, "workload": workload}))
    verdict = check_run(spark, run.run_dir, lineage=False)
    undeclared = NEEDS_FAILURE_EXITS if workload != "streams" else ()
    assert sorted(verdict["not_applicable"]) == sorted(
        {*NEEDS_TXN_HISTORY, *undeclared, *NEVER_APPLIED}
    )
    assert "isolation.aborted-offset-read" in verdict["checks"]


def test_a_history_without_the_coordinators_states_lists_stale_commit_as_not_applicable(
    spark, tmp_path
):
    """Runs before the coordinators' logs were recorded, or whose logs could not be read,
    judge the rest."""
    run = generate(spark, tmp_path, SHAPE, Plants(stale_commit=1, lost=1), parquet=False)
    (run.run_dir / HISTORY_DIR / f"{LOG_BATCHES}.jsonl").unlink()
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert sorted(verdict["not_applicable"]) == sorted(
        {*NEEDS_COORDINATOR_STATES, *NEEDS_OFFSET_COMMITS, *NEVER_APPLIED}
    )
    assert "coordinators" in verdict["not_applicable"]["fencing.stale-commit"]
    assert "offset commits" in verdict["not_applicable"]["delivery.input-committed-twice"]
    assert failing_counts(verdict) == {"delivery.lost": 1}


def test_checks_follow_the_recorded_capabilities_not_the_workload_name(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, parquet=False)
    manifest = json.loads((run.run_dir / "run.json").read_text())
    black_box = Capabilities(
        transactions=True,
        transaction_history=False,
        output_is_copies=True,
        assigned_transactional_ids=True,
    )
    manifest.update(workload="kip447", **black_box.to_manifest())
    (run.run_dir / "run.json").write_text(json.dumps(manifest))
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert sorted(verdict["not_applicable"]) == sorted(
        {*NEEDS_TXN_HISTORY, *NEEDS_FAILURE_EXITS, *NEVER_APPLIED}
    )


def test_offset_reads_catch_an_aborted_read_without_transaction_history(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, Plants(aborted_read=2), parquet=False)
    manifest = json.loads((run.run_dir / "run.json").read_text())
    del manifest["capabilities"]  # judged as a byo run declares: no transaction history
    (run.run_dir / "run.json").write_text(json.dumps({**manifest, "workload": "byo"}))
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert failing_counts(verdict) == {"isolation.aborted-offset-read": 2}


def test_a_history_that_changed_since_it_was_checked_is_judged_as_it_is_now(spark, tmp_path):
    """One session re-checking a run dir (a matrix, the pytest plugin) reads the files again,
    never the lines it parsed the first time."""
    run = generate(spark, tmp_path, SHAPE, parquet=False)
    assert check_run(spark, run.run_dir, lineage=False)["verdict"] == "PASS"
    scan = run.run_dir / HISTORY_DIR / f"{FINAL_COMMITTED}.jsonl"
    lines = scan.read_text().splitlines(keepends=True)
    last_output = max(i for i, line in enumerate(lines) if '"output-topic"' in line)
    scan.write_text("".join(lines[:last_output] + lines[last_output + 1 :]))
    assert failing_counts(check_run(spark, run.run_dir, lineage=False))["delivery.lost"] == 1


def test_truncated_history_is_checked_and_flagged_incomplete(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, Plants(lost=1), parquet=False)
    with (Path(run.run_dir) / "history" / "observer.jsonl").open("a") as history:
        history.write('{"kind":"read","type":"ok","f":"po')
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert (verdict["verdict"], verdict["complete"]) == ("FAIL", False)
    assert failing_counts(verdict) == {"delivery.lost": 1}
    assert "observer.jsonl" in verdict["damage"][0]


ANOMALIES = st.dictionaries(st.sampled_from(sorted(PLANT_CHECKS)), st.integers(1, 2), max_size=4)
# Each example is a synthetic run and a check (~3 s): a few in CI, where `planted` above already
# plants every anomaly at once, and many nightly (`pytest -m chaos`), for the combinations.
CI_EXAMPLES, NIGHTLY_EXAMPLES = 5, 60


def every_planted_anomaly_is_reported_and_none_invented(spark, tmp_path_factory, chosen, seed):
    run = generate(spark, tmp_path_factory.mktemp("property"), SHAPE, Plants(**chosen), seed=seed)
    verdict = check_run(spark, run.run_dir, max_examples=ALL_EXAMPLES, lineage=False)
    assert failing_counts(verdict) == run.expected
    for plant in chosen:
        examples = verdict["checks"][PLANT_CHECKS[plant]]["examples"]
        assert all(any(matches(e, t) for e in examples) for t in run.planted[plant])


(
    test_every_planted_anomaly_is_reported_and_none_invented,
    test_every_planted_anomaly_is_reported_and_none_invented_nightly,
) = in_ci_and_nightly(
    every_planted_anomaly_is_reported_and_none_invented,
    CI_EXAMPLES,
    NIGHTLY_EXAMPLES,
    chosen=ANOMALIES,
    seed=st.integers(0, 10_000),
)


def _cut_before_its_end(run_dir: Path) -> None:
    """As a run killed during its final scans leaves it: no final scan, no end state."""
    for writer in (*FINAL_SCANS, END_STATE):
        (run_dir / HISTORY_DIR / f"{writer}.jsonl").unlink(missing_ok=True)


def test_a_run_that_did_not_reach_its_end_is_unknown_never_pass(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, seed=3, parquet=False)
    _cut_before_its_end(run.run_dir)
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert (verdict["verdict"], verdict["complete"]) == ("UNKNOWN", False)
    assert verdict["unfinished"] == [
        "no final-committed scan of the output",
        "no end state (log-end rows)",
    ]


def test_an_anomaly_found_in_an_unfinished_run_is_still_a_fail(spark, tmp_path):
    run = generate(spark, tmp_path, SHAPE, Plants(aborted_read=1), seed=3, parquet=False)
    _cut_before_its_end(run.run_dir)
    verdict = check_run(spark, run.run_dir, lineage=False)
    assert (verdict["verdict"], verdict["complete"]) == ("FAIL", False)
    assert verdict["checks"]["isolation.aborted-read"]["verdict"] == "FAIL"


def test_eoschaos_check_exits_3_on_an_unfinished_run_naming_what_it_lacks(
    spark, tmp_path, monkeypatch, capsys
):
    """The command line's own path (`main`), in this session's warm Spark: a cold one would
    add half a minute and nothing this test is about. Its judge must leave the session
    running for the next test, and its signal handlers must not outlive it."""
    run = generate(spark, tmp_path, SHAPE, seed=3, parquet=False)
    _cut_before_its_end(run.run_dir)
    monkeypatch.setattr(WarmJudge, "stop", lambda judge: None)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert cli.main(["check", str(run.run_dir)]) == 3
    finally:  # main's own handlers are the command's, not this session's
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert "verdict: UNKNOWN; the run did not reach its end" in capsys.readouterr().err
