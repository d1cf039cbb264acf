"""What a KIP-447 run is configured with, and what each processor process is told.

The harness writes one ProcessorConfig as JSON into the run dir; every processor process
reads it back, so all incarnations of all instances run with exactly the same settings.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eoschaos.contract import instance_env
from eoschaos.workloads.harness.pipeline import PipelineConfig

MODES = ("eos", "alos", "no-fencing", "read-uncommitted")
TRANSACTIONAL_MODES = ("eos", "no-fencing", "read-uncommitted")

# Exit status of a processor that learned it was fenced (or hit a fatal producer error).
EXIT_FENCED = 3
# Exit status of an at-least-once processor whose output could not be delivered: it stops
# rather than commit past the gap, and its replacement reprocesses from the committed offsets.
EXIT_UNDELIVERABLE = 4
EXIT_HUNG = 5  # a client call blocked past its timeout; the supervisor replaces the process


@dataclass(frozen=True)
class ProcessorSettings:
    """The processors' own knobs, beyond the run's PipelineConfig."""

    abort_fraction: float = 0.1  # of transactions a processor aborts on purpose
    session_timeout_ms: int = 6000
    # librdkafka's debug contexts for every client, from where the run started; saved with the
    # settings, so each incarnation logs the same
    client_debug: str = field(
        default_factory=lambda: os.environ.get(instance_env.LIBRDKAFKA_DEBUG, "")
    )

    def client_logging(self) -> dict[str, object]:
        """A client's logging settings: warnings only, or every line of the debug contexts."""
        if not self.client_debug:
            return {"log_level": 4}
        return {"log_level": 7, "debug": self.client_debug}


@dataclass(frozen=True)
class ProcessorConfig:
    """Everything a processor process needs, shared by all instances and incarnations: the
    run's PipelineConfig as it is, plus where to connect and write."""

    bootstrap: str
    run_dir: str
    pipeline: PipelineConfig
    settings: ProcessorSettings = ProcessorSettings()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProcessorConfig:
        """Run as a bring-your-own pipeline (docs/byo.md): settings from the contract's
        environment. Its own history then goes to the instance's state dir, out of the run's:
        to the harness, a BYO pipeline is a black box."""
        pipeline = PipelineConfig(
            workload="byo",
            mode=env[instance_env.MODE],
            input_topic=env[instance_env.INPUT_TOPIC],
            output_topic=env[instance_env.OUTPUT_TOPIC],
            group=env[instance_env.GROUP_ID],
            seed=int(env[instance_env.INSTANCE]),
        )
        return cls(env[instance_env.BOOTSTRAP_SERVERS], env[instance_env.STATE_DIR], pipeline)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> ProcessorConfig:
        saved = json.loads(Path(path).read_text())
        return cls(
            saved["bootstrap"],
            saved["run_dir"],
            PipelineConfig(**saved["pipeline"]),
            ProcessorSettings(**saved["settings"]),
        )


def transactional_id(prefix: str, mode: str, instance: int, incarnation: int) -> str | None:
    """The transactional.id an instance's incarnation runs with (None: no transactions).

    Stable per instance in the fencing modes, so a replacement's init_transactions fences its
    predecessor; fresh on every start in mode no-fencing, so nothing ever fences a zombie.
    """
    if mode == "alos":
        return None
    if mode == "no-fencing":
        return f"{prefix}-{instance}-{incarnation}-{uuid.uuid4().hex[:8]}"
    return f"{prefix}-{instance}"
