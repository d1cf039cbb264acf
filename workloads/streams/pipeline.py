"""The Kafka Streams app (workloads/streams/app) as a pipeline of the harness.

Instances are JVMs of the app built against the cluster's own Kafka version. Besides the 1:1
echo on the output topic, the app keeps count/sum/min/max of the ids per key (id mod BUCKETS)
in a RocksDB store behind a repartition topic, and writes every update to the aggregate topic;
after the run the last committed value of each key is recorded for aggregate.mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eoschaos.contract.errors import EoschaosError
from eoschaos.workloads.harness.final import record_aggregates
from eoschaos.workloads.harness.supervisor import Launch, Supervisor
from eoschaos.workloads.streams.build import StreamsApp

MODES = ("eos", "alos")  # processing.guarantee exactly_once_v2 / at_least_once
BUCKETS = 10  # the aggregate's keys unless the run asks for more (--buckets)
# The app's exit status when it failed on its own: a stream thread died of a fatal error, or it
# did not close in time (App.java); it stops for SIGTERM with 0 and for a bad environment with 2.
EXIT_FAILED = 1
AGGREGATE_READ_TIMEOUT_S = 60.0


def check_streams_config(line: str) -> None:
    """Bad input unless `line` is KEY=VALUE pairs, comma-separated (the app reads it so)."""
    for pair in line.split(","):
        key, equals, _value = pair.partition("=")
        if not (equals and key.strip()):
            raise EoschaosError(
                f"--streams-config: {pair!r} is not KEY=VALUE; give Kafka Streams settings as "
                "KEY=VALUE,KEY=VALUE (e.g. commit.interval.ms=1000)"
            )


def aggregate_topic(output_topic: str) -> str:
    return f"{output_topic}-aggregates"


class StreamsPipeline:
    observer_isolation = "read_committed"
    joins_group = True  # application.id is the group: faults wait for every instance

    def __init__(
        self,
        app: StreamsApp,
        output_topic: str,
        buckets: int = 0,  # 0: BUCKETS
        streams_config: str = "",
    ) -> None:
        self._app = app
        self._buckets = buckets or BUCKETS
        self._streams_config = streams_config
        self._aggregates = aggregate_topic(output_topic)
        self.extra_topics = (self._aggregates,)

    def prepare(self, workload_dir: Path) -> None:
        """Nothing to write: the app reads the environment."""

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        extra = {
            "EOSCHAOS_AGGREGATE_TOPIC": self._aggregates,
            "EOSCHAOS_BUCKETS": str(self._buckets),
            "EOSCHAOS_STREAMS_CONFIG": self._streams_config,
        }
        return Launch(self._app.command(), {**env, **extra})

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        return None  # Streams derives its transactional ids from application.id

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        return None

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        record_aggregates(
            bootstrap, run_dir, self._aggregates, self._buckets, AGGREGATE_READ_TIMEOUT_S
        )

    def in_crash_window(self, state_dir: Path, since: float, output_end: Callable[[], int]) -> bool:
        return True  # any moment will do

    def ready_for_input(self) -> bool:
        return True  # input may wait in the topic while it starts
