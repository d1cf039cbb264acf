"""The workloads `eoschaos run --workload NAME` knows, their modes, and how each is built.

Every workload is a PipelineWorkload around a different pipeline, so the CLI, the nemesis, the
history and the checkers are the same for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract.capabilities import Capabilities
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.topics import MAX_TOPICS_PER_ROLE, topic_names
from eoschaos.workloads import byo, copier
from eoschaos.workloads.flink import pipeline as flink
from eoschaos.workloads.flink.build import build_flink_job
from eoschaos.workloads.harness.pipeline import PipelineConfig, PipelineWorkload
from eoschaos.workloads.kip447.config import MODES as KIP447_MODES
from eoschaos.workloads.kip447.workload import Kip447Workload
from eoschaos.workloads.spark import pipeline as spark
from eoschaos.workloads.spark.connector import connector_jars
from eoschaos.workloads.streams import pipeline as streams
from eoschaos.workloads.streams.build import build_streams_app


@dataclass(frozen=True)
class WorkloadKind:
    name: str
    modes: tuple[str, ...]  # the first is the correct one
    default_instances: int
    summary: str
    start_timeout_s: float = 60.0  # until first output, before faults (a Spark driver is slow)
    records_transactions: bool = False  # its instances write `txn` history (ours do)
    assigns_transactional_ids: bool = True  # Streams derives its own
    transactionless_modes: tuple[str, ...] = ("alos",)
    offsets_in_transactions: bool = True  # False: its input offsets live in its checkpoints
    instance_lanes: bool = True  # each instance's clients connect through its own lane
    more_correct_modes: tuple[str, ...] = ()  # beside the first: must PASS too
    failure_exits: tuple[int, ...] = ()  # its instances' exit statuses that say they failed

    @property
    def correct_modes(self) -> tuple[str, ...]:
        """The modes that must PASS; every other one is known-bad."""
        return (self.modes[0], *self.more_correct_modes)

    def capabilities(self, mode: str, *, expect: bool) -> Capabilities:
        """What a run of this kind in `mode` records; an --expect run's output is results."""
        transactions = mode not in self.transactionless_modes
        return Capabilities(
            transactions=transactions,
            transaction_history=self.records_transactions,
            output_is_copies=not expect,
            assigned_transactional_ids=transactions and self.assigns_transactional_ids,
            offsets_in_transactions=self.offsets_in_transactions,
            failure_exits=self.failure_exits,
        )


KINDS = {
    kind.name: kind
    for kind in (
        WorkloadKind(
            "kip447",
            KIP447_MODES,
            3,
            "our port of Kafka's KIP-447 consume-transform-produce",
            records_transactions=True,
        ),
        WorkloadKind(
            "spark",
            spark.MODES,
            1,
            "a Spark Structured Streaming job, driver restarted on crash",
            start_timeout_s=180.0,
        ),
        WorkloadKind(
            "copier",
            copier.MODES,
            0,
            "Kafka's TransactionalMessageCopier, one per partition",
            more_correct_modes=(copier.GROUP_MODE,),
        ),
        WorkloadKind(
            "streams",
            streams.MODES,
            2,
            "a stateful Kafka Streams app (re-key, aggregate, echo)",
            assigns_transactional_ids=False,
            failure_exits=(streams.EXIT_FAILED,),
        ),
        WorkloadKind(
            "flink",
            flink.MODES,
            3,
            "a Flink job on a JobManager and TaskManagers, restored from its checkpoints",
            start_timeout_s=120.0,
            assigns_transactional_ids=False,
            offsets_in_transactions=False,
            instance_lanes=False,
        ),
        WorkloadKind("byo", byo.MODES, 3, "your own pipeline: --command, contract in docs/byo.md"),
    )
}


def kind_of(name: str) -> WorkloadKind:
    """The workload named `name`; an unknown name is refused with the names there are."""
    if name not in KINDS:
        raise EoschaosError(f"unknown workload {name!r}; choose from {', '.join(KINDS)}")
    return KINDS[name]


def check_options(config: PipelineConfig) -> None:
    """Bad input is refused before anything starts."""
    name, mode, command = config.workload, config.mode, config.command
    kind = kind_of(name)
    if mode not in kind.modes:
        raise EoschaosError(
            f"unknown mode {mode!r} for {name}; choose from {', '.join(kind.modes)}"
        )
    if name == "byo" and not (command or "").strip() and not config.pipeline_image:
        raise EoschaosError(
            "--workload byo needs --command 'CMD' (the line that starts one instance; "
            "see docs/byo.md) or --pipeline-image IMAGE"
        )
    if name != "byo" and command:
        raise EoschaosError(f"--command is for --workload byo, not {name}")
    if name != "byo" and config.pipeline_image:
        raise EoschaosError(f"--pipeline-image is for --workload byo, not {name}")
    _check_topics(config)
    if name == "flink":
        flink.check_instances(config.instances)
    if name != "streams" and config.client_version:
        raise EoschaosError(
            f"--client-version is for --workload streams (the Kafka client its app is built "
            f"against), not {name}"
        )
    if config.streams_config:
        if name != "streams":
            raise EoschaosError(
                f"--streams-config is for --workload streams (its app's settings), not {name}"
            )
        streams.check_streams_config(config.streams_config)
    if name != "streams" and config.buckets:
        raise EoschaosError(
            f"--buckets is for --workload streams (its aggregate's keys), not {name}"
        )


def _check_topics(config: PipelineConfig) -> None:
    """Topic lists are byo's (the other workloads read one topic and write one); a topic has
    one role, once: the checkers tell an input record from an output record by its topic."""
    given = {
        "--input-topics": config.input_topics,
        "--output-topics": config.output_topics,
        "--dead-letter-topics": config.dead_letter_topics,
        "--fan-out-topics": config.fan_out_topics,
    }
    if config.workload != "byo":
        for option, topics in given.items():
            if topics:
                raise EoschaosError(
                    f"{option} is for --workload byo, not {config.workload} (it reads one "
                    "input topic and writes one output topic)"
                )
    seen: dict[str, str] = {}
    for role, names in (
        ("input", topic_names(config.input_topics) or (config.input_topic,)),
        ("output", topic_names(config.output_topics) or (config.output_topic,)),
        ("dead-letter", topic_names(config.dead_letter_topics)),
        ("fan-out", topic_names(config.fan_out_topics)),
    ):
        if len(names) > MAX_TOPICS_PER_ROLE:
            raise EoschaosError(
                f"{len(names)} {role} topics; give at most {MAX_TOPICS_PER_ROLE} of each role"
            )
        for topic in names:
            if topic in seen:
                raise EoschaosError(
                    f"topic {topic!r} is named twice (as {seen[topic]} and as {role}); give each "
                    "topic one role, once"
                )
            seen[topic] = role
    if config.expect and len(config.topics.written) > 1:
        raise EoschaosError(
            "--expect compares the last values of one output topic; give one --output-topics "
            "and no --dead-letter-topics with it"
        )


def prepare(config: PipelineConfig, kafka_version: str, progress: Callable[[str], None]) -> None:
    """Build what the workload runs before any cluster starts, so a failed build is bad input
    that leaves nothing running."""
    name = config.workload
    if name == "streams":
        build_streams_app(config.client_version or kafka_version, progress)
    if name == "spark":
        connector_jars(progress=progress)
    if name == "flink":
        build_flink_job(progress)


def instance_count(name: str, mode: str, partitions: int, asked: int | None) -> int:
    """The copier runs one process per partition (two in mode no-fencing): not a choice."""
    if name == "copier":
        wanted = copier.CopierPipeline.instances_for(mode, partitions)
        if asked is not None and asked != wanted:
            raise EoschaosError(
                f"--workload copier runs {wanted} instances for {partitions} partitions in "
                f"mode {mode}; drop --instances or set --partitions"
            )
        return wanted
    return asked if asked is not None else KINDS[name].default_instances


def build_workload(
    config: PipelineConfig,
    bootstrap: str,
    run_dir: Path,
    dist: KafkaDistribution,
    progress: Callable[[str], None],
    instance_bootstrap: Callable[[int], str] | None = None,
) -> PipelineWorkload:
    if config.workload == "kip447":
        return Kip447Workload(config, bootstrap, run_dir, dist, progress, instance_bootstrap)
    if config.workload == "copier":
        pipeline = copier.CopierPipeline(
            dist, config.mode, config.partitions, config.transactional_id_prefix
        )
    elif config.workload == "streams":
        app = build_streams_app(config.client_version or dist.version, progress)
        pipeline = streams.StreamsPipeline(
            app, config.output_topic, config.buckets, config.streams_config
        )
    elif config.workload == "spark":
        pipeline = spark.SparkPipeline(config.mode, config.transactional_id_prefix)
    elif config.workload == "flink":
        pipeline = flink.FlinkPipeline(
            build_flink_job(progress),
            config.output_topic,
            config.instances,
            config.transactional_id_prefix,
        )
    elif config.workload == "byo" and config.pipeline_image:
        # the image itself was found when the run's options were checked (RunConfig.validate)
        from eoschaos.clusters.container_runtime import require_runtime

        pipeline = byo.ImagePipeline(
            require_runtime(),
            config.pipeline_image,
            config.command or "",
            config.transactional_id_prefix,
            config.extra_env,
        )
    elif config.workload == "byo":
        pipeline = byo.CommandPipeline(config.command or "", config.transactional_id_prefix)
    else:
        raise EoschaosError(f"unknown workload {config.workload!r}")
    return PipelineWorkload(
        config, pipeline, bootstrap, run_dir, dist, progress, instance_bootstrap
    )
