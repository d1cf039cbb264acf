"""`eoschaos run`: cluster → workload under a fault schedule → history → verdict → report.

The run is split so that each half can fail without losing the other's work: `record_run`
produces a history (and always tears the cluster down), `judge_run` turns any run directory's
history into verdict.json and report.html. `eoschaos check` is `judge_run` alone.
"""

from __future__ import annotations

import faulthandler
import json
import os
import platform
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from eoschaos.chaos.catalogue import CATALOGUE, fixed_number, needs_protocol_proxy
from eoschaos.chaos.nemesis import Nemesis
from eoschaos.chaos.schedule import (
    FaultEvent,
    write_schedule,
)
from eoschaos.clusters import kafka_dist, toxiproxy
from eoschaos.clusters.base import Cluster
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.log_dump import record_log_batches
from eoschaos.clusters.offset_log import record_offset_log
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.clusters.transaction_log import record_transaction_log
from eoschaos.config import RunConfig
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.history import LOG_BATCHES, HistoryWriter
from eoschaos.contract.host import java_binary
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import (
    PARQUET_DIR,
    REPORT_FILE,
    SCHEDULE_FILE,
    VERDICT_FILE,
    write_manifest,
)
from eoschaos.diskguard import DiskGuard
from eoschaos.workloads import registry
from eoschaos.workloads.harness.pipeline import WorkloadFailed

CATCH_UP_TIMEOUT_S = 90.0
SCHEDULE_OVERRUN_S = 120.0
# An interrupted recording child heals its faults (a killed broker restarts: up to 120 s) and
# stops its instances before it exits.
INTERRUPTED_CHILD_GRACE_S = 180.0


def _versions() -> dict[str, str]:
    """What was in play, so two nights differ only in what changed on purpose."""
    import subprocess

    import confluent_kafka
    import pyspark

    from eoschaos import __version__

    java = java_binary()
    jdk = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    revision = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short=12", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "eoschaos": __version__,
        # the checkout eoschaos runs from, when it is one (an editable install)
        "eoschaos_revision": revision.stdout.strip() if revision.returncode == 0 else "",
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "spark": pyspark.__version__,
        "jdk": (jdk.stderr.strip().splitlines() or [""])[0],
    }


def record_run(
    config: RunConfig,
    run_dir: Path,
    *,
    cluster: Cluster | None = None,
    progress: Callable[[str], None] = progress_to_stderr,
) -> None:
    """Run the workload under its fault schedule and leave a complete history in run_dir.

    With `cluster` given (the pytest plugin's session cluster) the run uses it and leaves it
    running and healthy; otherwise it starts its own under run_dir/cluster and stops it.
    A run whose disk runs low stops as if interrupted, with one line saying so (DiskGuard).
    """
    with DiskGuard(run_dir):
        _record(config, run_dir, cluster, progress)


def _record(
    config: RunConfig,
    run_dir: Path,
    cluster: Cluster | None,
    progress: Callable[[str], None],
) -> None:
    registry.prepare(
        config.pipeline, cluster.dist.version if cluster else config.kafka_version, progress
    )
    schedule = config.schedule()
    manifest: dict[str, Any] = {
        **config.to_manifest(),
        **config.capabilities().to_manifest(),
        "schedule": [event.to_json() for event in schedule],
        "versions": _versions(),
        "started": time.time(),
    }
    write_manifest(run_dir, manifest)
    write_schedule(run_dir / SCHEDULE_FILE, schedule)
    # A crash inside a native client library (librdkafka) would otherwise leave no trace of
    # where the harness was; the history itself is safe either way.
    crash_log = (run_dir / "harness-crash.log").open("w")
    faulthandler.enable(file=crash_log, all_threads=True)
    own_cluster = cluster is None
    if cluster is None:
        dist = kafka_dist.resolve(config.kafka_version)
        # a lane per instance: any run may cut an instance off (isolate-instance)
        spec = ClusterSpec(
            brokers=config.brokers,
            kafka_version=dist.version,
            instance_lanes=config.pipeline.instances,
            protocol_proxy=config.protocol_proxy
            or needs_protocol_proxy(event.fault for event in schedule),
        )
        if config.backend == "containers":
            from eoschaos.clusters.containers_backend import ContainerCluster

            cluster = ContainerCluster(
                run_dir / "cluster", spec, dist, image=config.image, progress=progress
            )
        else:
            cluster = ProcessCluster(
                run_dir / "cluster", spec, dist, toxiproxy.server_binary(), progress=progress
            )
    try:
        if own_cluster:
            cluster.start()
        assert cluster.info is not None
        manifest["cluster"] = asdict(cluster.info)
        manifest["kafka_version"] = cluster.info.kafka_version
        manifest["backend"] = cluster.info.backend
        write_manifest(run_dir, manifest)
        _drive(config, run_dir, cluster, schedule, progress, manifest["started"])
    finally:
        manifest["ended"] = time.time()
        write_manifest(run_dir, manifest)
        if own_cluster:
            cluster.stop()
        faulthandler.disable()
        crash_log.close()
        if (run_dir / "harness-crash.log").stat().st_size == 0:
            (run_dir / "harness-crash.log").unlink()


def _drive(
    config: RunConfig,
    run_dir: Path,
    cluster: Cluster,
    schedule: list[FaultEvent],
    progress: Callable[[str], None],
    started: float,
) -> None:
    check_lanes(schedule, cluster)
    check_protocol_proxy(schedule, cluster)
    workload = registry.build_workload(
        config.pipeline,
        cluster.bootstrap,
        run_dir,
        cluster.dist,
        progress,
        cluster.instance_bootstrap,
    )
    nemesis = Nemesis(
        cluster,
        workload,
        run_dir,
        progress,
        wait_for_recovery=config.recovery_wait,
        seed=config.seed,
    )
    stop = threading.Event()
    failures: list[BaseException] = []

    def nemesis_main() -> None:
        try:
            nemesis.run(schedule, t0, stop)
        except BaseException as exc:  # surfaced after the run; the cluster is made whole anyway
            failures.append(exc)

    try:
        workload.setup()
        workload.start(hold_input=nemesis.overdue)
        try:
            workload.wait_running(timeout=config.start_timeout)
        except WorkloadFailed as exc:
            raise EoschaosError(str(exc)) from exc
        t0 = time.monotonic()
        thread = threading.Thread(target=nemesis_main, name="nemesis", daemon=True)
        thread.start()
        progress(f"workload {config.workload}/{config.mode} running for {config.duration:g}s")
        thread.join(config.duration)
        time.sleep(max(0.0, t0 + config.duration - time.monotonic()))
        if thread.is_alive():
            # Recovery took longer than planned (a slow machine): the rest of the schedule
            # still runs, late, so every planned fault hits; the history has the real times.
            progress("the fault schedule runs late; waiting for its last faults")
            thread.join(config.duration + SCHEDULE_OVERRUN_S)
        stop.set()
        thread.join()
        nemesis.heal_all()
        _make_whole(cluster, progress)
        if not workload.wait_seeded(timeout=CATCH_UP_TIMEOUT_S):
            progress("the seeder did not finish; unsent records are recorded as such")
        if workload.input_held_s >= 1:
            progress(f"input was held {workload.input_held_s:.0f}s while faults ran late")
        if not workload.wait_caught_up(timeout=CATCH_UP_TIMEOUT_S):
            progress("the processors did not catch up with the input; liveness will say so")
        workload.stop()
        workload.final_scans()
        _record_log_batches(config, run_dir, cluster, started, progress)
    finally:
        stop.set()
        nemesis.close()
        workload.close()
    if failures:
        raise EoschaosError(f"the nemesis failed: {failures[0]}")


def _record_log_batches(
    config: RunConfig,
    run_dir: Path,
    cluster: Cluster,
    since: float,
    progress: Callable[[str], None],
) -> None:
    """The batch headers of the run's topics, for the checker's forensics; the
    coordinators' transaction states since `since`, for fencing.stale-commit; and the
    offset commits of the run's group and topics, with the markers that resolved them.
    Three reads of the stopped-writing logs by Kafka's tool, each a JVM of its own, at once
    (the writer takes one row at a time)."""
    writer = HistoryWriter(run_dir, LOG_BATCHES)
    topics = set(config.pipeline.topics.all)
    dumps = {
        "log batch headers": lambda: record_log_batches(
            cluster.dist, cluster.data_dirs(), topics, writer
        ),
        "transaction states": lambda: record_transaction_log(
            cluster.dist, cluster.data_dirs(), since, writer
        ),
        "offset commits": lambda: record_offset_log(
            cluster.dist, cluster.data_dirs(), since, {config.pipeline.group}, topics, writer
        ),
    }
    try:
        with ThreadPoolExecutor(max_workers=len(dumps)) as pool:
            list(pool.map(lambda item: _evidence(*item, progress), dumps.items()))
    finally:
        writer.close()


def _evidence(what: str, dump: Callable[[], int], progress: Callable[[str], None]) -> None:
    """Evidence, not a verdict: when Kafka's tool cannot read the logs, the run says so and
    goes on."""
    started = time.monotonic()
    try:
        count = dump()
        progress(f"recorded {count} {what} in {time.monotonic() - started:.1f}s")
    except Exception as exc:
        progress(f"{what} not recorded: {str(exc).splitlines()[0][:300]}")


def check_lanes(schedule: list[FaultEvent], cluster: Cluster) -> None:
    """Faults on an instance's own lane (isolate-instance, delay-endtxn); a shared cluster may
    have too few."""
    lanes = cluster.spec.instance_lanes
    for event in schedule:
        instance = fixed_number(event.target)
        needs_lane = CATALOGUE[event.fault].needs_lane
        if needs_lane and instance is not None and instance >= lanes:
            raise EoschaosError(
                f"fault {event.fault} on {event.target} needs a client lane for that "
                f"instance, and this cluster has {lanes}; start the pytest session with "
                f"--eoschaos-instance-lanes {instance + 1}"
            )


def check_protocol_proxy(schedule: list[FaultEvent], cluster: Cluster) -> None:
    """Faults on chosen requests need the protocol proxy, which a shared cluster may lack."""
    for event in schedule:
        if CATALOGUE[event.fault].needs_protocol_proxy and not cluster.spec.protocol_proxy:
            raise EoschaosError(
                f"fault {event.fault} acts on chosen Kafka requests, and this cluster has no "
                "protocol proxy; start the pytest session with --eoschaos-protocol-proxy, or "
                f"leave {event.fault} out of --faults"
            )


def _make_whole(cluster: Cluster, progress: Callable[[str], None]) -> None:
    """All faults healed: every proxy clean, every broker running, no under-replication."""
    cluster.heal_network()
    for node_id in cluster.spec.node_ids:
        if cluster.node_alive(node_id):
            cluster.resume_node(node_id)  # harmless unless a pause was left behind
        else:
            progress(f"broker {node_id} is down after the faults; restarting it")
            cluster.start_node(node_id)
    cluster.wait_healthy(timeout=120)


def judge_run(
    run_dir: Path,
    *,
    spark_master: str | None = None,
    progress: Callable[[str], None] = progress_to_stderr,
) -> dict[str, Any]:
    """History → verdict.json + report.html in run_dir, in a Spark session of its own."""
    judge = WarmJudge(spark_master, progress)
    try:
        return judge.judge(run_dir)[0]
    finally:
        judge.stop()


class WarmJudge:
    """One Spark session for every verdict of a matrix or a pytest session, started at the
    first: Spark's start and the JIT's warm-up are paid once, not per verdict. The JVM's
    options follow the first history's size (checkers.spark.java_options_for)."""

    def __init__(
        self, master: str | None = None, progress: Callable[[str], None] = progress_to_stderr
    ) -> None:
        self._master, self._progress, self._spark = master, progress, None

    def judge(self, run_dir: Path) -> tuple[dict[str, Any], dict[str, float]]:
        if self._spark is None:
            from eoschaos.checkers.spark import java_options_for, spark_session

            self._spark = spark_session(self._master, java_options=java_options_for(run_dir))
        return judge_in_session(self._spark, run_dir, self._progress)

    def stop(self) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None


def judge_in_session(
    spark: Any, run_dir: Path, progress: Callable[[str], None] = progress_to_stderr
) -> tuple[dict[str, Any], dict[str, float]]:
    """judge_run in a session that stays warm for the next run (a matrix); returns the
    verdict and the seconds its phases took (check: compaction included; report)."""
    from eoschaos.checkers.history_io import compact_history
    from eoschaos.checkers.spark import failures_explained
    from eoschaos.checkers.verdict import check_run
    from eoschaos.reports.html import write_report

    started = time.monotonic()
    with failures_explained(f"checking {run_dir}"):
        if not (run_dir / PARQUET_DIR / "_SUCCESS").exists():
            progress("compacting the history to Parquet")
            compact_history(spark, run_dir)
        progress("checking the history")
        verdict = check_run(spark, run_dir)
    checked = time.monotonic()
    (run_dir / VERDICT_FILE).write_text(json.dumps(verdict, indent=2, default=str) + "\n")
    write_report(verdict, run_dir / REPORT_FILE)
    seconds = {"check": checked - started, "report": time.monotonic() - checked}
    return verdict, seconds


def record_on_cluster(config: RunConfig, run_dir: Path, cluster_dir: Path) -> None:
    """record_run in a child process, on the running cluster of `cluster_dir`.

    The pytest plugin records this way so that a crash inside a native client library ends
    one run with its harness-crash.log, not the whole test session.

    Ctrl-C is passed on as one SIGINT, and the child is given time to heal its faults and stop
    its instances: subprocess.run would SIGKILL it, orphaning them. The child has a session
    of its own, so a terminal's Ctrl-C reaches it only this way, once.
    """
    import signal
    import subprocess
    import sys

    from eoschaos.contract.instance_env import PARENT_PID

    with subprocess.Popen(
        [sys.executable, "-m", "eoschaos.run", str(cluster_dir), str(run_dir)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, PARENT_PID: str(os.getpid())},  # its orphan watch's parent
    ) as child:
        try:
            _, stderr = child.communicate(json.dumps(config.to_json()))
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            try:
                child.communicate(timeout=INTERRUPTED_CHILD_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
    sys.stderr.write(stderr)
    if child.returncode != 0:
        crash = run_dir / "harness-crash.log"
        detail = crash.read_text()[-2000:] if crash.exists() else stderr[-2000:]
        # the exception's own line first: a one-line listing (a CI rerun's) cuts the tail
        last = next((line for line in reversed(detail.splitlines()) if line.strip()), "")
        raise EoschaosError(
            f"recording {run_dir} failed (exit {child.returncode}): {last.strip()}\n{detail}"
        )


if __name__ == "__main__":  # the child of record_on_cluster: python -m eoschaos.run CLUSTER RUN
    import sys

    from eoschaos.workloads.harness.orphan import interrupt_when_orphaned

    interrupt_when_orphaned()  # a parent killed with SIGKILL cannot pass Ctrl-C on
    _cluster = ProcessCluster.attach(Path(sys.argv[1]))
    record_run(RunConfig.from_json(json.load(sys.stdin)), Path(sys.argv[2]), cluster=_cluster)
