"""What a KIP-447 run is configured with, and what each processor process is told.

The harness writes one ProcessorConfig as JSON into the run dir; every processor process
reads it back, so all incarnations of all instances run with exactly the same settings.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
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


@dataclass
class Kip447Config(PipelineConfig):
    """A run's settings (mode: eos | alos | no-fencing | read-uncommitted) plus the
    processors' own."""

    abort_fraction: float = 0.1
    session_timeout_ms: int = 6000

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")


@dataclass(frozen=True)
class ProcessorConfig:
    """Everything a processor process needs, shared by all instances and incarnations."""

    bootstrap: str
    run_dir: str
    mode: str
    input_topic: str
    output_topic: str
    group: str
    seed: int
    abort_fraction: float
    session_timeout_ms: int

    @classmethod
    def from_run(cls, config: Kip447Config, bootstrap: str, run_dir: Path) -> ProcessorConfig:
        return cls(
            bootstrap=bootstrap,
            run_dir=str(run_dir),
            mode=config.mode,
            input_topic=config.input_topic,
            output_topic=config.output_topic,
            group=config.group,
            seed=config.seed,
            abort_fraction=config.abort_fraction,
            session_timeout_ms=config.session_timeout_ms,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProcessorConfig:
        """Run as a bring-your-own pipeline (docs/byo.md): settings from the contract's
        environment. Its own history then goes to the instance's state dir, out of the run's:
        to the harness, a BYO pipeline is a black box."""
        return cls(
            bootstrap=env[instance_env.BOOTSTRAP_SERVERS],
            run_dir=env[instance_env.STATE_DIR],
            mode=env[instance_env.MODE],
            input_topic=env[instance_env.INPUT_TOPIC],
            output_topic=env[instance_env.OUTPUT_TOPIC],
            group=env[instance_env.GROUP_ID],
            seed=int(env[instance_env.INSTANCE]),
            abort_fraction=Kip447Config.abort_fraction,
            session_timeout_ms=Kip447Config.session_timeout_ms,
        )

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> ProcessorConfig:
        return cls(**json.loads(Path(path).read_text()))


def transactional_id(mode: str, instance: int, incarnation: int) -> str | None:
    """The transactional.id an instance's incarnation runs with (None: no transactions).

    Stable per instance in the fencing modes, so a replacement's init_transactions fences its
    predecessor; fresh on every start in mode no-fencing, so nothing ever fences a zombie.
    """
    if mode == "alos":
        return None
    if mode == "no-fencing":
        return f"kip447-{instance}-{incarnation}-{uuid.uuid4().hex[:8]}"
    return f"kip447-{instance}"
