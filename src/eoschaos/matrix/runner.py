"""Running a matrix for throughput on one machine, and resuming it.

One cluster per Kafka version serves all of that version's cell runs (each with topics and a
group of its own, as the pytest plugin does); it is health-checked before every cell run and
started afresh when a run left it unhealthy. One Spark session, started at the first check,
judges every run. Cell runs go one after another: on two cores, two at once would each be
slower than both in a row, and the faults' timing would be the machine's, not the schedule's.

results.jsonl is the ledger: a row is appended (and synced) when a cell run is judged, so a
matrix killed at any moment resumes with the same --out and judges no cell run twice.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eoschaos.chaos.catalogue import needs_protocol_proxy
from eoschaos.clusters import admin, kafka_dist, toxiproxy
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.contract.checks import results_of
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import REPORT_FILE, read_manifest
from eoschaos.matrix.spec import CellRun
from eoschaos.run import WarmJudge, record_on_cluster

RESULTS_FILE = "results.jsonl"
RUNS_DIR = "runs"
CLUSTERS_DIR = "clusters"
HEALTH_TIMEOUT_S = 60.0


def run_dirs(paths: list[Path]) -> list[Path]:
    """The run directories that paths name: each a run dir itself, or a matrix output dir whose
    cell runs are under RUNS_DIR (for the scripts that read runs after the fact)."""
    found: list[Path] = []
    for path in paths:
        runs = path / RUNS_DIR
        found += sorted(runs.iterdir()) if runs.is_dir() else [path]
    return found


class InfrastructureFailed(EoschaosError):
    """The matrix could not provide what cells run on (a cluster that does not start)."""


@dataclass
class MatrixOutcome:
    rows: list[dict[str, Any]]  # every judged cell run in DIR, earlier invocations' included
    not_run: list[CellRun] = field(default_factory=list)  # left when the budget was spent


def read_results(out: Path) -> list[dict[str, Any]]:
    """The ledger's rows; a last line cut short by a kill is no row."""
    path = Path(out) / RESULTS_FILE
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def run_matrix(
    runs: list[CellRun],
    out: Path,
    *,
    max_minutes: float | None = None,
    spark_master: str | None = None,
    progress: Callable[[str], None] = progress_to_stderr,
) -> MatrixOutcome:
    out.mkdir(parents=True, exist_ok=True)
    rows = read_results(out)
    done = {row["key"] for row in rows}
    pending = [run for run in runs if run.key not in done]
    if done:
        progress(f"resuming: {len(runs) - len(pending)} of {len(runs)} cell runs already judged")
    deadline = time.monotonic() + max_minutes * 60 if max_minutes is not None else None
    outcome = MatrixOutcome(rows)
    judge = WarmJudge(spark_master, progress)
    try:
        for version in dict.fromkeys(run.kafka_version for run in pending):
            group = [run for run in pending if run.kafka_version == version]
            with SharedCluster(out, version, group, progress) as shared:
                for run in group:
                    if deadline is not None and time.monotonic() >= deadline:
                        outcome.not_run.append(run)
                        continue
                    row = run_cell(run, len(rows) + 1, out, shared, judge, progress)
                    append_row(out, row)
                    rows.append(row)
    finally:
        judge.stop()
    return outcome


def run_cell(
    run: CellRun,
    number: int,
    out: Path,
    shared: SharedCluster,
    judge: WarmJudge,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    progress(f"cell run {run.key}: {run.expect} expected")
    run_dir = _fresh_run_dir(out, run)
    row: dict[str, Any] = {
        "key": run.key,
        "name": run.cell,
        "workload": run.options.get("workload", "kip447"),
        "mode": run.options.get("mode", "eos"),
        "faults": _faults_of(run),
        "kafka_version": run.kafka_version,
        "seed": run.seed,
        "expected": str(run.expect),
        "run_dir": str(run_dir.relative_to(out)),
        "seconds": {"cluster": shared.take_start_seconds()},
    }
    try:
        config = run.config(f"m{number}")
        started = time.monotonic()
        record_on_cluster(config, run_dir, shared.ensure_healthy().run_dir)
        row["seconds"]["record"] = round(time.monotonic() - started, 1)
        row["seconds"]["cluster"] += shared.take_start_seconds()
        verdict, seconds = judge.judge(run_dir)
    except InfrastructureFailed:
        raise
    except Exception as exc:  # a cell that errors is recorded, and the matrix goes on
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        progress(f"cell run {run.key}: ERROR: {reason}")
        return {**row, "verdict": "ERROR", "met_expectation": False, "reason": reason}
    row["seconds"].update({phase: round(value, 1) for phase, value in seconds.items()})
    failed = {
        name: {"count": check.count, **check.counts}
        for name, check in results_of(verdict).items()
        if check.failed
    }
    met = run.expect.met_by(verdict)
    progress(
        f"cell run {run.key}: {verdict['verdict']}"
        + (f" ({', '.join(failed)})" if failed else "")
        + ("" if met else f"; UNMET, {run.expect} was expected")
    )
    return {
        **row,
        "verdict": verdict["verdict"],
        "met_expectation": met,
        "failed": failed,
        "report": str((run_dir / REPORT_FILE).relative_to(out)),
        "versions": versions_in_play(run_dir),
    }


def versions_in_play(run_dir: Path) -> dict[str, str]:
    """A cell run's versions, compared between nights. The Java client a Streams app was built
    against is named apart from the cluster's Kafka: it decides the transaction protocol."""
    manifest = read_manifest(run_dir)
    cluster = manifest.get("cluster") or {}
    client = {"kafka_client": manifest["client_version"]} if "client_version" in manifest else {}
    return {
        **manifest.get("versions", {}),
        "kafka": manifest.get("kafka_version", ""),
        **client,
        "transaction_version": str(cluster.get("transaction_version", "")),
    }


def _faults_of(run: CellRun) -> str:
    if "schedule" in run.options:
        return f"schedule {Path(run.options['schedule']).name}"
    return str(run.options.get("faults", ""))


def _fresh_run_dir(out: Path, run: CellRun) -> Path:
    """DIR/runs/<cell run>; a directory left by a killed attempt is kept aside, not reused."""
    run_dir = out / RUNS_DIR / run.dir_name
    if run_dir.exists():
        attempt = 1
        while (aside := run_dir.with_name(f"{run.dir_name}.killed-{attempt}")).exists():
            attempt += 1
        shutil.move(run_dir, aside)
    run_dir.mkdir(parents=True)
    return run_dir


def append_row(out: Path, row: dict[str, Any]) -> None:
    with (out / RESULTS_FILE).open("a") as ledger:
        ledger.write(json.dumps(row, default=str) + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())


class SharedCluster:
    """The cluster of one Kafka version, started when its first cell run needs it."""

    def __init__(
        self, out: Path, version: str, runs: list[CellRun], progress: Callable[[str], None]
    ) -> None:
        self._out, self._progress = out, progress
        self._dist = kafka_dist.resolve(version)
        # isolate-instance cuts an instance's own lane: as many lanes as the widest cell
        self._lanes = max(run.config("lanes").pipeline.instances for run in runs)
        self._protocol_proxy = any(
            needs_protocol_proxy(event.fault for event in run.config("faults").schedule())
            for run in runs
        )
        self._cluster: ProcessCluster | None = None
        self._starts = 0
        self._start_seconds = 0.0

    def __enter__(self) -> SharedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cluster is not None:
            self._cluster.stop()

    def take_start_seconds(self) -> float:
        """Seconds spent starting clusters since last asked (charged to the cell run)."""
        seconds, self._start_seconds = self._start_seconds, 0.0
        return round(seconds, 1)

    def ensure_healthy(self) -> ProcessCluster:
        if self._cluster is not None:
            try:
                self._cluster.wait_healthy(timeout=HEALTH_TIMEOUT_S)
                return self._cluster
            except (EoschaosError, admin.ClusterNotReady) as exc:
                self._progress(f"the shared cluster is unhealthy ({exc}); starting a new one")
                self._cluster.stop()
                self._cluster = None
        with _infrastructure(f"Kafka {self._dist.version} cluster"):
            self._starts += 1
            spec = ClusterSpec(
                brokers=3,
                kafka_version=self._dist.version,
                instance_lanes=self._lanes,
                protocol_proxy=self._protocol_proxy,
            )
            cluster_dir = self._out / CLUSTERS_DIR / f"{self._dist.version}-{self._starts}"
            while cluster_dir.exists():  # an earlier, interrupted invocation's: kept as it is
                self._starts += 1
                cluster_dir = cluster_dir.with_name(f"{self._dist.version}-{self._starts}")
            started = time.monotonic()
            cluster = ProcessCluster(
                cluster_dir, spec, self._dist, toxiproxy.server_binary(), progress=self._progress
            )
            cluster.start()
            self._start_seconds += time.monotonic() - started
            self._cluster = cluster
        return cluster


@contextmanager
def _infrastructure(what: str) -> Iterator[None]:
    try:
        yield
    except (EoschaosError, admin.ClusterNotReady) as exc:
        raise InfrastructureFailed(f"{what} could not be started: {exc}") from exc
