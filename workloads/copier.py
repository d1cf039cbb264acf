"""Kafka's own TransactionalMessageCopier (kafka-tools), run as Kafka's transactions test does.

One copier per input partition (manually assigned), each with its own transactional.id and
random aborts on, copying key and value unchanged -- so the output key is the source id. The
copier is a batch tool: it copies up to the partition's end *as of its launch* and exits 0;
the supervisor starts it again, which makes every run a stream of client bounces, each new
incarnation fencing the last through the shared transactional.id.

Modes: `eos` (one copier per partition, a stable transactional.id per partition: must PASS);
`eos-group`, the same copiers as members of the run's consumer group (`--group-mode
--use-group-metadata`: subscribed, each transaction's offsets sent with the group's metadata, as
KIP-447 designs): a Java client beside kip447's librdkafka one, so an anomaly of a group's
offset fetch can be told client from broker; must PASS; and `no-fencing`, the known-bad mode:
every partition has TWO copiers whose transactional.ids differ, as a deployment that starts a
replacement without fencing the old process would have. Nothing stops both from copying the
same records, so the output holds duplicates. A copier in the group copies what its partitions
held at its assignment and exits, so the group rebalances at every bounce.

Not under `twin`: by hand-assigned partition the copier reads its position before
`initTransactions`, so a second copier with the same transactional.id can copy again what the
first committed meanwhile (docs/findings.md). The scenarios run it under kill and crash.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract import instance_env
from eoschaos.contract.host import java_binary
from eoschaos.workloads.harness.supervisor import Launch, Supervisor

MODES = ("eos", "eos-group", "no-fencing")
GROUP_MODE = "eos-group"  # subscribed to the input as members of the run's group
MAIN_CLASS = "org.apache.kafka.tools.TransactionalMessageCopier"
TRANSACTION_SIZE = 100
TRANSACTION_TIMEOUT_MS = 10000  # an abandoned transaction clears well inside a run


class CopierPipeline:
    observer_isolation = "read_committed"
    extra_topics: tuple[str, ...] = ()

    def __init__(
        self, dist: KafkaDistribution, mode: str, partitions: int, txn_prefix: str
    ) -> None:
        self._dist = dist
        self._mode = mode
        self._txn_prefix = txn_prefix
        self._partitions = partitions
        # manual assignment, as in Kafka's system test, but in the group mode
        self.joins_group = mode == GROUP_MODE

    @staticmethod
    def instances_for(mode: str, partitions: int) -> int:
        return partitions * (2 if mode == "no-fencing" else 1)

    def prepare(self, workload_dir: Path) -> None:
        """Nothing to write: the copier takes everything on its command line."""

    def launch(self, instance: int, incarnation: int, env: dict[str, str]) -> Launch:
        argv = [
            java_binary(),
            "-Xmx192m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            *self._dist.logging_args(Path(env[instance_env.LOG_DIR]), tool=True),
            "-cp",
            self._dist.classpath,
            MAIN_CLASS,
            "--broker-list",
            env[instance_env.BOOTSTRAP_SERVERS],
            "--input-topic",
            env[instance_env.INPUT_TOPIC],
            "--input-partition",
            str(instance % self._partitions),
            "--output-topic",
            env[instance_env.OUTPUT_TOPIC],
            "--consumer-group",
            env[instance_env.GROUP_ID],
            "--transactional-id",
            env[instance_env.TRANSACTIONAL_ID],
            "--transaction-size",
            str(TRANSACTION_SIZE),
            "--transaction-timeout",
            str(TRANSACTION_TIMEOUT_MS),
            "--enable-random-aborts",
            *(["--group-mode", "--use-group-metadata"] if self.joins_group else []),
        ]
        return Launch(argv, env)

    def transactional_id(self, instance: int, incarnation: int) -> str | None:
        if self._mode == "no-fencing":
            return f"{self._txn_prefix}-{instance}-{incarnation}-{uuid.uuid4().hex[:8]}"
        return f"{self._txn_prefix}-{instance}"

    def transactional_ids(self, supervisor: Supervisor) -> set[str] | None:
        return set(supervisor.transactional_ids())

    def record_outputs(self, bootstrap: str, run_dir: Path) -> None:
        """Nothing beyond the output topic: the copier's output is 1:1 with its input."""

    def in_crash_window(self, state_dir: Path, since: float, output_end: Callable[[], int]) -> bool:
        return True  # any moment will do

    def ready_for_input(self) -> bool:
        return True  # input may wait in the topic while it starts
