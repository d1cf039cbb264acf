"""The topics of a run by role: inputs the seeder writes, outputs the pipeline writes,
dead-letter topics where it puts the records it rejects, and fan-out topics it writes every
record to besides.

A real pipeline often reads several topics (a join) and writes several (a fan-out, a
dead-letter topic), so a run names each role's topics as a list (`--input-topics`,
`--output-topics`, `--dead-letter-topics`, `--fan-out-topics`), each entry
`NAME[:PARTITIONS[:REPLICATION]]`.
run.json keeps `input_topic` and `output_topic` (the first of each, all a one-topic run has)
and adds the lists only where a role has more than that one, so every run dir recorded before
reads as it did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eoschaos.contract.errors import EoschaosError

# run.json's keys (the pipeline config's field names)
INPUT_TOPICS = "input_topics"
OUTPUT_TOPICS = "output_topics"
DEAD_LETTER_TOPICS = "dead_letter_topics"
FAN_OUT_TOPICS = "fan_out_topics"
DEFAULT_INPUT = "input-topic"  # run dirs whose manifest names none
DEFAULT_OUTPUT = "output-topic"
MAX_TOPICS_PER_ROLE = 100  # the checkers pack a topic's index within its role into 7 bits
# Kafka's own rule for a topic name (kafka.common.internals.Topic)
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True)
class TopicSpec:
    """One entry of a topic list: a name, and the partitions and replication to create it
    with (None: the run's --partitions, the harness's replication)."""

    name: str
    partitions: int | None = None
    replication: int | None = None

    @property
    def entry(self) -> str:
        """As a list entry: NAME[:PARTITIONS[:REPLICATION]]."""
        counts = [count for count in (self.partitions, self.replication) if count is not None]
        return ":".join([self.name, *map(str, counts)])

    @classmethod
    def parse(cls, text: str, option: str) -> TopicSpec:
        """`NAME[:PARTITIONS[:REPLICATION]]`; EoschaosError naming `option` otherwise."""
        name, *numbers = text.strip().split(":")
        if not TOPIC_NAME.fullmatch(name) or name in (".", "..") or len(numbers) > 2:
            raise EoschaosError(
                f"{option}: {text!r} is not a topic; write NAME[:PARTITIONS[:REPLICATION]] "
                "(letters, digits, '.', '_', '-'), e.g. orders:6:3"
            )
        counts = []
        for number in numbers:
            if not number.isdigit() or int(number) < 1:
                raise EoschaosError(
                    f"{option}: {text!r} has {number!r} where a count of at least 1 goes; "
                    "write NAME[:PARTITIONS[:REPLICATION]], e.g. orders:6:3"
                )
            counts.append(int(number))
        return cls(name, *counts)


def parse_topics(texts: Any, option: str) -> tuple[str, ...]:
    """A topic list as given (a comma-separated string or a list) as a tuple of entries,
    each checked (TopicSpec.parse); empty entries are refused rather than skipped."""
    if isinstance(texts, str):
        texts = texts.split(",") if texts.strip() else []
    entries = tuple(str(text).strip() for text in texts)
    for entry in entries:
        TopicSpec.parse(entry, option)
    return entries


def topic_names(entries: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(TopicSpec.parse(entry, "topic").name for entry in entries)


@dataclass(frozen=True)
class RunTopics:
    """A run's topics by role, names only: what the checkers tell apart."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dead_letters: tuple[str, ...] = ()
    fan_outs: tuple[str, ...] = ()

    @classmethod
    def of_manifest(cls, manifest: dict[str, Any]) -> RunTopics:
        first_input = manifest.get("input_topic") or DEFAULT_INPUT
        first_output = manifest.get("output_topic") or DEFAULT_OUTPUT
        return cls(
            topic_names(manifest.get(INPUT_TOPICS) or []) or (first_input,),
            topic_names(manifest.get(OUTPUT_TOPICS) or []) or (first_output,),
            topic_names(manifest.get(DEAD_LETTER_TOPICS) or []),
            topic_names(manifest.get(FAN_OUT_TOPICS) or []),
        )

    @property
    def delivered_to(self) -> tuple[str, ...]:
        """Where a record counts as delivered: an output topic or a dead-letter topic, once
        across all of them."""
        return self.outputs + self.dead_letters

    @property
    def written(self) -> tuple[str, ...]:
        """Every topic the pipeline writes: what the downstream reader reads."""
        return self.delivered_to + self.fan_outs

    @property
    def all(self) -> tuple[str, ...]:
        """Inputs, then outputs, dead-letter and fan-out topics: a topic's index here is its
        code where a pass packs the topic into a number."""
        return self.inputs + self.written

    @property
    def one_each(self) -> bool:
        """One input and one output topic, and no other: the shape every check was first
        written for."""
        return len(self.inputs) == 1 and len(self.written) == 1
