"""The Spark Structured Streaming job (workloads/spark/job.py) as a pipeline of the harness.

One instance is one local-mode Spark driver; killing it (`crash`) and letting the supervisor
start it again is the "driver killed, restarted from its checkpoint" fault. Spark keeps its
source offsets in the checkpoint, not in a consumer group, so the harness waits for the output
to cover the input instead of for group offsets.
"""

from __future__ import annotations

import sys
from pathlib import Path

from workloads.harness.supervisor import Launch, Supervisor
from workloads.spark.job import MODES

__all__ = ["MODES", "SparkPipeline"]


class SparkPipeline:
    observer_isolation = "read_committed"
    joins_group = False  # the Kafka source assigns partitions itself
    extra_topics: tuple[str, ...] = ()  # the job creates its batch-marker topic (mode eos)

    def __init__(self, mode: str) -> None:
        self._mode = mode

    def prepare(self, workload_dir: Path) -> None:
        """Nothing to write: the job reads the environment."""

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        return Launch([sys.executable, "-m", "workloads.spark.job"], env)

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        return f"spark-{instance}" if self._mode == "eos" else None

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        return set(supervisor.transactional_ids())

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        """Nothing beyond the output topic: the job's output is 1:1 with its input."""
