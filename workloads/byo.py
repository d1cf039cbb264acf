"""Bring your own pipeline: the user's command line, one process per instance (docs/byo.md).

The harness knows nothing of what runs: it seeds the input, starts `--command` once per
instance with the contract's environment, replaces an instance that dies, and reads the
output. The source id of an output record is found by `--id-from`. Transactions are judged
by their effects (offsets, ids), not one by one: the pipeline writes no `txn` history.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eoschaos.workloads.harness.supervisor import Launch, Supervisor

MODES = ("eos", "alos")  # passed on as EOSCHAOS_MODE; what they mean is the pipeline's business


class CommandPipeline:
    """Instances are `sh -c COMMAND`, so the command may use the EOSCHAOS_* variables itself."""

    observer_isolation = "read_committed"
    joins_group = False  # the pipeline may not use a consumer group; output is the signal
    extra_topics: tuple[str, ...] = ()

    def __init__(self, command: str, txn_prefix: str) -> None:
        self.command = command
        self._txn_prefix = txn_prefix

    def prepare(self, workload_dir: Path) -> None:
        """Nothing to write: the command reads the environment."""

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        return Launch(["/bin/sh", "-c", self.command], env)

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        return f"{self._txn_prefix}-{instance}"

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        return None  # the pipeline may not use ours: every open transaction counts

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        """Nothing beyond the output topic."""

    def in_crash_window(self, state_dir: Path, since: float, output_end: Callable[[], int]) -> bool:
        return True  # any moment will do
