"""Questions asked of a running cluster: health, readiness, and who leads or coordinates what.

Metadata comes through the client proxies with confluent-kafka. What librdkafka cannot ask —
the active KRaft controller (Metadata answers with a random broker there) and the finalized
feature levels — comes from Kafka's own admin tools on the same classpath as the brokers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.history import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from eoschaos.contract.host import java_binary

READINESS_TOPIC = "eoschaos-readiness"
METADATA_LOG_DIR = "__cluster_metadata-0"  # a KRaft node's copy of the metadata log
T = TypeVar("T")
ATTEMPT_TIMEOUT_S = 10.0  # one CreateTopics attempt; a dead controller costs at most this
HEALTH_FIRST_ATTEMPT_S = 0.5  # a metadata request while waiting for health; doubled on timeout
HEALTH_LONGEST_ATTEMPT_S = 5.0


class ClusterNotReady(EoschaosError, RuntimeError):
    """The cluster did not reach the awaited state in time; the message says what was missing.
    An EoschaosError: the CLI shows it as one line (exit 2), after everything was stopped."""


@dataclass(frozen=True)
class Health:
    brokers: frozenset[int]
    under_replicated: tuple[tuple[str, int], ...]
    offline: tuple[tuple[str, int], ...]
    topics: frozenset[str]

    def healthy(self, expected_brokers: set[int]) -> bool:
        return self.brokers == expected_brokers and not self.under_replicated and not self.offline

    def describe(self, expected_brokers: set[int]) -> str:
        missing = sorted(expected_brokers - self.brokers)
        return (
            f"brokers missing {missing}, {len(self.under_replicated)} under-replicated and "
            f"{len(self.offline)} offline partitions"
        )


# librdkafka logs every refused connection at level 6; while brokers start that is hundreds
# of lines. Probes only need errors, and they raise those anyway.
QUIET = {"log_level": 3}


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 3000, **QUIET}
    )


def health(admin: AdminClient, timeout: float = 5.0) -> Health:
    metadata = admin.list_topics(timeout=timeout)
    urps, offline = [], []
    for name, topic in metadata.topics.items():
        for pid, part in topic.partitions.items():
            if part.leader < 0:
                offline.append((name, pid))
            elif len(part.isrs) < len(part.replicas):
                urps.append((name, pid))
    return Health(
        brokers=frozenset(metadata.brokers),
        under_replicated=tuple(sorted(urps)),
        offline=tuple(sorted(offline)),
        topics=frozenset(metadata.topics),
    )


def wait_healthy(
    bootstrap: str,
    expected_brokers: set[int],
    timeout: float,
    progress: Callable[[str], None] | None = None,
) -> Health:
    """Wait until every expected broker is registered and no partition is under-replicated.

    A metadata request to a node that is not listening yet waits out its whole timeout, so
    each attempt starts short and only an attempt that timed out gets a longer next one: a
    start is seen within a fraction of a second of the last registration, and a loaded
    machine still gets its answer."""
    admin = admin_client(bootstrap)
    deadline = time.monotonic() + timeout
    last: Health | None = None
    last_report = 0.0
    attempt = HEALTH_FIRST_ATTEMPT_S
    while time.monotonic() < deadline:
        try:
            last = health(admin, timeout=min(attempt, max(0.5, deadline - time.monotonic())))
        except KafkaException:
            last = None
            attempt = min(2 * attempt, HEALTH_LONGEST_ATTEMPT_S)
        if last is not None and last.healthy(expected_brokers):
            return last
        if progress and time.monotonic() - last_report > 5:
            progress("waiting: " + (last.describe(expected_brokers) if last else "no metadata"))
            last_report = time.monotonic()
        time.sleep(0.2)
    state = last.describe(expected_brokers) if last else "no metadata answer"
    raise ClusterNotReady(f"cluster not healthy after {timeout:.0f}s: {state}")


def _poll(attempt: Callable[[], T | None], timeout: float, interval: float, failure: str) -> T:
    """Call `attempt` until it returns a value; a KafkaException counts as "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = attempt()
            if result is not None:
                return result
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            raise ClusterNotReady(f"{failure} after {timeout:.0f}s")
        time.sleep(interval)


def wait_answers_for_itself(endpoint: str, node_id: int, timeout: float) -> None:
    """Wait until the node behind `endpoint` serves metadata that lists itself.

    Right after a kill -9, cluster metadata still shows the dead broker and full ISRs until its
    session times out, so "all brokers registered" from the cluster's view proves nothing about
    a restarted node. A node answers on its client listener only once it has re-registered and
    caught up with the metadata log.
    """
    client = admin_client(endpoint)
    _poll(
        lambda: True if node_id in client.list_topics(timeout=2).brokers else None,
        timeout,
        0.1,
        f"node {node_id} does not answer at {endpoint}",
    )


def create_topics(admin: AdminClient, topics: list[NewTopic], timeout: float) -> None:
    """Create `topics`, retrying until `timeout`; a topic that already exists counts as created.

    librdkafka drops its bootstrap broker handles once it has learned the real brokers, and a
    request in flight on one fails with _DESTROY_BROKER; right after cluster start a broker may
    also still be loading. Neither says anything about the request, so both are retried.

    librdkafka sends CreateTopics to the controller named by the last metadata it got, and
    keeps waiting for that broker while it is dead: right after a kill, the cluster still names
    the killed broker until its session times out. So an attempt is bounded by
    `ATTEMPT_TIMEOUT_S`, and a timed-out one refreshes the metadata before the next.
    """
    deadline = time.monotonic() + timeout
    pending = list(topics)
    while pending:
        attempt = max(1.0, min(ATTEMPT_TIMEOUT_S, deadline - time.monotonic()))
        futures = admin.create_topics(pending, request_timeout=attempt)
        failed: list[NewTopic] = []
        for topic in pending:
            try:
                # librdkafka ends the request at `attempt`; the margin lets its answer arrive.
                futures[topic.topic].result(attempt + 5)
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if not _transient(error):
                    raise
                failed.append(topic)
            except concurrent.futures.TimeoutError:
                failed.append(topic)
        pending = failed
        if pending and time.monotonic() > deadline:
            names = ", ".join(t.topic for t in pending)
            raise ClusterNotReady(f"topics {names} not created after {timeout:.0f}s")
        if pending:
            _refresh_metadata(admin)
            time.sleep(0.5)


def _refresh_metadata(admin: AdminClient) -> None:
    """Ask for fresh metadata, which names the current controller; failing is fine here."""
    with contextlib.suppress(KafkaException):
        admin.list_topics(timeout=5)


def _transient(error: KafkaError) -> bool:
    return error.retriable() or error.code() in (
        KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_CONTROLLER,
    )


def probe_internal_topics(bootstrap: str, replication_factor: int, timeout: float) -> None:
    """Make `__transaction_state` and `__consumer_offsets` exist and prove both usable.

    Runs one committed transaction and one group offset commit; the brokers create each
    internal topic on first use.
    """
    create_topics(
        admin_client(bootstrap),
        [NewTopic(READINESS_TOPIC, num_partitions=1, replication_factor=replication_factor)],
        timeout,
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "eoschaos-readiness",
            "transaction.timeout.ms": 60000,
            "log_level": 0,  # "Coordinator load in progress: retrying" is expected here
        }
    )
    producer.init_transactions(timeout)
    producer.begin_transaction()
    producer.produce(READINESS_TOPIC, value=b"ready")
    producer.commit_transaction(timeout)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eoschaos-readiness",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(READINESS_TOPIC, 0, 1)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def partition_leader(bootstrap: str, topic: str, partition: int, timeout: float = 15.0) -> int:
    """The leader's node id; waits out the moment after creation when metadata has none."""
    client = admin_client(bootstrap)

    def leader() -> int | None:
        described = client.list_topics(topic=topic, timeout=5).topics.get(topic)
        part = described.partitions.get(partition) if described else None
        return part.leader if part is not None and part.leader >= 0 else None

    return _poll(leader, timeout, 0.2, f"{topic}/{partition} has no leader")


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


def coordinator_partition(key: str, partitions: int) -> int:
    """The internal-topic partition Kafka assigns a transactional.id or group id to.

    Kafka uses Utils.abs(key.hashCode()) % partitions, where Utils.abs maps MIN_VALUE to 0.
    """
    value = java_string_hash(key)
    return (0 if value == -(1 << 31) else abs(value)) % partitions


def _coordinator(bootstrap: str, internal_topic: str, key: str) -> int:
    metadata = admin_client(bootstrap).list_topics(topic=internal_topic, timeout=10)
    topic = metadata.topics.get(internal_topic)
    if topic is None or not topic.partitions or topic.error is not None:
        raise ClusterNotReady(f"{internal_topic} does not exist yet")
    return partition_leader(
        bootstrap, internal_topic, coordinator_partition(key, len(topic.partitions))
    )


def transaction_coordinator(bootstrap: str, transactional_id: str) -> int:
    return _coordinator(bootstrap, TRANSACTION_STATE_TOPIC, transactional_id)


def group_coordinator(bootstrap: str, group_id: str) -> int:
    return _coordinator(bootstrap, CONSUMER_OFFSETS_TOPIC, group_id)


def run_tool(dist: KafkaDistribution, main_class: str, args: list[str], timeout: float = 60) -> str:
    """Run one of Kafka's command-line tools and return its stdout."""
    cmd = [
        java_binary(),
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        *dist.logging_args(Path("/tmp"), tool=True),
        "-cp",
        dist.classpath,
        main_class,
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{main_class} {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def finalized_features(dist: KafkaDistribution, bootstrap: str) -> dict[str, str]:
    """Finalized feature levels, e.g. {'metadata.version': '4.3-IV0', 'transaction.version': '2'}.

    A feature the cluster does not finalize (transaction.version before 3.9) reads as '0'.
    """
    out = run_tool(
        dist, "org.apache.kafka.tools.FeatureCommand", ["--bootstrap-server", bootstrap, "describe"]
    )
    features = {
        m.group(1): m.group(2)
        for m in re.finditer(r"Feature:\s*(\S+).*?FinalizedVersionLevel:\s*(\S+)", out)
    }
    features.setdefault("transaction.version", "0")
    return features


def active_controller(dist: KafkaDistribution, bootstrap: str) -> int:
    """The node id of the active KRaft controller (the Raft leader)."""
    out = run_tool(
        dist,
        "org.apache.kafka.tools.MetadataQuorumCommand",
        ["--bootstrap-server", bootstrap, "describe", "--status"],
    )
    match = re.search(r"LeaderId:\s*(\d+)", out)
    if not match:
        raise ClusterNotReady(f"no quorum leader in: {out.strip()[:200]}")
    return int(match.group(1))
