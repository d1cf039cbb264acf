"""The KIP-447 workload as the harness drives it: our own processors, one OS process each.

    with Kip447Workload(PipelineConfig(records=5000), bootstrap, run_dir, dist) as workload:
        workload.setup()
        workload.start()
        workload.kill_instance(1)          # the supervisor starts incarnation 1 of instance 1
        workload.wait_seeded(60)
        workload.wait_caught_up(120)
        workload.stop()
        workload.final_scans()

Processors read their settings from RUN_DIR/workload/processor.json (not the environment), so
every incarnation of every instance runs with exactly the same ones; they write their own
`txn` and `rebalance` history, which is what lets the checkers judge transactions one by one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract import instance_env
from eoschaos.contract.progress import progress_to_stderr
from eoschaos.workloads.harness.pipeline import PipelineConfig, PipelineWorkload
from eoschaos.workloads.harness.supervisor import Launch, Supervisor
from eoschaos.workloads.kip447.config import (
    MODES,
    ProcessorConfig,
    ProcessorSettings,
    transactional_id,
)

__all__ = ["MODES", "Kip447Pipeline", "Kip447Workload", "ProcessorSettings"]

PROCESSOR_CONFIG = "processor.json"
DEFAULT_SETTINGS = ProcessorSettings()


class Kip447Pipeline:
    joins_group = True
    extra_topics: tuple[str, ...] = ()

    def __init__(
        self, config: PipelineConfig, settings: ProcessorSettings, bootstrap: str, run_dir: Path
    ) -> None:
        self.config = config
        self._processor_config = ProcessorConfig(bootstrap, str(run_dir), config, settings)
        self._config_path = Path(run_dir) / "workload" / PROCESSOR_CONFIG
        # the known-bad reader: mode read-uncommitted reads downstream as it is written
        uncommitted = config.mode == "read-uncommitted"
        self.observer_isolation = "read_uncommitted" if uncommitted else "read_committed"

    def prepare(self, workload_dir: Path) -> None:
        self._processor_config.save(self._config_path)

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        txn_id = env[instance_env.TRANSACTIONAL_ID]
        argv = [sys.executable, "-m", "eoschaos.workloads.kip447.processor", str(self._config_path)]
        argv += [str(instance), str(incarnation), *([txn_id] if txn_id else [])]
        argv += ["--bootstrap", env[instance_env.BOOTSTRAP_SERVERS]]  # its lane, if it has one
        return Launch(argv, env)

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        return transactional_id(
            self.config.transactional_id_prefix, self.config.mode, instance, incarnation
        )

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        return set(supervisor.transactional_ids())

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        """Nothing beyond the output topic: every output record is 1:1 with an input."""

    def in_crash_window(self, state_dir: Path, since: float, output_end: Callable[[], int]) -> bool:
        return True  # any moment will do

    def ready_for_input(self) -> bool:
        return True  # input may wait in the topic while it starts


class Kip447Workload(PipelineWorkload):
    def __init__(
        self,
        config: PipelineConfig,
        bootstrap: str,
        run_dir: Path,
        dist: KafkaDistribution,
        progress: Callable[[str], None] = progress_to_stderr,
        instance_bootstrap: Callable[[int], str] | None = None,
        settings: ProcessorSettings = DEFAULT_SETTINGS,
    ) -> None:
        super().__init__(
            config,
            Kip447Pipeline(config, settings, bootstrap, run_dir),
            bootstrap,
            run_dir,
            dist,
            progress,
            instance_bootstrap,
        )
