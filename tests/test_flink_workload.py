"""The Flink workload's cluster, as configured and restarted (eoschaos.workloads.flink), and its
checkpoints as the JobManager's log tells them and the timeline draws them: pure logic, no
cluster. Its runs on a real cluster are scenarios (tests/test_scenarios.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eoschaos.checkers.timeline import checkpoint_marks
from eoschaos.contract.errors import EoschaosError
from eoschaos.reports.svg import process_lanes
from eoschaos.workloads.flink.build import JOBMANAGER_CLASS, TASKMANAGER_CLASS, FlinkJob
from eoschaos.workloads.flink.checkpoints import checkpoint_events, record_checkpoints
from eoschaos.workloads.flink.pipeline import (
    FLINK_PORTS,
    JOBMANAGER,
    LOOPBACK,
    TASK_SLOTS,
    FlinkPipeline,
    latest_checkpoint,
    parallelism,
)

FLINK = FlinkJob(home=Path("/flink"), java="java", classpath="job.jar:libs/*")


def _pipeline(tmp_path: Path, instances: int = 3) -> FlinkPipeline:
    pipeline = FlinkPipeline(FLINK, "output", instances, "eoschaos-flink-run")
    pipeline.prepare(tmp_path)
    return pipeline


def _config(tmp_path: Path) -> dict[str, str]:
    """The cluster's config.yaml, flat `key: value` lines as Flink reads them."""
    lines = (tmp_path / "flink" / "conf" / "config.yaml").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines)


def _completed(checkpoints: Path, job: str, n: int, mtime: float) -> Path:
    done = checkpoints / job / f"chk-{n}"
    done.mkdir(parents=True)
    (done / "_metadata").write_bytes(b"")
    os.utime(done / "_metadata", (mtime, mtime))
    return done


def test_a_cluster_without_a_taskmanager_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EoschaosError, match="--instances 1 leaves no TaskManager"):
        FlinkPipeline(FLINK, "output", 1, "prefix")


def test_all_taskmanagers_but_one_carry_the_job() -> None:
    assert [parallelism(n) for n in (2, 3, 4)] == [TASK_SLOTS, TASK_SLOTS, 2 * TASK_SLOTS]


def test_every_address_of_the_cluster_is_loopback(tmp_path: Path) -> None:
    _pipeline(tmp_path)
    config = _config(tmp_path)
    addresses = {key: value for key, value in config.items() if "address" in key or "host" in key}
    assert set(addresses) == {
        "jobmanager.rpc.address",
        "jobmanager.bind-host",
        "rest.address",
        "rest.bind-address",
        "taskmanager.host",
        "taskmanager.bind-host",
    }
    assert set(addresses.values()) == {LOOPBACK}


def test_the_jobmanagers_ports_lie_below_the_ephemeral_range_and_differ(tmp_path: Path) -> None:
    """A restarted JobManager binds them again: no outgoing connection may hold one then."""
    _pipeline(tmp_path)
    config = _config(tmp_path)
    ports = {int(config["jobmanager.rpc.port"]), int(config["rest.port"])}
    assert len(ports) == 2
    assert all(port in FLINK_PORTS and port < 32768 for port in ports)


def test_flink_writes_its_temporary_files_in_the_run_dir(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    config = _config(tmp_path)
    assert config["io.tmp.dirs"] == str(tmp_path / "flink" / "tmp")
    assert config["process.working-dir"] == str(tmp_path / "flink" / "work")
    for instance in (JOBMANAGER, 1):
        argv = pipeline.launch(instance, 0, {}).argv
        assert f"-Djava.io.tmpdir={tmp_path / 'flink' / 'tmp'}" in argv


def test_instance_0_is_the_jobmanager_and_the_others_taskmanagers(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    assert JOBMANAGER_CLASS in pipeline.launch(JOBMANAGER, 0, {}).argv
    assert TASKMANAGER_CLASS in pipeline.launch(1, 0, {}).argv
    assert TASKMANAGER_CLASS in pipeline.launch(2, 3, {}).argv


def test_a_first_jobmanager_starts_the_job_fresh(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    _completed(tmp_path / "flink" / "checkpoints", "a" * 32, 1, 1000.0)
    assert "--fromSavepoint" not in pipeline.launch(JOBMANAGER, 0, {}).argv


def test_a_restarted_jobmanager_restores_the_newest_completed_checkpoint(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    checkpoints = tmp_path / "flink" / "checkpoints"
    _completed(checkpoints, "a" * 32, 7, 1000.0)
    newest = _completed(checkpoints, "b" * 32, 2, 2000.0)  # the next incarnation's job
    (checkpoints / ("b" * 32) / "chk-3").mkdir()  # in progress: no _metadata yet
    argv = pipeline.launch(JOBMANAGER, 1, {}).argv
    assert argv[argv.index("--fromSavepoint") + 1] == str(newest)


def test_a_restarted_jobmanager_without_a_checkpoint_starts_fresh(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    assert latest_checkpoint(tmp_path / "flink" / "checkpoints") is None
    assert "--fromSavepoint" not in pipeline.launch(JOBMANAGER, 2, {}).argv


def test_the_job_is_told_its_sink_and_checkpoints_in_its_environment(tmp_path: Path) -> None:
    env = _pipeline(tmp_path).launch(JOBMANAGER, 0, {"EOSCHAOS_MODE": "eos"}).env
    assert env["EOSCHAOS_MODE"] == "eos"
    assert env["EOSCHAOS_AGGREGATE_TOPIC"] == "output-aggregates"
    assert env["EOSCHAOS_FLINK_TRANSACTIONAL_ID_PREFIX"] == "eoschaos-flink-run"
    assert int(env["EOSCHAOS_FLINK_PARALLELISM"]) == TASK_SLOTS


COORDINATOR = "INFO org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
JOB = "3847a65ec098a87992a7b6696c37fc7d"
# A JobManager's log lines as Flink 2.2 writes them (shortened where the parser reads nothing)
JM_LOG = "".join(
    f"{stamp} [{thread}] {logger} - {message}\n"
    for stamp, thread, logger, message in (
        ("2026-12-04T01:44:27.274Z", "main", "INFO o.a.f.r.e.ClusterEntrypoint", "Starting"),
        (
            "2026-12-04T01:44:40.000Z",
            "jobmanager-io-thread-1",
            COORDINATOR,
            f"Restoring job {JOB} from Savepoint 16 @ 0 for {JOB} located at file:/x/chk-16.",
        ),
        (
            "2026-12-04T01:44:42.500Z",
            "Checkpoint Timer",
            COORDINATOR,
            f"Triggering checkpoint 17 (type=CheckpointType{{}}) @ 1796348682500 for job {JOB}.",
        ),
        (
            "2026-12-04T01:44:43.250Z",
            "jobmanager-io-thread-2",
            COORDINATOR,
            f"Completed checkpoint 17 for job {JOB} (8795 bytes, checkpointDuration=750 ms).",
        ),
        (
            "2026-12-04T01:44:44.500Z",
            "Checkpoint Timer",
            COORDINATOR,
            f"Triggering checkpoint 18 (type=CheckpointType{{}}) @ 1796348684500 for job {JOB}.",
        ),
    )
)


def test_the_jobmanagers_log_gives_each_checkpoint_and_restore_with_its_time(
    tmp_path: Path,
) -> None:
    log = tmp_path / "processor-0.1.log"
    log.write_text(JM_LOG)
    events = [(e.f, e.checkpoint, e.time) for e in checkpoint_events(log)]
    assert events == [
        ("restore", 16, 1796348680.0),
        ("trigger", 17, 1796348682.5),
        ("complete", 17, 1796348683.25),
        ("trigger", 18, 1796348684.5),
    ]


def test_each_jobmanager_incarnations_checkpoints_are_recorded_on_its_own_lane(
    tmp_path: Path,
) -> None:
    workload = tmp_path / "workload"
    workload.mkdir()
    (workload / "processor-0.0.log").write_text(JM_LOG.splitlines(keepends=True)[2])
    (workload / "processor-0.1.log").write_text(JM_LOG)
    (workload / "processor-1.0.log").write_text(JM_LOG)  # a TaskManager's: not read
    assert record_checkpoints(workload, tmp_path, JOBMANAGER) == 5
    rows = [json.loads(line) for line in (tmp_path / "history" / "flink-checkpoints.jsonl").open()]
    assert [(r["kind"], r["f"], r["instance"], r["incarnation"], r["count"]) for r in rows] == [
        ("checkpoint", "trigger", 0, 0, 17),
        ("checkpoint", "restore", 0, 1, 16),
        ("checkpoint", "trigger", 0, 1, 17),
        ("checkpoint", "complete", 0, 1, 17),
        ("checkpoint", "trigger", 0, 1, 18),
    ]
    start = rows[0]["time"] - 10.0
    marks = checkpoint_marks(rows, start)
    assert marks["instance 0.0"] == {"checkpoints": [[10.0, None, 17]], "restores": []}
    assert marks["instance 0.1"] == {
        "checkpoints": [[10.0, 10.75, 17], [12.0, None, 18]],
        "restores": [[7.5, 16]],
    }


def test_a_lane_draws_its_checkpoints_and_restores_with_what_each_was() -> None:
    lane = {
        "lane": "instance 0.1",
        "kind": "instance",
        "checkpoints": [[10.0, 10.75, 17], [12.0, None, 18]],
        "restores": [[7.5, 16]],
    }
    drawn = process_lanes([lane], [], 20.0)
    assert "checkpoint 17 triggered 10.000s, completed 10.750s" in drawn
    assert "checkpoint 18 triggered 12.000s, never completed" in drawn
    assert "restored from checkpoint 16 at 7.500s" in drawn
