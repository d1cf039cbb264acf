"""`eoschaos run`: cluster → workload under a fault schedule → history → verdict → report.

The run is split so that each half can fail without losing the other's work: `record_run`
produces a history (and always tears the cluster down), `judge_run` turns any run directory's
history into verdict.json and report.html. `eoschaos check` is `judge_run` alone.
"""

from __future__ import annotations

import faulthandler
import json
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eoschaos.chaos.catalogue import fixed_number
from eoschaos.chaos.nemesis import Nemesis
from eoschaos.chaos.schedule import (
    FaultEvent,
    random_schedule,
    resolve_random,
    validate_schedule,
    write_schedule,
)
from eoschaos.clusters import kafka_dist, toxiproxy
from eoschaos.clusters.base import Cluster
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.contract.capabilities import Capabilities
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.rundir import (
    PARQUET_DIR,
    REPORT_FILE,
    SCHEDULE_FILE,
    VERDICT_FILE,
    write_manifest,
)
from eoschaos.workloads import registry
from eoschaos.workloads.harness.expected import load_expect
from eoschaos.workloads.harness.pipeline import PipelineConfig, WorkloadFailed
from eoschaos.workloads.harness.reader import IdSource

BACKENDS = ("process", "containers")
CATCH_UP_TIMEOUT_S = 90.0
SCHEDULE_OVERRUN_S = 120.0
# An interrupted recording child heals its faults (a killed broker restarts: up to 120 s) and
# stops its instances before it exits.
INTERRUPTED_CHILD_GRACE_S = 180.0


@dataclass
class RunConfig:
    """Everything `eoschaos run` was asked for; saved in run.json."""

    workload: str = "kip447"
    mode: str = "eos"
    faults: list[str] = field(default_factory=list)
    schedule_events: list[dict[str, Any]] | None = None  # an explicit schedule (--schedule)
    intensity: str = "normal"
    recovery_wait: bool = True  # before a broker fault, wait for URPs of the last to clear
    non_idempotent_seeder: bool = False
    duration: float = 30.0
    seed: int = 0
    records: int = 20000
    instances: int | None = None  # None: the workload's default (registry.instance_count)
    partitions: int = 6
    brokers: int = 3
    kafka_version: str = kafka_dist.DEFAULT_KAFKA_VERSION
    backend: str = "process"
    image: str | None = None
    input_topic: str = "input-topic"
    output_topic: str = "output-topic"
    group: str = ""  # default: eoschaos-<workload>
    command: str | None = None  # --workload byo: the line that starts one instance
    id_from: str = "key"  # where output records name their source id (docs/byo.md)
    expect: str = ""  # --workload byo: MODULE:FUNCTION, the expected output per key
    start_timeout: float | None = None  # seconds until first output (None: the workload's)

    def __post_init__(self) -> None:
        self.group = self.group or f"eoschaos-{self.workload}"

    def instance_count(self) -> int:
        return registry.instance_count(self.workload, self.mode, self.partitions, self.instances)

    def validate(self) -> None:
        registry.check_options(self.workload, self.mode, self.workload_options())
        try:
            IdSource(self.id_from)
        except ValueError as exc:
            raise EoschaosError(str(exc)) from exc
        if self.expect:
            if self.workload != "byo":
                raise EoschaosError(f"--expect is for --workload byo, not {self.workload}")
            load_expect(self.expect)  # a module that does not load is bad input, now
        self.instances = self.instance_count()
        if self.backend not in BACKENDS:
            raise EoschaosError(
                f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}"
            )
        if self.start_timeout is None:
            self.start_timeout = registry.KINDS[self.workload].start_timeout_s
        if self.start_timeout <= 0:
            raise EoschaosError(f"--start-timeout must be > 0 seconds, got {self.start_timeout:g}")
        if self.duration <= 0:
            raise EoschaosError(f"--duration must be > 0 seconds, got {self.duration:g}")
        if self.schedule_events is not None:
            validate_schedule(
                self.schedule(),
                brokers=ClusterSpec(brokers=self.brokers).node_ids,
                instances=self.instance_count(),
                duration=self.duration,
                partitions=self.partitions,
            )
        elif self.faults and not self.schedule():
            raise EoschaosError(
                f"--duration {self.duration:g}s leaves no room for the faults "
                f"{','.join(self.faults)}; use --duration 20 or more"
            )

    def command_line(self) -> list[str]:
        """The `eoschaos run` command that repeats this run (same seed, same schedule)."""
        line = ["eoschaos", "run", "--workload", self.workload, "--mode", self.mode]
        if self.schedule_events is not None:
            line += ["--schedule", SCHEDULE_FILE]
        elif self.faults:
            line += ["--faults", ",".join(self.faults)]
            if self.intensity != "normal":
                line += ["--intensity", self.intensity]
        line += ["--duration", f"{self.duration:g}", "--seed", str(self.seed)]
        if self.command is not None:
            line += ["--command", self.command]
        if self.id_from != "key":
            line += ["--id-from", self.id_from]
        if self.expect:
            line += ["--expect", self.expect]
        line += ["--records", str(self.records), "--instances", str(self.instance_count())]
        line += ["--partitions", str(self.partitions), "--kafka-version", self.kafka_version]
        if not self.recovery_wait:
            line += ["--no-recovery-wait"]
        if self.non_idempotent_seeder:
            line += ["--non-idempotent-seeder"]
        if self.backend != "process":
            line += ["--backend", self.backend] + (["--image", self.image] if self.image else [])
        return line

    def schedule(self) -> list[FaultEvent]:
        """The explicit schedule (random targets resolved from the seed), else a random one."""
        brokers = ClusterSpec(brokers=self.brokers).node_ids
        if self.schedule_events is not None:
            events = [FaultEvent(**entry) for entry in self.schedule_events]
            return resolve_random(events, self.seed, brokers, self.instance_count())
        return random_schedule(
            self.faults,
            self.duration,
            self.seed,
            brokers,
            self.instance_count(),
            intensity=self.intensity,
            partitions=self.partitions,
            transactions=self.capabilities().assigned_transactional_ids,
        )

    def capabilities(self) -> Capabilities:
        kind = registry.KINDS[self.workload]
        return kind.capabilities(self.mode, expect=bool(self.expect))

    def workload_config(self) -> PipelineConfig:
        return PipelineConfig(
            workload=self.workload,
            mode=self.mode,
            records=self.records,
            partitions=self.partitions,
            instances=self.instance_count(),
            seed=self.seed,
            seed_seconds=self.duration,  # input flows while any fault can hit
            input_topic=self.input_topic,
            output_topic=self.output_topic,
            group=self.group,
            non_idempotent_seeder=self.non_idempotent_seeder,
            id_from=self.id_from,
            expect=self.expect,
        )

    def workload_options(self) -> registry.WorkloadOptions:
        return registry.WorkloadOptions(command=self.command)


def _versions() -> dict[str, str]:
    import confluent_kafka
    import pyspark

    from eoschaos import __version__

    return {
        "eoschaos": __version__,
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "spark": pyspark.__version__,
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
    """
    registry.prepare(
        config.workload, cluster.dist.version if cluster else config.kafka_version, progress
    )
    schedule = config.schedule()
    manifest: dict[str, Any] = {
        **asdict(config),
        "command": config.command_line(),
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
            instance_lanes=config.instance_count(),
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
        _drive(config, run_dir, cluster, schedule, progress)
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
) -> None:
    check_lanes(schedule, cluster)
    workload = registry.build_workload(
        config.workload_config(),
        config.workload_options(),
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
    finally:
        stop.set()
        nemesis.close()
        workload.close()
    if failures:
        raise EoschaosError(f"the nemesis failed: {failures[0]}")


def check_lanes(schedule: list[FaultEvent], cluster: Cluster) -> None:
    """isolate-instance cuts the instance's own lane; a shared cluster may have too few."""
    lanes = cluster.spec.instance_lanes
    for event in schedule:
        instance = fixed_number(event.target)
        if event.fault == "isolate-instance" and instance is not None and instance >= lanes:
            raise EoschaosError(
                f"fault isolate-instance on {event.target} needs a client lane for that "
                f"instance, and this cluster has {lanes}; start the pytest session with "
                f"--eoschaos-instance-lanes {instance + 1}"
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
    """History → verdict.json + report.html in run_dir. Returns the verdict."""
    from eoschaos.checkers.history_io import compact_history
    from eoschaos.checkers.spark import spark_session
    from eoschaos.checkers.verdict import check_run
    from eoschaos.reports.html import write_report

    spark = spark_session(spark_master)
    try:
        if not (run_dir / PARQUET_DIR / "_SUCCESS").exists():
            progress("compacting the history to Parquet")
            compact_history(spark, run_dir)
        progress("checking the history")
        verdict = check_run(spark, run_dir)
    finally:
        spark.stop()
    (run_dir / VERDICT_FILE).write_text(json.dumps(verdict, indent=2, default=str) + "\n")
    write_report(verdict, run_dir / REPORT_FILE)
    return verdict


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

    with subprocess.Popen(
        [sys.executable, "-m", "eoschaos.run", str(cluster_dir), str(run_dir)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as child:
        try:
            _, stderr = child.communicate(json.dumps(asdict(config)))
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
        raise EoschaosError(f"recording {run_dir} failed (exit {child.returncode}): {detail}")


if __name__ == "__main__":  # the child of record_on_cluster: python -m eoschaos.run CLUSTER RUN
    import sys

    _cluster = ProcessCluster.attach(Path(sys.argv[1]))
    record_run(RunConfig(**json.load(sys.stdin)), Path(sys.argv[2]), cluster=_cluster)
