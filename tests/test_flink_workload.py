"""The Flink workload's cluster, as configured and restarted (eoschaos.workloads.flink): pure
logic, no cluster. Its runs on a real cluster are scenarios (tests/test_scenarios.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eoschaos.contract.errors import EoschaosError
from eoschaos.workloads.flink.build import JOBMANAGER_CLASS, TASKMANAGER_CLASS, FlinkJob
from eoschaos.workloads.flink.pipeline import (
    JOBMANAGER,
    LOOPBACK,
    TASK_SLOTS,
    FlinkPipeline,
    latest_checkpoint,
    parallelism,
)

JOB = FlinkJob(home=Path("/flink"), java="java", classpath="job.jar:libs/*")


def _pipeline(tmp_path: Path, instances: int = 3) -> FlinkPipeline:
    pipeline = FlinkPipeline(JOB, "output", instances, "eoschaos-flink-run")
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
        FlinkPipeline(JOB, "output", 1, "prefix")


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
