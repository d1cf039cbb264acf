"""The Flink job (workloads/flink/job) as a pipeline of the harness: a real Flink cluster.

Instance 0 is the JobManager, in application mode: it runs the job's main and schedules it.
Instances 1.. are TaskManagers, each with TASK_SLOTS slots; they run the source readers, the
keyed operator and the KafkaSink. All are plain JVM processes of the same classpath, so the
supervisor kills, pauses and replaces them like any other instance:

- a killed TaskManager: the JobManager restarts the job from its latest completed checkpoint on
  the slots left (every TaskManager but one could carry it), and the replacement registers;
- a killed JobManager: there is no high availability to recover the job from, so its next
  incarnation submits the job again from the latest completed checkpoint on disk
  (`--fromSavepoint`), which is what an operator's restart script does. Without one yet, it
  starts where the group committed.

Under `eos` the sink writes each checkpoint's output in a transaction, committed when the
checkpoint completes; under `alos` (AT_LEAST_ONCE) it only flushes at checkpoints, so a restore
replays what followed the last one. Besides the 1:1 echo the job keeps count/sum/min/max of the
ids per bucket (id mod BUCKETS) in keyed state and writes each update to the aggregate topic, as
the Streams app does, so the same aggregate check judges both.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eoschaos.clusters.ports import port_in_use
from eoschaos.contract.errors import EoschaosError
from eoschaos.workloads.flink.build import FlinkJob
from eoschaos.workloads.flink.checkpoints import record_checkpoints
from eoschaos.workloads.harness.final import record_aggregates
from eoschaos.workloads.harness.supervisor import Launch, Supervisor
from eoschaos.workloads.streams.pipeline import AGGREGATE_READ_TIMEOUT_S, BUCKETS, aggregate_topic

MODES = ("eos", "alos")  # DeliveryGuarantee.EXACTLY_ONCE / AT_LEAST_ONCE
JOBMANAGER = 0
LOOPBACK = "127.0.0.1"
TASK_SLOTS = 2
CHECKPOINT_INTERVAL_MS = 2000
# Past a JobManager's restart (JVM start, resubmission, TaskManagers registering again) with
# room to spare: the broker must not abort a pre-committed transaction before the restored job
# commits it. Flink documents that a job kept down longer loses that checkpoint's output;
# chaos/matrices/flink-down-past-timeout.toml does that on purpose (docs/findings.md).
TRANSACTION_TIMEOUT_MS = 60000
# Heartbeats well under Flink's 50 s default, so a killed or paused TaskManager is declared
# lost, and its tasks restarted elsewhere, within seconds, as a broker's session timeout does.
HEARTBEAT_INTERVAL_MS = 1000
HEARTBEAT_TIMEOUT_MS = 6000
FLINK_PORTS = range(32000, 32768)  # the JobManager's RPC and REST ports (_free_port)
_CHECKPOINT_DONE = "_metadata"  # a chk-N directory holding it is a completed checkpoint


def taskmanagers(instances: int) -> int:
    return instances - 1


def parallelism(instances: int) -> int:
    """The job's: all TaskManagers but one can carry it, so a lost one's tasks restart on the
    slots left at once; a single TaskManager carries it alone."""
    return max(TASK_SLOTS, (taskmanagers(instances) - 1) * TASK_SLOTS)


def check_instances(instances: int) -> None:
    if instances < 2:
        raise EoschaosError(
            f"--workload flink runs a JobManager and at least one TaskManager: --instances "
            f"{instances} leaves no TaskManager; give --instances 2 or more"
        )


@dataclass(frozen=True)
class FlinkDirs:
    """The cluster's files in the run dir: its configuration, the job's checkpoints, and what
    Flink writes to temporary and working dirs (in /tmp by default, where a killed JVM would
    leave it)."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def work(self) -> Path:
        return self.root / "work"


class FlinkPipeline:
    observer_isolation = "read_committed"
    joins_group = False  # the KafkaSource assigns partitions itself; it only commits offsets
    extra_topics: tuple[str, ...]

    def __init__(self, job: FlinkJob, output_topic: str, instances: int, prefix: str) -> None:
        check_instances(instances)
        self._job = job
        self._aggregates = aggregate_topic(output_topic)
        self.extra_topics = (self._aggregates,)
        self._parallelism = parallelism(instances)
        self._prefix = prefix
        self._dirs: FlinkDirs | None = None
        self._rest_port = 0

    def prepare(self, workload_dir: Path) -> None:
        """Write the cluster's configuration: every address on loopback, the JobManager's
        RPC and REST ports fixed for the run (TaskManagers and restarts find it there)."""
        dirs = self._dirs = FlinkDirs(workload_dir / "flink")
        for directory in (dirs.conf, dirs.checkpoints, dirs.tmp, dirs.work):
            directory.mkdir(parents=True, exist_ok=True)
        taken: set[int] = set()
        self._rest_port = _free_port(taken)
        settings = {
            "jobmanager.rpc.address": LOOPBACK,
            "jobmanager.rpc.port": _free_port(taken),
            "jobmanager.bind-host": LOOPBACK,
            "jobmanager.memory.process.size": "640m",
            "rest.address": LOOPBACK,
            "rest.bind-address": LOOPBACK,
            "rest.port": self._rest_port,
            "taskmanager.host": LOOPBACK,
            "taskmanager.bind-host": LOOPBACK,
            "taskmanager.numberOfTaskSlots": TASK_SLOTS,
            # A TaskManager started without Flink's scripts must be given its resources
            # explicitly (the scripts compute them from a process size); within the JVM's
            # flags in workloads/flink/build.py.
            "taskmanager.cpu.cores": TASK_SLOTS,
            "taskmanager.memory.framework.heap.size": "96m",
            "taskmanager.memory.framework.off-heap.size": "64m",
            "taskmanager.memory.task.heap.size": "256m",
            "taskmanager.memory.task.off-heap.size": "0m",
            "taskmanager.memory.managed.size": "32m",
            "taskmanager.memory.network.min": "32m",
            "taskmanager.memory.network.max": "32m",
            "taskmanager.memory.jvm-metaspace.size": "128m",
            "taskmanager.memory.jvm-overhead.min": "64m",
            "taskmanager.memory.jvm-overhead.max": "64m",
            "heartbeat.interval": HEARTBEAT_INTERVAL_MS,
            "heartbeat.timeout": HEARTBEAT_TIMEOUT_MS,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1000000,
            "restart-strategy.fixed-delay.delay": "1 s",
            "state.backend.type": "hashmap",
            "execution.checkpointing.dir": dirs.checkpoints.as_uri(),
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "execution.checkpointing.num-retained": 3,
            "execution.checkpointing.timeout": "30 s",
            "slot.request.timeout": "60 s",
            "io.tmp.dirs": str(dirs.tmp),
            "process.working-dir": str(dirs.work),
        }
        (dirs.conf / "config.yaml").write_text(
            "".join(f"{key}: {value}\n" for key, value in settings.items())
        )

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        dirs = self._prepared()
        if instance != JOBMANAGER:
            return Launch(self._job.taskmanager_command(dirs.conf, dirs.tmp), env)
        extra = {
            "EOSCHAOS_AGGREGATE_TOPIC": self._aggregates,
            "EOSCHAOS_BUCKETS": str(BUCKETS),
            "EOSCHAOS_FLINK_PARALLELISM": str(self._parallelism),
            "EOSCHAOS_FLINK_CHECKPOINT_INTERVAL_MS": str(CHECKPOINT_INTERVAL_MS),
            "EOSCHAOS_FLINK_TRANSACTION_TIMEOUT_MS": str(TRANSACTION_TIMEOUT_MS),
            "EOSCHAOS_FLINK_TRANSACTIONAL_ID_PREFIX": self._prefix,
        }
        restore = latest_checkpoint(dirs.checkpoints) if incarnation > 0 else None
        command = self._job.jobmanager_command(dirs.conf, dirs.tmp, restore)
        return Launch(command, {**env, **extra})

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        return None  # the KafkaSink names its transactions: <prefix>-<subtask>-<checkpoint>

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        return None

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        """The aggregates, and the checkpoints the JobManagers' logs tell (for the timeline)."""
        record_aggregates(bootstrap, run_dir, self._aggregates, BUCKETS, AGGREGATE_READ_TIMEOUT_S)
        record_checkpoints(self._prepared().root.parent, run_dir, JOBMANAGER)

    def ready_for_input(self) -> bool:
        """Once the job runs with every task running: three JVMs must start and the job be
        scheduled first, and input sent meanwhile would all be processed in the first
        checkpoint, before any fault."""
        return job_running(self._rest_port)

    def in_crash_window(self, state_dir: Path, since: float, output_end: Callable[[], int]) -> bool:
        return True  # any moment will do

    def _prepared(self) -> FlinkDirs:
        if self._dirs is None:
            raise RuntimeError("prepare() was not called")
        return self._dirs


def latest_checkpoint(checkpoints: Path) -> Path | None:
    """The newest completed checkpoint under `checkpoints` (<job id>/chk-<n>/_metadata), of
    any job the run submitted: each JobManager incarnation's job has an id of its own."""
    done = [path.parent for path in checkpoints.glob(f"*/chk-*/{_CHECKPOINT_DONE}")]
    if not done:
        return None
    return max(done, key=lambda path: (path.stat().st_mtime, int(path.name.split("-")[1])))


def job_running(rest_port: int) -> bool:
    """The JobManager's REST API says a job is RUNNING with all its tasks running."""
    url = f"http://{LOOPBACK}:{rest_port}/jobs/overview"
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            jobs = json.load(answer).get("jobs", [])
    except (OSError, urllib.error.URLError, ValueError):
        return False  # not up yet, or restarting
    return any(
        job.get("state") == "RUNNING"
        and job.get("tasks", {}).get("running") == job.get("tasks", {}).get("total")
        for job in jobs
    )


def _free_port(taken: set[int]) -> int:
    """A loopback port free now, for the JobManager to bind once the run starts it, and again
    after each of its restarts: between the clusters' blocks (20000-32000) and Linux's
    ephemeral range (32768 up), where no outgoing connection can take it meanwhile; from a
    random place, so two runs starting at once rarely meet."""
    candidates = list(FLINK_PORTS)
    random.shuffle(candidates)
    for port in candidates:
        if port not in taken and not port_in_use(port):
            taken.add(port)
            return port
    raise EoschaosError(
        f"no free port on {LOOPBACK} in {FLINK_PORTS.start}-{FLINK_PORTS.stop - 1} for the "
        "Flink JobManager; stop what holds them"
    )
