"""Bring your own pipeline: the user's command line, one process per instance, or the user's
image, one container per instance (docs/byo.md).

The harness knows nothing of what runs: it seeds the input, starts `--command` (or a container
of `--pipeline-image`, `--command` its arguments) once per instance with the contract's
environment, replaces an instance that dies, and reads the output. The source id of an output
record is found by `--id-from`. Transactions are judged by their effects (offsets, ids), not
one by one: the pipeline writes no `txn` history.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from eoschaos.contract import instance_env
from eoschaos.contract.history import instance_name
from eoschaos.workloads.harness.containers import container_launch, container_name
from eoschaos.workloads.harness.supervisor import Launch, Supervisor

if TYPE_CHECKING:
    from eoschaos.clusters.container_runtime import Runtime

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

    def ready_for_input(self) -> bool:
        return True  # input may wait in the topic while it starts


class ImagePipeline(CommandPipeline):
    """Instances are containers of the user's image, `command` their arguments (none: the
    image's own command); the rest is a command's (workloads.harness.containers)."""

    def __init__(
        self,
        runtime: Runtime,
        image: str,
        command: str,
        txn_prefix: str,
        extra_env: dict[str, str],
    ) -> None:
        super().__init__(command, txn_prefix)
        self._runtime = runtime
        self._image = image
        self._extra_env = extra_env

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        workload_dir = Path(env[instance_env.LOG_DIR])  # the contract's log dir is the run's
        name = container_name(workload_dir, instance_name(instance, incarnation))
        return container_launch(
            self._runtime, self._image, self.command, name, workload_dir, env, self._extra_env
        )
