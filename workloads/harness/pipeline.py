"""Any pipeline as the harness drives it: setup, start, faults on instances, stop, scans.

    workload = PipelineWorkload(config, pipeline, bootstrap, run_dir, dist)
    with workload:
        workload.setup()
        workload.start()
        workload.wait_running(60)          # raises WorkloadFailed if the pipeline never runs
        workload.kill_instance(1)          # the supervisor starts incarnation 1 of instance 1
        workload.wait_seeded(60)
        workload.wait_caught_up(120)
        workload.stop()
        workload.final_scans()

The harness owns what the history needs -- the seeder, the downstream observer, the final scans
and the end state -- and a `Pipeline` says only how to start one instance of the thing under
test (kip447's processors, a Streams app, a Spark driver, Kafka's copier, the user's command).
Every instance gets the environment of docs/byo.md. Everything started is stopped by close().
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from confluent_kafka.admin import AdminClient, NewTopic

from eoschaos.clusters import admin
from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract import instance_env
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.contract.topics import RunTopics, TopicSpec, parse_topics, topic_names
from eoschaos.workloads.harness.expected import load_expect, record_expected
from eoschaos.workloads.harness.final import ScanResult, final_scan, record_end_state, wait_settled
from eoschaos.workloads.harness.input_records import (
    RecordFunction,
    SeedRecord,
    load_input,
    seeded,
)
from eoschaos.workloads.harness.observer import Observer
from eoschaos.workloads.harness.offsets import (
    admin_for,
    end_offsets,
    group_lag,
    members_with_partitions,
)
from eoschaos.workloads.harness.reader import KEY_IDS, IdSource
from eoschaos.workloads.harness.seeder import Seeder
from eoschaos.workloads.harness.supervisor import InstanceInfo, Launch, Supervisor

REPLICATION_FACTOR = 3
PROCESSOR_STOP_TIMEOUT_S = 30.0
OBSERVER_DRAIN_TIMEOUT_S = 60.0
SCAN_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 30.0  # transaction.timeout.ms (20 s) plus time to write the abort markers
PROGRESS_INTERVAL_S = 5.0
CRASH_AIM_TIMEOUT_S = 60.0  # then the crash lands wherever the instance is
CRASH_AIM_STEP_S = 0.05
REPLACEMENT_WAIT_S = 10.0  # the supervisor restarts a crashed instance after at most ~1 s
TOPIC_READY_TIMEOUT_S = 30.0
EXPECTED_READ_TIMEOUT_S = 120.0  # each of: the committed input, the output (--expect)


class WorkloadFailed(Exception):
    """The pipeline under test could not run (exited at once, never produced output)."""


@dataclass
class PipelineConfig:
    """What the harness needs to know of a run, whatever the pipeline."""

    workload: str = "kip447"
    mode: str = "eos"
    records: int = 20000
    partitions: int = 6
    instances: int = 3
    seed: int = 0
    seed_seconds: float = 20.0
    input_topic: str = "input-topic"  # the first input topic (the only one, by default)
    output_topic: str = "output-topic"  # the first output topic
    # byo: every topic of a role, NAME[:PARTITIONS[:REPLICATION]] each (eoschaos.contract.
    # topics); empty: input_topic and output_topic alone, and no dead-letter topic
    input_topics: tuple[str, ...] = ()
    output_topics: tuple[str, ...] = ()
    dead_letter_topics: tuple[str, ...] = ()
    fan_out_topics: tuple[str, ...] = ()
    # the run's own tag (eoschaos.config.names_of_a_run), after each name of those lists, so
    # that no client of another run on the same cluster meets this run's topics
    run_tag: str = ""
    group: str = "eoschaos-kip447"
    non_idempotent_seeder: bool = False
    id_from: str = "key"  # where output records name their source id (IdSource)
    # MODULE:FUNCTION giving each id's input record (harness.input_records); empty: the
    # seeder's own, the id as the key
    input: str = ""
    input_id_from: str = ""  # where an input record holds its id (empty: as --id-from says)
    # MODULE:FUNCTION giving the expected final value per output key (harness.expected);
    # set, the output holds results of an aggregation, not copies of input records
    expect: str = ""
    command: str | None = None  # byo: the shell line that starts one instance
    # byo: the image each instance runs as a container (`command` its arguments), if not a
    # command on this machine
    pipeline_image: str = ""
    # streams: the Kafka client version the app is built against (empty: the cluster's). A
    # 3.x client on a 4.x cluster keeps the transaction protocol of version 1 (KIP-890).
    client_version: str = ""
    # streams: how many keys its aggregate keeps (id mod buckets); 0: the app's own 10. Many
    # keys make each transaction touch keys that no later one writes (KAFKA-20685)
    buckets: int = 0
    # streams: Kafka Streams settings over its app's own, KEY=VALUE,...; the app's own key
    # eoschaos.rocksdb.write.buffer.bytes sizes its stores' memtables
    streams_config: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The lists as tuples (run.json's are lists), checked, and the first of each role
        as input_topic and output_topic, which every one-topic reader goes by."""
        self.input_topics = parse_topics(self.input_topics, "--input-topics")
        self.output_topics = parse_topics(self.output_topics, "--output-topics")
        self.dead_letter_topics = parse_topics(self.dead_letter_topics, "--dead-letter-topics")
        self.fan_out_topics = parse_topics(self.fan_out_topics, "--fan-out-topics")
        if self.input_topics:
            self.input_topic = self.input_specs[0].name
        if self.output_topics:
            self.output_topic = self.output_specs[0].name

    def _created(self, entries: tuple[str, ...], option: str) -> tuple[TopicSpec, ...]:
        """The topics of a list as they are created: each name the user gave with the run's
        tag after it (this run's alone, as its default topics are)."""
        specs = (TopicSpec.parse(entry, option) for entry in entries)
        if not self.run_tag:
            return tuple(specs)
        return tuple(replace(spec, name=f"{spec.name}-{self.run_tag}") for spec in specs)

    @property
    def input_specs(self) -> tuple[TopicSpec, ...]:
        created = self._created(self.input_topics, "--input-topics")
        return created or (TopicSpec(self.input_topic),)

    @property
    def output_specs(self) -> tuple[TopicSpec, ...]:
        created = self._created(self.output_topics, "--output-topics")
        return created or (TopicSpec(self.output_topic),)

    @property
    def dead_letter_specs(self) -> tuple[TopicSpec, ...]:
        return self._created(self.dead_letter_topics, "--dead-letter-topics")

    @property
    def fan_out_specs(self) -> tuple[TopicSpec, ...]:
        return self._created(self.fan_out_topics, "--fan-out-topics")

    @property
    def topics(self) -> RunTopics:
        """The run's topics by role, as created."""
        return RunTopics(
            tuple(spec.name for spec in self.input_specs),
            tuple(spec.name for spec in self.output_specs),
            tuple(spec.name for spec in self.dead_letter_specs),
            tuple(spec.name for spec in self.fan_out_specs),
        )

    @property
    def input_names(self) -> dict[str, str]:
        """Each input topic as the user named it (what an --input function returns) -> as
        created."""
        given = topic_names(self.input_topics) or (self.input_topic,)
        return dict(zip(given, self.topics.inputs, strict=True))

    @property
    def input_ids(self) -> IdSource:
        """Where an input record holds its id: the key of the seeder's own records; in the
        user's (`input`), where --input-id-from says, else where --id-from does (a pipeline
        that keeps the order's id field in place)."""
        if not self.input:
            return KEY_IDS
        return IdSource(self.input_id_from or self.id_from, "--input-id-from")

    @property
    def transactional_id_prefix(self) -> str:
        """The transactional.ids the harness assigns are `<prefix>-<instance>`: the group's
        name, unique per run like the topics', so no client of another run can fence ours."""
        return self.group


def _as_created(record_of: RecordFunction, names: dict[str, str]) -> RecordFunction:
    """`record_of` with the topic it names (as the user named it) as created."""

    def created(record_id: int) -> SeedRecord:
        record = record_of(record_id)
        return record if record.topic is None else replace(record, topic=names[record.topic])

    return created


class Pipeline(Protocol):
    """The part of a workload that differs from one pipeline to the next."""

    observer_isolation: str  # how the downstream observer reads (read_committed, normally)
    joins_group: bool  # instances are members of config.group: faults wait for all of them
    extra_topics: tuple[str, ...]  # topics to create besides input and output (same partitions)

    def prepare(self, workload_dir: Path) -> None:
        """Write what instances read at start (configs), before any is started."""

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        """The command line of one instance; `env` is the contract's environment."""

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        """The transactional.id this incarnation runs with, if the harness assigns one."""

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        """Every transactional.id of the run, for the end state (None: not known, so every
        open transaction on the cluster is recorded)."""

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        """Record pipeline-specific end rows (e.g. a Streams app's aggregates)."""

    def ready_for_input(self) -> bool:
        """Asked by the seeder until it says yes once, before any input is sent: a pipeline
        whose start takes long (a Flink cluster scheduling its job) holds the input back
        until it runs, so the input flows while the faults do, not before them."""

    def in_crash_window(self, state_dir: Path, since: float, output_end: Callable[[], int]) -> bool:
        """Asked while the instance is frozen: is this a moment a crash tests something? A
        pipeline whose interesting window is narrow (Spark: between a batch's first output
        record and its commit-log entry) says no until it is in it; the others always say yes.
        `since`: when the running incarnation started (wall clock); `output_end()`: the output
        topic's records so far (the sum of its high watermarks)."""


class PipelineWorkload:
    def __init__(
        self,
        config: PipelineConfig,
        pipeline: Pipeline,
        bootstrap: str,
        run_dir: Path,
        dist: KafkaDistribution,
        progress: Callable[[str], None] = progress_to_stderr,
        instance_bootstrap: Callable[[int], str] | None = None,
    ) -> None:
        """`bootstrap`: for eoschaos's own clients; `instance_bootstrap(n)`: what instance n
        (and its twins) connect through, its own lane on a cluster that has lanes."""
        self.config = config
        self.pipeline = pipeline
        self.bootstrap = bootstrap
        self.instance_bootstrap = instance_bootstrap or (lambda _instance: bootstrap)
        self._expect = load_expect(config.expect) if config.expect else None
        self._record_of = _as_created(
            load_input(config.input, config.seed) if config.input else seeded, config.input_names
        )
        self._crashed: dict[int, int] = {}  # instance -> the last incarnation a crash hit
        self.run_dir = Path(run_dir)
        self.dist = dist
        self._progress = progress
        self._admin_client: AdminClient | None = admin_for(bootstrap)
        self._seeder: Seeder | None = None
        self._supervisor: Supervisor | None = None
        self._observer: Observer | None = None
        self.scans: dict[str, ScanResult] = {}

    def __enter__(self) -> PipelineWorkload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def workload_dir(self) -> Path:
        return self.run_dir / "workload"

    @property
    def pid_dir(self) -> Path:
        return self.workload_dir / "pids"

    def setup(self) -> None:
        """Create the topics, each with its own partitions and replication where the user
        gave them, and wait until every broker knows them."""
        config = self.config
        specs = [
            *config.input_specs,
            *config.output_specs,
            *config.dead_letter_specs,
            *config.fan_out_specs,
            *(TopicSpec(name) for name in self.pipeline.extra_topics),
        ]
        topics = [
            NewTopic(
                spec.name,
                num_partitions=spec.partitions or config.partitions,
                replication_factor=spec.replication or REPLICATION_FACTOR,
            )
            for spec in specs
        ]
        admin.create_topics(self._admin, topics, TOPIC_READY_TIMEOUT_S)
        for topic in topics:
            self._wait_topic_known(topic.topic, topic.num_partitions, TOPIC_READY_TIMEOUT_S)
        self._progress(
            "topics "
            + ", ".join(f"{topic.topic} ({topic.num_partitions} partitions)" for topic in topics)
        )

    def start(self, hold_input: Callable[[], bool] | None = None) -> None:
        """Start the observer, the instances, then the seeder; the seeder sends nothing while
        `hold_input()` is true (the fault schedule running late)."""
        config = self.config
        self._observer = Observer(
            self.bootstrap,
            self.run_dir,
            config.topics.written,
            self.pipeline.observer_isolation,
            self._progress,
            track_ids=config.records,
            id_source=IdSource(config.id_from),
            together=config.topics.delivered_to,
        )
        self._observer.start()
        self.pipeline.prepare(self.workload_dir)
        self._supervisor = Supervisor(
            self.run_dir, config.instances, self._launch, self.pipeline.transactional_id
        )
        self._supervisor.start()
        self._seeder = Seeder(
            self.bootstrap,
            self.run_dir,
            {spec.name: spec.partitions or config.partitions for spec in config.input_specs},
            config.records,
            config.seed_seconds,
            non_idempotent=config.non_idempotent_seeder,
            hold=hold_input,
            ready=self.pipeline.ready_for_input,
            record_of=self._record_of,
        )
        self._seeder.start()
        self._progress(
            f"{config.workload}/{config.mode}: {config.instances} instances, seeding "
            f"{config.records} records over {config.seed_seconds:.0f}s"
        )

    def instance_env(self, instance: int, incarnation: int, txn_id: str | None) -> dict[str, str]:
        """The environment of docs/byo.md for one instance process."""
        config = self.config
        state_dir = self.state_dir(instance)
        state_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            **config.extra_env,
            instance_env.BOOTSTRAP_SERVERS: self.instance_bootstrap(instance),
            instance_env.INPUT_TOPIC: config.input_topic,
            instance_env.OUTPUT_TOPIC: config.output_topic,
            instance_env.INPUT_TOPICS: ",".join(config.topics.inputs),
            instance_env.OUTPUT_TOPICS: ",".join(config.topics.outputs),
            instance_env.DEAD_LETTER_TOPICS: ",".join(config.topics.dead_letters),
            instance_env.FAN_OUT_TOPICS: ",".join(config.topics.fan_outs),
            instance_env.MODE: config.mode,
            instance_env.INSTANCE: str(instance),
            instance_env.INCARNATION: str(incarnation),
            instance_env.INSTANCES: str(config.instances),
            instance_env.PARTITIONS: str(config.partitions),
            instance_env.GROUP_ID: config.group,
            instance_env.TRANSACTIONAL_ID: txn_id or "",
            instance_env.STATE_DIR: str(state_dir),
            instance_env.LOG_DIR: str(self.workload_dir),
        }

    def _launch(self, instance: int, incarnation: int, txn_id: str | None) -> Launch:
        env = self.instance_env(instance, incarnation, txn_id)
        return self.pipeline.launch(instance, incarnation, env)

    # --- what the nemesis drives (eoschaos.chaos.nemesis.Workload) ---

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

    def instances(self) -> list[InstanceInfo]:
        return self._running_supervisor().instances()

    def instance_pid(self, instance: int) -> int | None:
        return self._running_supervisor().instance_pid(instance)

    def kill_instance(self, instance: int) -> None:
        """kill -9, aimed: the instance is frozen and looked at until it is inside its crash
        window (or CRASH_AIM_TIMEOUT_S passed), and killed there."""
        supervisor = self._running_supervisor()
        state_dir = self.state_dir(instance)
        # A crash due while the supervisor still replaces the last one (a schedule running
        # late) hits the replacement, rather than the dead process (a no-op, or an error).
        deadline = time.monotonic() + REPLACEMENT_WAIT_S
        while time.monotonic() < deadline:
            current = next(i for i in supervisor.instances() if i.instance == instance)
            replaced = current.incarnation > self._crashed.get(instance, -1)
            if replaced and supervisor.instance_pid(instance) is not None:
                break
            time.sleep(CRASH_AIM_STEP_S)
        self._crashed[instance] = current.incarnation
        since = current.started
        deadline = time.monotonic() + CRASH_AIM_TIMEOUT_S
        while True:
            supervisor.pause_instance(instance)
            aimed = self.pipeline.in_crash_window(state_dir, since, self._output_end)
            if aimed or time.monotonic() > deadline:
                break
            supervisor.resume_instance(instance)
            time.sleep(CRASH_AIM_STEP_S)
        supervisor.kill_instance(instance)

    def _output_end(self) -> int:
        return sum(
            sum(end_offsets(self._admin, topic, committed=False).values())
            for topic in self.config.topics.written
        )

    def state_dir(self, instance: int) -> Path:
        return self.workload_dir / "state" / f"instance-{instance}"

    def pause_instance(self, instance: int) -> None:
        self._running_supervisor().pause_instance(instance)

    def resume_instance(self, instance: int) -> None:
        self._running_supervisor().resume_instance(instance)

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

    # --- the run ---

    def wait_running(self, timeout: float) -> None:
        """Return once the pipeline runs: output has appeared downstream and, for a pipeline
        whose instances join a group, every instance holds partitions of a stable group.

        Faults are timed from here: a fault that lands on an instance still joining the group
        tests nothing (a "zombie" that never owned a partition cannot write as one). A pipeline
        that never gets there is a failed run, not a run to judge (WorkloadFailed).
        """
        wanted = min(self.config.instances, self.config.partitions)
        deadline = time.monotonic() + timeout
        observer = self._running_observer()
        while True:
            self._raise_if_crashing()
            members = (
                members_with_partitions(self._admin, self.config.group)
                if self.pipeline.joins_group
                else wanted
            )
            if members >= wanted and self._output_seen(observer):
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.25)
        if not self._output_seen(observer):
            log = self._running_supervisor().log_of(0, 0)
            topics = self.config.topics
            raise WorkloadFailed(
                f"workload {self.config.workload} wrote no output to "
                f"{', '.join(topics.written)} in {timeout:.0f}s (does it read "
                f"{', '.join(topics.inputs)}?); read {log}"
            )
        # Slow to settle, but working: the run goes on and the history shows the rebalances.
        self._progress(f"the group did not stabilise with {wanted} members in {timeout:.0f}s")

    def _output_seen(self, observer: Observer) -> bool:
        """Output that shows the pipeline works: a record naming a source id, or any record
        of an aggregating pipeline (whose results name none)."""
        return (observer.records_seen if self._expect else observer.ids_seen) > 0

    def _raise_if_crashing(self) -> None:
        """Before faults, an instance that dies on its own is a broken pipeline or command."""
        supervisor = self._running_supervisor()
        for ended in supervisor.exits:
            if ended.status != 0:
                info = ended.info
                log = supervisor.log_of(info.instance, info.incarnation)
                raise WorkloadFailed(
                    f"workload {self.config.workload}: instance {info.instance} exited with "
                    f"status {ended.status} after {ended.ran_s:.1f}s, before any fault; "
                    f"read {log}"
                )

    @property
    def input_held_s(self) -> float:
        return self._seeder.held_s if self._seeder is not None else 0.0

    def wait_seeded(self, timeout: float) -> bool:
        """True once every input record has its delivery report."""
        if self._seeder is None:
            raise RuntimeError("the workload was not started")
        return self._seeder.wait_reported(timeout)

    def wait_caught_up(self, timeout: float) -> bool:
        """True once the output covers every acknowledged input id (as the observer saw it)
        and the group, where the pipeline commits to one, has no lag on any topic it reads."""
        deadline = time.monotonic() + timeout
        last_report = time.monotonic()
        while True:
            lag = self._lag()
            if lag == 0:
                return True
            if time.monotonic() > deadline:
                self._progress(f"not caught up after {timeout:.0f}s: {lag}")
                return False
            if time.monotonic() - last_report > PROGRESS_INTERVAL_S:
                self._progress(f"waiting for the pipeline to catch up: {lag}")
                last_report = time.monotonic()
            time.sleep(0.5)

    def _lag(self) -> int | str:
        seeder, observer = self._seeder, self._running_observer()
        acked = seeder.acked if seeder is not None else 0
        if self._expect is None and observer.ids_seen < acked:
            return f"{acked - observer.ids_seen} acknowledged ids not in the output yet"
        try:
            lag = group_lag(
                self.bootstrap, self._admin, self.config.group, self.config.topics.inputs
            )
        except RuntimeError as exc:  # the query crashed; the next one may not
            return f"group lag unknown ({exc})"
        # None: the group committed nothing, the pipeline keeps its offsets elsewhere (Spark's
        # checkpoint), and the output covering the input is all there is to wait for
        return 0 if not lag else f"group lag {lag}"

    def stop(self) -> None:
        """Stop the instances (gracefully, then by force), drain the observer, stop the seeder.

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
        config = self.config
        run_topics = config.topics
        output_ids = IdSource(config.id_from)
        ids = {
            **dict.fromkeys(run_topics.inputs, config.input_ids),
            **dict.fromkeys(run_topics.written, output_ids),
        }
        topics = list(ids)
        wait_settled(self.bootstrap, topics, SETTLE_TIMEOUT_S, self._progress)
        for isolation in ("read_committed", "read_uncommitted"):
            scan = final_scan(
                self.bootstrap,
                self.run_dir,
                topics,
                isolation,
                SCAN_TIMEOUT_S,
                self._progress,
                ids=ids,
                together=run_topics.delivered_to,
            )
            self.scans[scan.writer] = scan
        self.pipeline.record_outputs(self.bootstrap, self.run_dir)
        if self._expect is not None:
            expected, results = record_expected(
                self.bootstrap,
                self.run_dir,
                self._expect,
                run_topics.inputs,
                config.input_ids,
                config.output_topic,
                EXPECTED_READ_TIMEOUT_S,
            )
            self._progress(f"--expect: {expected} expected keys, {results} keys in the output")
        # Last, and written whole: a history with an end state has every part before it, so
        # the checkers take its presence for a run that reached its end (a run killed earlier
        # re-checks as unfinished, not as a pipeline without aggregates or open transactions).
        record_end_state(
            self.bootstrap,
            self.run_dir,
            self.dist,
            input_topics=run_topics.inputs,
            output_topics=run_topics.written,
            group=config.group,
            txn_ids=self.pipeline.transactional_ids(self._supervisor)
            if self._supervisor
            else set(),
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
        # An AdminClient has no close(): dropping it destroys the handle, which would otherwise
        # keep reconnecting to the stopped cluster and log every refusal after the run's end.
        self._admin_client = None

    @property
    def _admin(self) -> AdminClient:
        if self._admin_client is None:
            raise RuntimeError("the workload is closed")
        return self._admin_client

    def _wait_topic_known(self, topic: str, count: int, timeout: float) -> None:
        """A just-created topic can be missing from a broker's metadata for a moment; every
        client started next (observer, instances) must find all its partitions led."""
        deadline = time.monotonic() + timeout
        while True:
            described = self._admin.list_topics(topic=topic, timeout=5).topics.get(topic)
            partitions = described.partitions if described and described.error is None else {}
            if len(partitions) == count and all(p.leader >= 0 for p in partitions.values()):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} not fully led {timeout:.0f}s after creation")
            time.sleep(0.2)

    def _running_supervisor(self) -> Supervisor:
        if self._supervisor is None:
            raise RuntimeError("the workload was not started")
        return self._supervisor

    def _running_observer(self) -> Observer:
        if self._observer is None:
            raise RuntimeError("the workload was not started")
        return self._observer
