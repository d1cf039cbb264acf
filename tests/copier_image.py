"""Kafka's own transactional copier as a user's pipeline image: the Kafka image `eoschaos
images build` makes, one container per instance, the instances sharing the input's partitions
as one consumer group. The image has no shell: eoschaos puts the contract's variables into the
arguments (workloads.harness.containers).

Group mode, because in its manual-assignment mode the copier reads its position before
`initTransactions`: a twin that shares its transactional.id can then copy a transaction the other
committed in between again (docs/findings.md). `--input-partition` is required but unused."""

from __future__ import annotations

from eoschaos.clusters import kafka_dist
from eoschaos.clusters.container_runtime import Runtime
from eoschaos.clusters.images import build_image, image_tag

IMAGE = image_tag(kafka_dist.DEFAULT_KAFKA_VERSION)
COMMAND = (
    "java -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp /opt/kafka/libs/* "
    "org.apache.kafka.tools.TransactionalMessageCopier "
    "--broker-list $EOSCHAOS_BOOTSTRAP_SERVERS --input-topic $EOSCHAOS_INPUT_TOPIC "
    "--input-partition $EOSCHAOS_INSTANCE --output-topic $EOSCHAOS_OUTPUT_TOPIC "
    "--consumer-group $EOSCHAOS_GROUP_ID --transactional-id $EOSCHAOS_TRANSACTIONAL_ID "
    "--transaction-size 100 --transaction-timeout 10000 --group-mode --use-group-metadata"
)
OPTIONS = {"workload": "byo", "pipeline_image": IMAGE, "command": COMMAND}
RUN_ARGS = ["--workload", "byo", "--pipeline-image", IMAGE, "--command", COMMAND]
RUN_ARGS += ["--partitions", "3", "--instances", "3"]


def built(runtime: Runtime) -> str:
    """The image, built if the runtime lacks it or it is out of date (seconds)."""
    dist = kafka_dist.resolve(kafka_dist.DEFAULT_KAFKA_VERSION)
    tag = build_image(dist, lambda _message: None, runtime)
    assert tag == IMAGE
    return tag
