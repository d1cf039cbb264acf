"""The Spark Structured Streaming job (workloads/spark/job.py) as a pipeline of the harness.

One instance is one local-mode Spark driver; killing it (`crash`) and letting the supervisor
start it again is the "driver killed, restarted from its checkpoint" fault. Spark keeps its
source offsets in the checkpoint, not in a consumer group, so the harness waits for the output
to cover the input instead of for group offsets.

A crash is aimed at the window that matters: a micro-batch whose offsets this incarnation put
in the checkpoint's write-ahead log (offsets/N) but not yet in its commit log (commits/N) will
be run again after a restart, and if some of its output is already written, that output is
written twice (mode alos) or must be skipped (mode eos). A kill at a random moment mostly lands
on a driver that is starting up (~30 s on a loaded machine) or waiting for its next trigger;
one aimed only at "planned, not committed" mostly lands before the batch wrote anything (its
tasks are still being scheduled), where again neither mode can show anything. So the window
opens when the output topic has grown since the harness first saw the batch planned.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from eoschaos.workloads.harness.supervisor import Launch, Supervisor
from eoschaos.workloads.spark.job import MODES

CHECKPOINT_DIR = "checkpoint"  # under the instance's state dir (JobConfig.checkpoint)

__all__ = ["MODES", "SparkPipeline"]


class SparkPipeline:
    observer_isolation = "read_committed"
    joins_group = False  # the Kafka source assigns partitions itself
    extra_topics: tuple[str, ...] = ()  # the job creates its batch-marker topic (mode eos)

    def __init__(self, mode: str, txn_prefix: str) -> None:
        self._mode = mode
        self._txn_prefix = txn_prefix
        self._planned_at: tuple[Path, int, int] | None = None  # (state dir, batch, output end)

    def prepare(self, workload_dir: Path) -> None:
        """Nothing to write: the job reads the environment."""

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        return Launch([sys.executable, "-m", "eoschaos.workloads.spark.job"], env)

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        return f"{self._txn_prefix}-{instance}" if self._mode == "eos" else None

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        return set(supervisor.transactional_ids())

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        """Nothing beyond the output topic: the job's output is 1:1 with its input."""

    def ready_for_input(self) -> bool:
        return True  # input may wait in the topic while the driver starts

    def in_crash_window(self, state_dir: Path, since: float, output_end: Callable[[], int]) -> bool:
        """The newest batch was planned by this incarnation (not a batch a killed one left
        behind, which a restarting driver has not begun to re-run), is not committed, and the
        output grew since it was first seen planned: the batch is writing."""
        checkpoint = state_dir / CHECKPOINT_DIR
        planned = _batches(checkpoint / "offsets")
        if not planned:
            return False
        newest = max(planned)
        if planned[newest] < since or newest in _batches(checkpoint / "commits"):
            return False
        end = output_end()
        if self._planned_at is None or self._planned_at[:2] != (state_dir, newest):
            self._planned_at = (state_dir, newest, end)
            return False
        return end > self._planned_at[2]


def _batches(log: Path) -> dict[int, float]:
    """Batch id -> modification time, for a checkpoint log (files named by batch number)."""
    if not log.is_dir():
        return {}
    return {int(e.name): e.stat().st_mtime for e in log.iterdir() if e.name.isdigit()}
