"""pytest plugin (entry point `pytest11`): the `chaos` marker and fixtures for chaos scenarios.

In a user's repository, `pytest -m chaos` then runs scenarios such as

    @pytest.mark.chaos
    def test_pipeline_survives_broker_kills(eoschaos_run):
        verdict = eoschaos_run(mode="eos", faults="kill,zombie", duration=40, seed=7)
        assert verdict["verdict"] == "PASS", verdict["report"]

One real cluster serves the whole session (`eoschaos_cluster`); each run gets its own topics,
group and run directory, so runs never see each other's records, and a failing run's report
path is in the assertion message.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_run_numbers = itertools.count()
DEFAULT_INSTANCE_LANES = 3  # the kip447 default instance count


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("eoschaos")
    group.addoption(
        "--eoschaos-kafka-version",
        default=None,
        help="Kafka version of the eoschaos session cluster (default: eoschaos' default)",
    )
    group.addoption(
        "--eoschaos-instance-lanes",
        type=int,
        default=DEFAULT_INSTANCE_LANES,
        help="client lanes of the session cluster: instances 0..N-1 each get their own, which "
        f"fault isolate-instance needs (default {DEFAULT_INSTANCE_LANES})",
    )
    group.addoption(
        "--eoschaos-protocol-proxy",
        action="store_true",
        help="put the Kafka protocol proxy on the session cluster's client links, which the "
        "faults on chosen requests need (lose-endtxn-response, coordinator-error, ...)",
    )
    group.addoption(
        "--eoschaos-runs",
        default=None,
        help="keep chaos run directories here instead of pytest's temporary directory",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "chaos: a chaos scenario on a real cluster (select with `pytest -m chaos`)"
    )


@pytest.fixture(scope="session")
def eoschaos_cluster(pytestconfig: pytest.Config, tmp_path_factory) -> Iterator[Any]:
    """A real 3-broker cluster behind Toxiproxy, shared by every run of the session."""
    from eoschaos.clusters import kafka_dist, toxiproxy
    from eoschaos.clusters.broker_config import ClusterSpec
    from eoschaos.clusters.process_backend import ProcessCluster

    dist = kafka_dist.resolve(pytestconfig.getoption("eoschaos_kafka_version"))
    run_dir = tmp_path_factory.mktemp(f"eoschaos-cluster-{dist.version}")
    lanes = pytestconfig.getoption("eoschaos_instance_lanes")
    protocol_proxy = pytestconfig.getoption("eoschaos_protocol_proxy")
    spec = ClusterSpec(brokers=3, instance_lanes=lanes, protocol_proxy=protocol_proxy)
    cluster = ProcessCluster(run_dir, spec, dist, toxiproxy.server_binary())
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def eoschaos_judge() -> Iterator[Any]:
    """One Spark session judges every run of the pytest session, started at the first: a
    verdict then costs its checks, not Spark's start and warm-up."""
    from eoschaos.run import WarmJudge

    judge = WarmJudge()
    yield judge
    judge.stop()


@pytest.fixture
def eoschaos_run(
    eoschaos_cluster: Any,
    eoschaos_judge: Any,
    pytestconfig: pytest.Config,
    tmp_path_factory,
    record_property: Callable[[str, object], None],
) -> Callable[..., dict[str, Any]]:
    """Run a workload under faults on the session cluster and return its verdict.

    Keyword arguments are those of `eoschaos run` (`faults` as a comma-separated string,
    or `schedule` as a list of eoschaos.chaos.schedule.FaultEvent for an explicit schedule).
    The verdict dict gains `run_dir` and `report` (the HTML report's path). Each check's
    verdict and the report's path are recorded as test properties, so `--junitxml` carries
    them next to the test.
    """
    from eoschaos.config import RunConfig, names_of_a_run
    from eoschaos.contract.checks import results_of
    from eoschaos.contract.rundir import REPORT_FILE
    from eoschaos.run import judge_run, record_on_cluster

    def run(spark_master: str | None = None, **options: Any) -> dict[str, Any]:
        number = next(_run_numbers)
        suffix = f"{number}-{options.get('mode', 'eos')}-s{options.get('seed', 0)}"
        config = RunConfig.from_options(
            **names_of_a_run(options.get("workload", "kip447"), suffix),
            kafka_version=eoschaos_cluster.dist.version,
            **options,
        )
        base = pytestconfig.getoption("eoschaos_runs")
        if base:
            run_dir = unused_run_dir(Path(base), f"run-{suffix}")
        else:
            run_dir = tmp_path_factory.mktemp(f"run-{suffix}")
        record_on_cluster(config, run_dir, eoschaos_cluster.run_dir)
        if spark_master:  # a Spark of the caller's choice, for this verdict alone
            eoschaos_judge.stop()
            verdict = judge_run(run_dir, spark_master=spark_master)
        else:
            verdict = eoschaos_judge.judge(run_dir)[0]
        record_property(f"eoschaos.{suffix}.verdict", verdict["verdict"])
        record_property(f"eoschaos.{suffix}.report", str(run_dir / REPORT_FILE))
        for name, check in results_of(verdict).items():
            record_property(f"eoschaos.{suffix}.{name}", f"{check.verdict} ({check.count})")
        return {**verdict, "run_dir": str(run_dir), "report": str(run_dir / REPORT_FILE)}

    return run


def unused_run_dir(base: Path, name: str) -> Path:
    """A new directory BASE/NAME, or NAME.2, NAME.3, ...: run numbers restart with each pytest
    session, and a run kept in --eoschaos-runs by an earlier session must neither stop this one
    nor be overwritten by it."""
    base.mkdir(parents=True, exist_ok=True)
    candidate, attempt = base / name, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            attempt += 1
            candidate = base / f"{name}.{attempt}"
