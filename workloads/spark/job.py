"""One instance of a Spark Structured Streaming pipeline, run under eoschaos' instance contract.

    python -m eoschaos.workloads.spark.job        # configured only by the EOSCHAOS_* environment

A local-mode Spark driver reads the input topic (read_committed), maps every record to
"processed-<value>" under the same key and partition, and writes the output topic:

- mode `alos`: Spark's built-in Kafka sink. Spark documents it as at-least-once: a driver
  killed after a micro-batch's records were written but before the batch's entry in the
  checkpoint's commit log re-runs the batch on restart, and its records appear twice.
- mode `eos`: foreachBatch with a transactional producer, one transaction per micro-batch that
  also writes a marker (the batch id) to `<output topic>-spark-batches`; see
  `TransactionalBatchWriter` for why that makes a re-run batch a no-op.

Progress goes to stdout: RUNNING_LINE once the query is started, then one line per micro-batch.
SIGTERM stops the query (a batch in flight finishes first) and exits 0.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, concat, lit
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from eoschaos.clusters.admin import admin_client, create_topics
from eoschaos.contract import instance_env
from eoschaos.workloads.harness.orphan import exit_when_orphaned
from eoschaos.workloads.spark.connector import connector_jars

MODES = ("eos", "alos")
EXIT_USAGE = 2
LOOPBACK = "127.0.0.1"
RUNNING_LINE = "spark-job: running"  # printed once the streaming query has started
MARKER_TOPIC_SUFFIX = "-spark-batches"
MAX_OFFSETS_PER_TRIGGER = 2000
TRIGGER_INTERVAL = "500 milliseconds"
# Beside three brokers on two cores: two task threads, a small heap, a cheap JIT and one GC
# thread. The C1-only JIT costs far less CPU at start, and a few thousand records a second
# never need C2's faster code.
SPARK_CONF = {
    "spark.driver.memory": "768m",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": LOOPBACK,
    "spark.driver.host": LOOPBACK,
}
TRANSACTION_TIMEOUT_MS = 30000
OPERATION_TIMEOUT_S = 30.0
MARKER_READ_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.5
# Sourced by spark-submit before it execs the driver JVM (SPARK_CONF_DIR/spark-env.sh).
SPARK_ENV_SH = "trap '' TERM  # eoschaos: the Python driver handles SIGTERM, not the JVM\n"


class UsageError(Exception):
    """The environment does not describe a run this job can do."""


@dataclass(frozen=True)
class JobConfig:
    """The instance contract's environment, as this job uses it."""

    bootstrap: str
    input_topic: str
    output_topic: str
    mode: str
    instance: int
    incarnation: int
    instances: int
    group_id: str
    transactional_id: str
    state_dir: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> JobConfig:
        try:
            config = cls(
                bootstrap=env[instance_env.BOOTSTRAP_SERVERS],
                input_topic=env[instance_env.INPUT_TOPIC],
                output_topic=env[instance_env.OUTPUT_TOPIC],
                mode=env[instance_env.MODE],
                instance=int(env.get(instance_env.INSTANCE, "0")),
                incarnation=int(env.get(instance_env.INCARNATION, "0")),
                instances=int(env.get(instance_env.INSTANCES, "1")),
                group_id=env.get(instance_env.GROUP_ID, "eoschaos-spark"),
                transactional_id=env.get(instance_env.TRANSACTIONAL_ID, ""),
                state_dir=Path(env[instance_env.STATE_DIR]),
            )
        except KeyError as exc:
            raise UsageError(f"environment variable {exc.args[0]} is not set") from None
        if config.mode not in MODES:
            raise UsageError(f"unknown mode {config.mode!r}; expected one of {', '.join(MODES)}")
        if config.instances != 1:
            # Every driver reads every input partition: a second one would duplicate all output.
            raise UsageError(f"a Spark pipeline is one driver; got {config.instances} instances")
        if config.mode == "eos" and not config.transactional_id:
            raise UsageError("mode eos needs EOSCHAOS_TRANSACTIONAL_ID")
        return config

    @property
    def checkpoint(self) -> Path:
        return self.state_dir / "checkpoint"

    @property
    def marker_topic(self) -> str:
        return self.output_topic + MARKER_TOPIC_SUFFIX


def leave_sigterm_to_python(state_dir: Path) -> None:
    """Make the driver JVM ignore SIGTERM, which the harness sends to the whole process group.

    A JVM that gets SIGTERM runs its shutdown hooks and stops Spark under the running query,
    so a graceful stop would look like a crash. HotSpot leaves SIGTERM alone when it starts
    with the signal ignored, and an ignored signal survives exec: spark-submit sources
    spark-env.sh from SPARK_CONF_DIR before it execs the JVM, so one there ignores SIGTERM in
    the JVM only. kill -9 and SIGSTOP still reach the JVM with the group.
    """
    conf = state_dir / "spark-conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-env.sh").write_text(SPARK_ENV_SH)
    os.environ["SPARK_CONF_DIR"] = str(conf)


def spark_session(config: JobConfig) -> SparkSession:
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    leave_sigterm_to_python(config.state_dir)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(f"eoschaos-spark-{config.mode}-{config.instance}.{config.incarnation}")
        .config("spark.jars", ",".join(str(jar) for jar in connector_jars()))
        .config("spark.local.dir", str(config.state_dir / "spark-local"))
    )
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def processed(spark: SparkSession, config: JobConfig) -> DataFrame:
    """The input stream mapped 1:1: same key, same partition, value "processed-<value>"."""
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("subscribe", config.input_topic)
        .option("kafka.isolation.level", "read_committed")
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")
        .option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
        .option("groupIdPrefix", config.group_id)
        .load()
    )
    return source.select(
        col("key"),
        concat(lit("processed-"), col("value").cast("string")).alias("value"),
        col("partition"),
    )


class TransactionalBatchWriter:
    """Mode eos: each micro-batch is written in one Kafka transaction, at most once.

    Spark re-runs a micro-batch when the driver died after running it but before recording it
    in the checkpoint's commit log; the re-run has the same batch id and the same input
    offsets (from the offset log written before the batch ran). So the batch id names the
    batch's output. Every transaction writes, next to the batch's records, a marker
    {batch id} to the marker topic, and commits both or neither: a committed marker N proves
    batch N's output committed. Batches run one after another, so the last committed marker
    is the only one that matters; a batch whose id is not above it is skipped.

    The marker is read only after init_transactions, because until then it may still change:
    a previous incarnation killed mid-commit can leave a transaction with marker N open, and
    its coordinator could still complete it. A read_committed reader would not see N yet (it
    stops before open transactions), the batch would be written again, and then both copies
    would commit. init_transactions with the same transactional.id fences the old producer and
    returns only once its open transaction is finished (aborted, or committed if the commit
    was already decided); after that the marker topic holds the final word.
    """

    def __init__(self, config: JobConfig) -> None:
        self._config = config
        self._producer = Producer(
            {
                "bootstrap.servers": config.bootstrap,
                "transactional.id": config.transactional_id,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                "linger.ms": 5,
                "log_level": 4,
            }
        )
        self._producer.init_transactions(OPERATION_TIMEOUT_S)
        self._last_committed = last_committed_marker(config)
        print(f"eos: last committed batch {self._last_committed}", flush=True)

    def write(self, batch: DataFrame, batch_id: int) -> None:
        if batch_id <= self._last_committed:
            print(f"batch {batch_id}: skipped (already committed)", flush=True)
            return
        rows = batch.collect()
        while True:
            try:
                self._transaction(rows, batch_id)
                break
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if not error.txn_requires_abort():
                    raise  # fenced or fatal: the query fails and this driver exits
                print(f"batch {batch_id}: aborting after {error}; retrying", flush=True)
                self._producer.abort_transaction(OPERATION_TIMEOUT_S)
        self._last_committed = batch_id
        print(f"batch {batch_id}: {len(rows)} rows written", flush=True)

    def _transaction(self, rows: list[Any], batch_id: int) -> None:
        producer = self._producer
        producer.begin_transaction()
        for row in rows:
            self._produce(self._config.output_topic, row["key"], row["value"], row["partition"])
        marker = str(batch_id).encode()
        self._produce(self._config.marker_topic, self._config.transactional_id.encode(), marker, 0)
        while True:
            try:
                producer.commit_transaction(OPERATION_TIMEOUT_S)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                print(f"batch {batch_id}: commit retried after {exc.args[0]}", flush=True)

    def _produce(self, topic: str, key: bytes, value: str | bytes, partition: int) -> None:
        while True:
            try:
                self._producer.produce(topic, key=key, value=value, partition=partition)
                return
            except BufferError:  # local queue full: wait for deliveries, then retry
                self._producer.poll(0.1)


def ensure_marker_topic(config: JobConfig) -> None:
    """Create the marker topic if missing: one partition, replicated like the others."""
    admin = admin_client(config.bootstrap)
    brokers = len(admin.list_topics(timeout=30).brokers)
    topic = NewTopic(config.marker_topic, num_partitions=1, replication_factor=min(3, brokers))
    create_topics(admin, [topic], timeout=MARKER_READ_TIMEOUT_S)


def last_committed_marker(config: JobConfig) -> int:
    """The highest batch id this transactional.id committed a marker for; -1 if none."""
    consumer = Consumer(
        {
            "bootstrap.servers": config.bootstrap,
            "group.id": f"{config.group_id}-markers",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        partition = TopicPartition(config.marker_topic, 0)
        deadline = time.monotonic() + MARKER_READ_TIMEOUT_S
        low, high = _watermarks(consumer, partition, deadline)
        last = -1
        if high <= low:
            return last
        consumer.assign([TopicPartition(config.marker_topic, 0, low)])
        key = config.transactional_id.encode()
        # The position passes the end only after the commit marker: control records advance it.
        while consumer.position([partition])[0].offset < high:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {config.marker_topic} took over a minute")
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None and message.key() == key:
                    last = max(last, int(message.value()))
        return last
    finally:
        consumer.close()


def _watermarks(consumer: Consumer, partition: TopicPartition, deadline: float) -> tuple[int, int]:
    """The partition's low and high watermarks, once its (maybe just created) topic is known.

    Right after creation, the broker asked may not know the topic yet.
    """
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=10)
        except KafkaException as exc:
            unknown = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)
            if exc.args[0].code() not in unknown or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class BatchPrinter(StreamingQueryListener):
    """Mode alos: one line per finished micro-batch (the Kafka sink reports nothing itself)."""

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        print(f"batch {progress.batchId}: {progress.numInputRows} rows written", flush=True)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def start_query(spark: SparkSession, config: JobConfig) -> StreamingQuery:
    writer = processed(spark, config).writeStream.option(
        "checkpointLocation", str(config.checkpoint)
    )
    writer = writer.trigger(processingTime=TRIGGER_INTERVAL)
    if config.mode == "alos":
        spark.streams.addListener(BatchPrinter())
        writer = (
            writer.format("kafka")
            .option("kafka.bootstrap.servers", config.bootstrap)
            .option("topic", config.output_topic)
        )
    else:
        ensure_marker_topic(config)
        writer = writer.foreachBatch(TransactionalBatchWriter(config).write)
    return writer.start()


def run(config: JobConfig, stop: threading.Event) -> None:
    started = time.monotonic()
    config.state_dir.mkdir(parents=True, exist_ok=True)
    spark = spark_session(config)
    query = start_query(spark, config)
    print(
        f"{RUNNING_LINE} mode={config.mode} incarnation={config.incarnation} "
        f"checkpoint={config.checkpoint} after {time.monotonic() - started:.1f}s",
        flush=True,
    )
    while query.isActive and not stop.wait(POLL_INTERVAL_S):
        pass
    if stop.is_set():
        stopping = time.monotonic()
        query.stop()
        spark.stop()
        print(f"spark-job: stopped in {time.monotonic() - stopping:.1f}s", flush=True)
        return
    raise RuntimeError(f"the streaming query ended: {query.exception()}")


def main() -> int:
    try:
        config = JobConfig.from_env(os.environ)
    except UsageError as exc:
        print(f"spark-job: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    exit_when_orphaned()  # the JVM follows: PySpark's gateway exits when its stdin closes
    run(config, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
