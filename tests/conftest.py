"""Shared fixtures: one real cluster per Kafka version, healed after every test.

At the end of the session every process any test started (read from each run dir's
append-only PID history) must be dead; a survivor fails the session and is killed.

With EOSCHAOS_CLUSTER_RERUNS=N (scripts/test.sh sets 1), a failed real-cluster test runs up to
N more times (pytest-rerunfailures), and every rerun is listed in one block at the very end of
the output: a rerun is a flake to find the cause of, never something to pass unnoticed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_versions import KAFKA_VERSIONS
from commandline import run_eoschaos

from eoschaos.chaos.nemesis import Nemesis
from eoschaos.clusters import kafka_dist, processes, toxiproxy
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.contract.host import cache_root

CLUSTER_RERUNS = int(os.environ.get("EOSCHAOS_CLUSTER_RERUNS", "0"))
RUN_DIRS: list[Path] = []  # every run dir a test made; checked for survivors at session end


@pytest.fixture(scope="session", params=KAFKA_VERSIONS)
def session_cluster(request, tmp_path_factory) -> Iterator[ProcessCluster]:
    dist = kafka_dist.resolve(request.param)
    run_dir = tmp_path_factory.mktemp(f"cluster-{dist.version}")
    RUN_DIRS.append(run_dir)
    spec = ClusterSpec(brokers=3, instance_lanes=2)  # two lanes: one to cut, one to spare
    cluster = ProcessCluster(run_dir, spec, dist, toxiproxy.server_binary())
    with cluster:
        yield cluster


@pytest.fixture(scope="module")
def proxied_cluster(tmp_path_factory) -> Iterator[ProcessCluster]:
    """A cluster with the Kafka protocol proxy on every client link, on the first version."""
    run_dir = tmp_path_factory.mktemp("proxied-cluster")
    RUN_DIRS.append(run_dir)
    spec = ClusterSpec(brokers=3, instance_lanes=1, protocol_proxy=True)
    dist = kafka_dist.resolve(KAFKA_VERSIONS[0])
    with ProcessCluster(run_dir, spec, dist, toxiproxy.server_binary()) as cluster:
        yield cluster


@pytest.fixture
def cluster(session_cluster: ProcessCluster) -> Iterator[ProcessCluster]:
    """The session's cluster, put back to full health after the test whatever it broke."""
    yield session_cluster
    session_cluster.heal_network()
    for node_id in session_cluster.spec.node_ids:
        if session_cluster.node_alive(node_id):
            session_cluster.resume_node(node_id)
        else:
            session_cluster.start_node(node_id)
    session_cluster.wait_healthy(timeout=120)


@pytest.fixture
def nemesis(cluster: ProcessCluster, tmp_path: Path):
    """Make a Nemesis on the test's cluster, aimed at what the test names; closed after."""

    def make(aim: Any) -> Nemesis:
        made = Nemesis(cluster, aim, tmp_path, progress=print)
        created.append(made)
        return made

    created: list[Nemesis] = []
    yield make
    for made in created:
        made.close()


@pytest.fixture
def eoschaos() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the `eoschaos` command line as a user would, in a child process."""
    return run_eoschaos


@pytest.fixture
def private_cache(tmp_path: Path) -> Callable[..., dict[str, str]]:
    """An environment whose eoschaos cache holds only the given entries of the real one.

    Lets a test reuse downloads ("kafka", "toxiproxy") while its run registry and everything
    else it would cache stay private.
    """

    def environment(*shared: str) -> dict[str, str]:
        cache = tmp_path / "cache"
        cache.mkdir()
        for entry in shared:
            (cache / entry).symlink_to(cache_root() / entry)
        return dict(os.environ, EOSCHAOS_CACHE=str(cache))

    return environment


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A not-yet-existing run dir for a CLI test, registered for the survivor check."""
    path = tmp_path / "run"
    RUN_DIRS.append(path)
    return path


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    survivors = [p for d in RUN_DIRS for p in processes.still_alive(d / "pids")]
    for proc in survivors:
        processes.signal_group(proc, signal.SIGKILL)
    if survivors:
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in survivors)
        session.config.get_terminal_writer().line(f"processes left running by tests: {names}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if CLUSTER_RERUNS:
        for item in items:
            if item.get_closest_marker("cluster"):
                item.add_marker(pytest.mark.flaky(reruns=CLUSTER_RERUNS))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter) -> None:
    reruns = terminalreporter.stats.get("rerun", [])
    if not reruns:
        return
    terminalreporter.section(f"{len(reruns)} rerun(s): each is a flake whose cause must be found")
    for report in reruns:
        crash = getattr(report.longrepr, "reprcrash", None)
        cause = crash.message if crash is not None else str(report.longrepr)
        terminalreporter.line(f"RERUN {report.nodeid}: {' '.join(cause.split())[:400]}")
