"""The Spark Structured Streaming job (workloads/spark/job.py) as a pipeline of the harness.

One instance is one local-mode Spark driver; killing it (`crash`) and letting the supervisor
start it again is the "driver killed, restarted from its checkpoint" fault. Spark keeps its
source offsets in the checkpoint, not in a consumer group, so the harness waits for the output
to cover the input instead of for group offsets.

A crash is aimed at the window that matters: a micro-batch whose offsets this incarnation put
in the checkpoint's write-ahead log (offsets/N) but not yet in its commit log (commits/N) is
running -- writing its output -- and will be run again after a restart. A kill at a random
moment mostly lands on a driver that is starting up (~30 s on a loaded machine) or waiting for
its next trigger, where nothing is in flight and neither mode can show anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

from workloads.harness.supervisor import Launch, Supervisor
from workloads.spark.job import MODES

CHECKPOINT_DIR = "checkpoint"  # under the instance's state dir (JobConfig.checkpoint)

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

    def in_crash_window(self, state_dir: Path, since: float) -> bool:
        """The newest batch was planned by this incarnation (not a batch a killed one left
        behind, which a restarting driver has not begun to re-run) and is not committed."""
        checkpoint = state_dir / CHECKPOINT_DIR
        planned = _batches(checkpoint / "offsets")
        if not planned:
            return False
        newest = max(planned)
        return planned[newest] >= since and newest not in _batches(checkpoint / "commits")


def _batches(log: Path) -> dict[int, float]:
    """Batch id -> modification time, for a checkpoint log (files named by batch number)."""
    if not log.is_dir():
        return {}
    return {int(e.name): e.stat().st_mtime for e in log.iterdir() if e.name.isdigit()}
