"""`eoschaos check --spark-master spark://…` on a real Spark standalone cluster (master and
workers from the pyspark distribution, on loopback): the same verdict as a local check, work
done by the cluster's executors, nothing listening beyond loopback, and one clear line when the
cluster cannot do the check."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from listening import descendants, is_loopback, listening_addresses
from spark_standalone import LOOPBACK, StandaloneSpark, free_port

from eoschaos.checkers.spark import EXECUTOR_WAIT_ENV, MASTER_REGISTRATION_TIMEOUT_S, QUICK_JIT
from eoschaos.contract.rundir import VERDICT_FILE
from eoschaos.run import judge_in_session
from eoschaos.testing import Plants, RunShape, generate

PLANTS = Plants(lost=2, duplicate=1, aborted_read=1, order_backwards=1)
# What differs between two judgements of one history by design: how long, and where.
TIMING = ("seconds", "spark_master")


def check(run_dir: Path, master: str, env: dict[str, str] | None = None):
    return subprocess.Popen(
        [sys.executable, "-m", "eoschaos.cli", "check", str(run_dir), "--spark-master", master],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def assert_one_error_line(stderr: str, *phrases: str) -> None:
    """The error is the last line, one line, and no stack trace came before it (the JVM's own
    start-up warnings may)."""
    assert "Traceback" not in stderr and "\tat org.apache" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("eoschaos: error: "), stderr
    for phrase in phrases:
        assert phrase in last, last


def spark_drivers() -> set[int]:
    """Every PySpark driver JVM on the machine (their launcher names the app resource so)."""
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"pyspark-shell" in cmdline.read_bytes():
                found.add(int(cmdline.parent.name))
        except OSError:
            pass
    return found


def without_timing(verdict: dict) -> dict:
    return {
        **verdict,
        "checker": {k: v for k, v in verdict["checker"].items() if k not in TIMING},
    }


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    cluster = StandaloneSpark(tmp_path_factory.mktemp("spark-standalone")).start()
    yield cluster
    cluster.stop()


@dataclass
class ClusterCheck:
    exit_code: int
    stderr: str
    verdict: dict
    local_verdict: dict
    expected: dict[str, int]
    listening: dict[int, list[str]]  # every process of the check and of the cluster, sampled
    executor_command: str  # an executor's command line, as sampled (empty: none was seen)
    apps_after: list[dict]  # the applications the master saw complete


@pytest.fixture(scope="module")
def cluster_check(spark, standalone, tmp_path_factory) -> ClusterCheck:
    """One history with planted anomalies, judged locally (the session's Spark) and by the
    CLI on the standalone cluster, whose processes are sampled for listeners meanwhile."""
    local = tmp_path_factory.mktemp("local-check") / "run"
    run = generate(spark, local, RunShape(records=2048), PLANTS, seed=5)
    remote = local.parent.parent / "cluster-check-run"
    shutil.copytree(local, remote)
    child = check(remote, standalone.url)
    listening: dict[int, list[str]] = {}
    executor = ""
    while child.poll() is None:
        pids = [child.pid, *descendants(child.pid)]
        for pid in standalone.pids():
            pids += [pid, *descendants(pid)]
        for pid, addresses in listening_addresses(pids).items():
            listening.setdefault(pid, []).extend(addresses)
            executor = executor or _executor_command(pid)
        time.sleep(0.2)
    _, stderr = child.communicate()
    local_verdict, _ = judge_in_session(spark, local, lambda _: None)
    return ClusterCheck(
        exit_code=child.returncode,
        stderr=stderr,
        verdict=json.loads((remote / VERDICT_FILE).read_text()),
        local_verdict=local_verdict,
        expected=run.expected,
        listening=listening,
        executor_command=executor,
        apps_after=standalone.state()["completedapps"],
    )


def _executor_command(pid: int) -> str:
    """The process's command line if it is a Spark executor, else empty."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
    return command if "CoarseGrainedExecutorBackend" in command else ""


def test_a_check_on_a_standalone_cluster_gives_the_verdict_of_a_local_check(cluster_check):
    assert cluster_check.exit_code == 1, cluster_check.stderr  # FAIL: anomalies were planted
    found = {
        name: check["count"]
        for name, check in cluster_check.verdict["checks"].items()
        if check["verdict"] == "FAIL"
    }
    assert found == cluster_check.expected
    assert without_timing(cluster_check.verdict) == without_timing(cluster_check.local_verdict)


def test_the_check_ran_on_the_clusters_executors(cluster_check, standalone):
    assert cluster_check.verdict["checker"]["spark_master"] == standalone.url
    assert [app["name"] for app in cluster_check.apps_after] == ["eoschaos-check"]
    assert cluster_check.executor_command, "no executor of the check was seen running"


def test_the_executors_of_a_small_history_compile_its_plans_with_the_quick_jit(cluster_check):
    assert all(flag in cluster_check.executor_command.split() for flag in QUICK_JIT.split())


def test_everything_a_standalone_check_starts_listens_on_loopback_only(cluster_check):
    assert cluster_check.listening, "the check's processes listen somewhere: it must be seen"
    assert {
        pid: wide
        for pid, addresses in cluster_check.listening.items()
        if (wide := [address for address in addresses if not is_loopback(address)])
    } == {}


def test_a_master_that_does_not_answer_is_one_line_and_exit_2(spark, tmp_path):
    run = generate(spark, tmp_path / "run", RunShape(records=512), Plants())
    master = f"spark://{LOOPBACK}:{free_port()}"
    started = time.monotonic()
    child = check(run.run_dir, master)
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 2
    assert_one_error_line(stderr, master, "does not answer")
    assert time.monotonic() - started < 60


@pytest.mark.chaos  # waits out the registration bound (40 s)
def test_a_master_that_never_registers_the_application_is_one_line_and_exit_2(spark, tmp_path):
    run = generate(spark, tmp_path / "run", RunShape(records=512), Plants())
    with socket.create_server((LOOPBACK, 0)) as impostor:  # accepts, never speaks Spark
        master = f"spark://{LOOPBACK}:{impostor.getsockname()[1]}"
        drivers = spark_drivers()
        started = time.monotonic()
        child = check(run.run_dir, master)
        _, stderr = child.communicate(timeout=120)
    assert child.returncode == 2
    assert_one_error_line(stderr, master, "did not register this application")
    assert time.monotonic() - started < MASTER_REGISTRATION_TIMEOUT_S + 20
    assert spark_drivers() - drivers == set()


def test_a_cluster_with_no_room_for_an_executor_is_one_line_and_exit_2(spark, standalone, tmp_path):
    run = generate(spark, tmp_path / "run", RunShape(records=512), Plants())
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.executor.memory 64g\n")  # no worker has it
    env = dict(os.environ, SPARK_CONF_DIR=str(conf), **{EXECUTOR_WAIT_ENV: "3"})
    drivers = spark_drivers()
    child = check(run.run_dir, standalone.url, env)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 2
    assert_one_error_line(stderr, standalone.url, "no executor", "spark.executor.memory=64g")
    assert spark_drivers() - drivers == set()
    assert _eventually(lambda: standalone.state()["activeapps"] == [])


def _eventually(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_run_dir_the_executors_cannot_read_is_one_line_and_exit_2(spark, tmp_path):
    shared_here_only = tmp_path / "not-shared"
    run = generate(spark, shared_here_only / "run", RunShape(records=512), Plants())
    cluster = StandaloneSpark(tmp_path / "spark", hidden_from_workers=shared_here_only)
    try:
        cluster.start()
    except RuntimeError as error:
        pytest.skip(f"no mount namespace for a worker here (needs root and unshare): {error}")
    try:
        child = check(run.run_dir, cluster.url)
        _, stderr = child.communicate(timeout=180)
    finally:
        cluster.stop()
    assert child.returncode == 2
    assert_one_error_line(stderr, "executors cannot read", str(run.run_dir))
