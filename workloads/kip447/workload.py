"""The KIP-447 workload as the harness drives it: setup, start, faults on instances, stop, scans.

    with Kip447Workload(Kip447Config(records=5000), bootstrap, run_dir, dist) as workload:
        workload.setup()
        workload.start()
        workload.kill_instance(1)          # the supervisor starts incarnation 1 of instance 1
        workload.wait_seeded(60)
        workload.wait_caught_up(120)
        workload.stop()
        workload.final_scans()

Everything it starts is stopped by close() (also on exceptions, via the context manager);
processors' PID files and logs are under RUN_DIR/workload/.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import NewTopic

from clusters import admin
from clusters.kafka_dist import KafkaDistribution
from workloads.kip447.config import MODES, Kip447Config, ProcessorConfig
from workloads.kip447.final import ScanResult, final_scan, record_end_state, wait_settled
from workloads.kip447.observer import Observer
from workloads.kip447.offsets import (
    admin_for,
    end_offsets,
    group_offsets,
    members_with_partitions,
)
from workloads.kip447.seeder import Seeder
from workloads.kip447.supervisor import InstanceInfo, Supervisor

__all__ = ["MODES", "Kip447Config", "Kip447Workload"]

REPLICATION_FACTOR = 3
PROCESSOR_STOP_TIMEOUT_S = 20.0
OBSERVER_DRAIN_TIMEOUT_S = 60.0
SCAN_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 30.0  # transaction.timeout.ms (20 s) plus time to write the abort markers
PROGRESS_INTERVAL_S = 5.0
TOPIC_READY_TIMEOUT_S = 30.0


def progress_to_stderr(message: str) -> None:
    print(f"[kip447] {message}", file=sys.stderr, flush=True)


class Kip447Workload:
    def __init__(
        self,
        config: Kip447Config,
        bootstrap: str,
        run_dir: Path,
        dist: KafkaDistribution,
        progress: Callable[[str], None] = progress_to_stderr,
    ) -> None:
        self.config = config
        self.bootstrap = bootstrap
        self.run_dir = Path(run_dir)
        self.dist = dist
        self._progress = progress
        self._admin = admin_for(bootstrap)
        self._seeder: Seeder | None = None
        self._supervisor: Supervisor | None = None
        self._observer: Observer | None = None
        self.scans: dict[str, ScanResult] = {}

    def __enter__(self) -> Kip447Workload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid_dir(self) -> Path:
        return self.run_dir / "workload" / "pids"

    def setup(self) -> None:
        """Create the input and output topics."""
        topics = [
            NewTopic(
                name, num_partitions=self.config.partitions, replication_factor=REPLICATION_FACTOR
            )
            for name in (self.config.input_topic, self.config.output_topic)
        ]
        admin.create_topics(self._admin, topics, TOPIC_READY_TIMEOUT_S)
        for topic in (self.config.input_topic, self.config.output_topic):
            self._wait_topic_known(topic, TOPIC_READY_TIMEOUT_S)
        self._progress(
            f"topics {self.config.input_topic}, {self.config.output_topic}: "
            f"{self.config.partitions} partitions"
        )

    def start(self) -> None:
        """Start the observer, the processors, then the seeder."""
        config = self.config
        isolation = "read_uncommitted" if config.mode == "read-uncommitted" else "read_committed"
        self._observer = Observer(
            self.bootstrap, self.run_dir, config.output_topic, isolation, self._progress
        )
        self._observer.start()
        processor_config = self.run_dir / "workload" / "processor.json"
        ProcessorConfig.from_run(config, self.bootstrap, self.run_dir).save(processor_config)
        self._supervisor = Supervisor(processor_config, self.run_dir, config.mode, config.instances)
        self._supervisor.start()
        self._seeder = Seeder(
            self.bootstrap,
            self.run_dir,
            config.input_topic,
            config.partitions,
            config.records,
            config.seed_seconds,
            non_idempotent=config.non_idempotent_seeder,
        )
        self._seeder.start()
        self._progress(
            f"mode {config.mode}: {config.instances} processors, seeding {config.records} "
            f"records over {config.seed_seconds:.0f}s"
        )

    def instances(self) -> list[InstanceInfo]:
        return self._running_supervisor().instances()

    def instance_pid(self, instance: int) -> int | None:
        return self._running_supervisor().instance_pid(instance)

    def kill_instance(self, instance: int) -> None:
        self._running_supervisor().kill_instance(instance)

    def pause_instance(self, instance: int) -> None:
        self._running_supervisor().pause_instance(instance)

    def resume_instance(self, instance: int) -> None:
        self._running_supervisor().resume_instance(instance)

    @property
    def input_topic(self) -> str:
        return self.config.input_topic

    @property
    def output_topic(self) -> str:
        return self.config.output_topic

    @property
    def group(self) -> str:
        return self.config.group

    @property
    def instance_count(self) -> int:
        return self.config.instances

    def transactional_id(self, instance: int) -> str | None:
        """The transactional.id the instance's current incarnation runs with."""
        for info in self.instances():
            if info.instance == instance:
                return info.txn_id
        raise LookupError(f"no instance {instance}")

    def start_twin(self, instance: int) -> str:
        return self._running_supervisor().start_twin(instance)

    def stop_twin(self, twin: str) -> None:
        self._running_supervisor().stop_twin(twin)

    def wait_running(self, timeout: float) -> bool:
        """True once every instance holds partitions of a stable group.

        Faults are timed from here: a fault that lands on an instance still joining the
        group tests nothing (a "zombie" that never owned a partition cannot write as one).
        """
        wanted = min(self.config.instances, self.config.partitions)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if members_with_partitions(self._admin, self.config.group) >= wanted:
                return True
            time.sleep(0.25)
        self._progress(f"the group did not stabilise with {wanted} members in {timeout:.0f}s")
        return False

    def wait_seeded(self, timeout: float) -> bool:
        """True once every input record has its delivery report."""
        if self._seeder is None:
            raise RuntimeError("the workload was not started")
        return self._seeder.wait_reported(timeout)

    def wait_caught_up(self, timeout: float) -> bool:
        """True once the group's committed offsets equal the input's log end everywhere."""
        deadline = time.monotonic() + timeout
        last_report = time.monotonic()
        while True:
            try:
                lag: int | str = self._group_lag()
            except RuntimeError as exc:  # the query crashed; the next one may not
                lag = f"unknown ({exc})"
            if lag == 0:
                return True
            if time.monotonic() > deadline:
                self._progress(f"not caught up after {timeout:.0f}s: lag {lag}")
                return False
            if time.monotonic() - last_report > PROGRESS_INTERVAL_S:
                self._progress(f"waiting for the processors to catch up: lag {lag}")
                last_report = time.monotonic()
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop the processors (gracefully, then by force), drain the observer, stop the seeder.

        Raises if the observer or the seeder failed: their history would be short.
        """
        if self._supervisor is not None:
            self._supervisor.stop(PROCESSOR_STOP_TIMEOUT_S)
        if self._observer is not None:
            self._observer.stop(OBSERVER_DRAIN_TIMEOUT_S)
        if self._seeder is not None:
            self._seeder.stop()
        for part in (self._observer, self._seeder):
            if part is not None and part.failure is not None:
                raise RuntimeError(f"{part.name} failed") from part.failure

    def final_scans(self) -> dict[str, ScanResult]:
        """Wait out abandoned transactions, scan both topics at both isolations, and record
        the end state. Returns the scans by writer (with what each reached)."""
        topics = [self.config.input_topic, self.config.output_topic]
        wait_settled(self.bootstrap, topics, SETTLE_TIMEOUT_S, self._progress)
        for isolation in ("read_committed", "read_uncommitted"):
            scan = final_scan(
                self.bootstrap, self.run_dir, topics, isolation, SCAN_TIMEOUT_S, self._progress
            )
            self.scans[scan.writer] = scan
        supervisor = self._supervisor
        record_end_state(
            self.bootstrap,
            self.run_dir,
            self.dist,
            input_topic=self.config.input_topic,
            output_topic=self.config.output_topic,
            group=self.config.group,
            txn_ids=set(supervisor.transactional_ids()) if supervisor else set(),
        )
        self._progress("final scans and end state recorded")
        return self.scans

    def close(self) -> None:
        """Stop whatever still runs; safe to call twice and after a failed start."""
        if self._supervisor is not None:
            self._supervisor.stop(timeout=0)
        if self._observer is not None:
            self._observer.stop(drain_timeout=0)
        if self._seeder is not None:
            self._seeder.stop()

    def _wait_topic_known(self, topic: str, timeout: float) -> None:
        """A just-created topic can be missing from a broker's metadata for a moment; every
        client started next (observer, processors) must find all its partitions led."""
        deadline = time.monotonic() + timeout
        while True:
            described = self._admin.list_topics(topic=topic, timeout=5).topics.get(topic)
            partitions = described.partitions if described and described.error is None else {}
            if len(partitions) == self.config.partitions and all(
                p.leader >= 0 for p in partitions.values()
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} not fully led {timeout:.0f}s after creation")
            time.sleep(0.2)

    def _running_supervisor(self) -> Supervisor:
        if self._supervisor is None:
            raise RuntimeError("the workload was not started")
        return self._supervisor

    def _group_lag(self) -> int:
        ends = end_offsets(self._admin, self.config.input_topic, committed=False)
        committed = group_offsets(self.bootstrap, self.config.group, self.config.input_topic)
        return sum(end - (committed.get(p) or 0) for p, end in ends.items())
