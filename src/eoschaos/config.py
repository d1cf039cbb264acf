"""What a run is asked for, in one object built once from options named like `eoschaos run`'s.

The command line, the pytest plugin's `eoschaos_run(...)` and a matrix file's cells all name
options by `eoschaos run`'s long names (`--kafka-version` is `kafka_version`); `from_options`
is the one place that turns them into a RunConfig, with its defaults and its checks. The
RunConfig nests the PipelineConfig the workload receives as it is, so nothing is copied field by
field on the way down; run.json keeps its flat shape (`to_manifest`), which the checkers read.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eoschaos.chaos.catalogue import CATALOGUE
from eoschaos.chaos.schedule import (
    INTENSITIES,
    FaultEvent,
    load_schedule,
    parse_faults,
    random_schedule,
    resolve_random,
    validate_schedule,
)
from eoschaos.clusters import kafka_dist
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.contract.capabilities import Capabilities
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.rundir import SCHEDULE_FILE
from eoschaos.contract.topics import TopicSpec
from eoschaos.workloads import registry
from eoschaos.workloads.harness.containers import require_image
from eoschaos.workloads.harness.expected import load_expect
from eoschaos.workloads.harness.input_records import check_input, load_input
from eoschaos.workloads.harness.pipeline import PipelineConfig
from eoschaos.workloads.harness.reader import IdSource

BACKENDS = ("process", "containers")
DEFAULT_DURATION_S = 30.0

TOPIC_LISTS = ("input_topics", "output_topics", "dead_letter_topics", "fan_out_topics")
# The options of a run by `eoschaos run`'s long names; the first group is the pipeline's.
PIPELINE_OPTIONS = (
    "workload",
    "mode",
    "command",
    "pipeline_image",
    "id_from",
    "expect",
    "input",
    "input_id_from",
    "non_idempotent_seeder",
    "seed",
    "records",
    "instances",
    "partitions",
    "input_topic",
    "output_topic",
    *TOPIC_LISTS,
    "run_tag",
    "group",
    "client_version",
    "buckets",
    "streams_config",
)
RUN_OPTIONS = (
    "faults",
    "schedule",
    "intensity",
    "no_recovery_wait",
    "duration",
    "start_timeout",
    "kafka_version",
    "brokers",
    "backend",
    "image",
    "max_lag",
    "protocol_proxy",
)
OPTIONS = PIPELINE_OPTIONS + RUN_OPTIONS


def names_of_a_run(workload: str, label: str = "") -> dict[str, str]:
    """Input and output topics and a group (the prefix of the transactional.ids the harness
    assigns, and a Streams app's application.id) that no other run shares: a random token,
    after an optional readable label. A client left from an earlier run on the same machine --
    an orphan, or a user's process still pointing at the old address -- then finds none of
    this run's topics (auto-creation is off), never joins its group and never fences its
    transactional.ids, even when this run's cluster took the earlier one's ports."""
    tag = "-".join(part for part in (label, secrets.token_hex(4)) if part)
    return {
        "input_topic": f"input-{tag}",
        "output_topic": f"output-{tag}",
        "group": f"eoschaos-{workload}-{tag}",
        "run_tag": tag,  # after each topic a byo run names (--input-topics, ...)
    }


@dataclass
class RunConfig:
    """Everything a run was asked for: the pipeline's part, and the faults and cluster around
    it. Saved in run.json (flat) and handed to a recording child process (nested)."""

    pipeline: PipelineConfig
    faults: list[str] = field(default_factory=list)
    schedule_events: list[dict[str, Any]] | None = None  # an explicit schedule (--schedule)
    intensity: str = "normal"
    recovery_wait: bool = True  # before a broker fault, wait for URPs of the last to clear
    start_timeout: float | None = None  # seconds until first output (None: the workload's)
    kafka_version: str = kafka_dist.DEFAULT_KAFKA_VERSION
    brokers: int = 3
    backend: str = "process"
    image: str | None = None
    # seconds a committed record may take to reach the downstream reader (None: not judged)
    max_lag: float | None = None
    # the Kafka protocol proxy on the cluster's client links even when no fault needs it
    protocol_proxy: bool = False

    @classmethod
    def from_options(cls, **options: Any) -> RunConfig:
        """A checked RunConfig from `eoschaos run` options (`faults` a comma-separated string
        or a list; `schedule` a JSON file or a list of FaultEvent). Bad input: EoschaosError
        naming the option."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise EoschaosError(
                f"unknown option {unknown[0]!r}; known: {', '.join(sorted(OPTIONS))}"
            )
        pipeline = {name: options.pop(name) for name in PIPELINE_OPTIONS if name in options}
        faults = options.pop("faults", "") or ""
        schedule = options.pop("schedule", None)
        if schedule is not None and faults:
            raise EoschaosError(
                "give either --faults (a random schedule) or --schedule FILE, not both"
            )
        events: list[FaultEvent] | None = (
            load_schedule(Path(schedule)) if isinstance(schedule, (str, Path)) else schedule
        )
        asked_instances = pipeline.pop("instances", None)
        workload = pipeline.setdefault("workload", "kip447")
        for option, name in names_of_a_run(workload).items():
            pipeline.setdefault(option, name)
        duration = options.pop("duration", DEFAULT_DURATION_S)
        # input flows while any fault can hit
        pipeline_config = PipelineConfig(**pipeline, seed_seconds=duration)
        registry.check_options(pipeline_config)
        pipeline_config.instances = registry.instance_count(
            workload, pipeline_config.mode, pipeline_config.partitions, asked_instances
        )
        config = cls(
            pipeline=pipeline_config,
            faults=parse_faults(faults) if isinstance(faults, str) else list(faults),
            recovery_wait=not options.pop("no_recovery_wait", False),
            **options,
        )
        if events is not None:
            config.schedule_events = [event.to_json() for event in events]
            config.faults = list(dict.fromkeys(event.fault for event in events))
        config.validate()
        return config

    @classmethod
    def from_json(cls, saved: dict[str, Any]) -> RunConfig:
        """The nested form `to_json` wrote (a recording child reads its config so)."""
        saved = dict(saved)
        return cls(pipeline=PipelineConfig(**saved.pop("pipeline")), **saved)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_manifest(self) -> dict[str, Any]:
        """run.json's flat shape (schema 1): the pipeline's options next to the run's."""
        pipeline = asdict(self.pipeline)
        for internal in ("seed_seconds", "extra_env", "command", "client_version"):
            pipeline.pop(internal)
        if self.workload == "streams":  # the client its app was built against, always named
            pipeline["client_version"] = self.pipeline.client_version or self.kafka_version
        # only where the user gave them
        for name in ("input", "input_id_from", "pipeline_image", "buckets", "streams_config"):
            if not pipeline[name]:
                pipeline.pop(name)
        # The topic lists as created (the run's tag after each name: what the history's
        # events name), each only where it says more than input_topic and output_topic do
        pipeline.pop("run_tag")
        created = {  # each role's specs, and what input_topic and output_topic say of it
            "input_topics": (self.pipeline.input_specs, [self.pipeline.input_topic]),
            "output_topics": (self.pipeline.output_specs, [self.pipeline.output_topic]),
            "dead_letter_topics": (self.pipeline.dead_letter_specs, []),
            "fan_out_topics": (self.pipeline.fan_out_specs, []),
        }
        for listed, (specs, said) in created.items():
            entries = [spec.entry for spec in specs]
            if entries in ([], said):
                pipeline.pop(listed)
            else:
                pipeline[listed] = entries
        run = asdict(self)
        run.pop("pipeline")
        return {**pipeline, **run, "duration": self.duration, "command": self.command_line()}

    @property
    def workload(self) -> str:
        return self.pipeline.workload

    @property
    def mode(self) -> str:
        return self.pipeline.mode

    @property
    def seed(self) -> int:
        return self.pipeline.seed

    @property
    def duration(self) -> float:
        """Seconds the workload runs under faults; the input flows as long."""
        return self.pipeline.seed_seconds

    def validate(self) -> None:
        """Bad input is refused before anything starts; fills in the workload's defaults."""
        pipeline = self.pipeline
        registry.check_options(pipeline)
        try:
            IdSource(pipeline.id_from)
        except ValueError as exc:
            raise EoschaosError(str(exc)) from exc
        if pipeline.expect:
            if pipeline.workload != "byo":
                raise EoschaosError(f"--expect is for --workload byo, not {pipeline.workload}")
            load_expect(pipeline.expect)  # a module that does not load is bad input, now
        if pipeline.input_id_from and not pipeline.input:
            raise EoschaosError(
                "--input-id-from says where --input's records hold their id; "
                "give --input too, or leave it out"
            )
        if pipeline.input:
            if pipeline.workload != "byo":
                raise EoschaosError(
                    f"--input is for --workload byo, not {pipeline.workload} (it parses the "
                    "seeder's own records)"
                )
            try:
                ids = pipeline.input_ids
            except ValueError as exc:
                raise EoschaosError(str(exc)) from exc
            record_of = load_input(pipeline.input, pipeline.seed)
            given = tuple(pipeline.input_names)
            check_input(pipeline.input, record_of, ids, pipeline.records, given)
        if pipeline.pipeline_image:
            require_image(pipeline.pipeline_image)  # the runtime and the image, now
        for entry in (
            pipeline.input_topics
            + pipeline.output_topics
            + (pipeline.dead_letter_topics + pipeline.fan_out_topics)
        ):
            spec = TopicSpec.parse(entry, "topic")
            if spec.replication is not None and spec.replication > self.brokers:
                raise EoschaosError(
                    f"topic {spec.name} asks for replication {spec.replication} on "
                    f"{self.brokers} brokers; give at most {self.brokers}, or more --brokers"
                )
        kafka_dist.parse_version(self.kafka_version)
        if pipeline.client_version and not re.fullmatch(r"\d+\.\d+\.\d+", pipeline.client_version):
            raise EoschaosError(
                f"--client-version {pipeline.client_version!r} is not a Kafka version; use "
                f"MAJOR.MINOR.PATCH, e.g. {kafka_dist.LATEST_3X_VERSION}"
            )
        if self.backend not in BACKENDS:
            raise EoschaosError(
                f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}"
            )
        if self.intensity not in INTENSITIES:
            raise EoschaosError(
                f"unknown --intensity {self.intensity!r}; choose from {', '.join(INTENSITIES)}"
            )
        if self.start_timeout is None:
            self.start_timeout = registry.KINDS[pipeline.workload].start_timeout_s
        if self.start_timeout <= 0:
            raise EoschaosError(f"--start-timeout must be > 0 seconds, got {self.start_timeout:g}")
        if self.duration <= 0:
            raise EoschaosError(f"--duration must be > 0 seconds, got {self.duration:g}")
        if self.max_lag is not None and self.max_lag <= 0:
            raise EoschaosError(f"--max-lag must be > 0 seconds, got {self.max_lag:g}")
        if self.schedule_events is not None:
            validate_schedule(
                self.schedule(),
                brokers=ClusterSpec(brokers=self.brokers).node_ids,
                instances=pipeline.instances,
                duration=self.duration,
                partitions=pipeline.partitions,
            )
        elif self.faults and not self.schedule():
            raise EoschaosError(
                f"--duration {self.duration:g}s leaves no room for the faults "
                f"{','.join(self.faults)}; use --duration 20 or more"
            )
        self._check_lanes()

    def _check_lanes(self) -> None:
        """A fault on an instance's own client lane needs instances whose clients connect
        through it; a Flink job's clients all run in its TaskManagers, from the one address
        its JobManager was given."""
        kind = registry.KINDS[self.pipeline.workload]
        if kind.instance_lanes:
            return
        named = (
            {entry["fault"] for entry in self.schedule_events}
            if self.schedule_events is not None
            else set(self.faults)
        )
        on_lanes = sorted(
            name for name in named if name in CATALOGUE and CATALOGUE[name].needs_lane
        )
        if on_lanes:
            raise EoschaosError(
                f"{', '.join(on_lanes)} work on an instance's own client lane, and --workload "
                f"{kind.name}'s instances share one; choose faults without a lane "
                "(docs/schedules.md)"
            )

    def command_line(self) -> list[str]:
        """The `eoschaos run` command that repeats this run (same seed, same schedule)."""
        pipeline = self.pipeline
        line = ["eoschaos", "run", "--workload", pipeline.workload, "--mode", pipeline.mode]
        if self.schedule_events is not None:
            line += ["--schedule", SCHEDULE_FILE]
        elif self.faults:
            line += ["--faults", ",".join(self.faults)]
            if self.intensity != "normal":
                line += ["--intensity", self.intensity]
        line += ["--duration", f"{self.duration:g}", "--seed", str(pipeline.seed)]
        if pipeline.pipeline_image:
            line += ["--pipeline-image", pipeline.pipeline_image]
        if pipeline.command is not None:
            line += ["--command", pipeline.command]
        if pipeline.id_from != "key":
            line += ["--id-from", pipeline.id_from]
        if pipeline.expect:
            line += ["--expect", pipeline.expect]
        if pipeline.input:
            line += ["--input", pipeline.input]
        if pipeline.input_id_from:
            line += ["--input-id-from", pipeline.input_id_from]
        for option, topics in (
            ("--input-topics", pipeline.input_topics),
            ("--output-topics", pipeline.output_topics),
            ("--dead-letter-topics", pipeline.dead_letter_topics),
            ("--fan-out-topics", pipeline.fan_out_topics),
        ):
            if topics:
                line += [option, ",".join(topics)]
        line += ["--records", str(pipeline.records), "--instances", str(pipeline.instances)]
        line += ["--partitions", str(pipeline.partitions), "--kafka-version", self.kafka_version]
        if pipeline.client_version:
            line += ["--client-version", pipeline.client_version]
        if pipeline.buckets:
            line += ["--buckets", str(pipeline.buckets)]
        if pipeline.streams_config:
            line += ["--streams-config", pipeline.streams_config]
        if not self.recovery_wait:
            line += ["--no-recovery-wait"]
        if pipeline.non_idempotent_seeder:
            line += ["--non-idempotent-seeder"]
        if self.backend != "process":
            line += ["--backend", self.backend] + (["--image", self.image] if self.image else [])
        if self.max_lag is not None:
            line += ["--max-lag", f"{self.max_lag:g}"]
        if self.protocol_proxy:
            line += ["--protocol-proxy"]
        return line

    def schedule(self) -> list[FaultEvent]:
        """The explicit schedule (random targets resolved from the seed), else a random one."""
        brokers = ClusterSpec(brokers=self.brokers).node_ids
        instances = self.pipeline.instances
        if self.schedule_events is not None:
            events = [FaultEvent(**entry) for entry in self.schedule_events]
            return resolve_random(events, self.seed, brokers, instances)
        return random_schedule(
            self.faults,
            self.duration,
            self.seed,
            brokers,
            instances,
            intensity=self.intensity,
            partitions=self.pipeline.partitions,
            transactions=self.capabilities().assigned_transactional_ids,
        )

    def capabilities(self) -> Capabilities:
        kind = registry.KINDS[self.workload]
        return kind.capabilities(self.mode, expect=bool(self.pipeline.expect))
