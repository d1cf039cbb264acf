"""A real 3-broker KRaft cluster behind Toxiproxy: it runs transactions, survives and heals faults.

Every test runs against each Kafka version in cluster_versions.KAFKA_VERSIONS (in CI, a test of
Toxiproxy, of process signals or of a broker's kill and restart on the first only; nightly on
every one) and leaves the cluster healthy for the next one. Transactions and isolation run on
every version in CI: that is where the versions differ (transaction protocol 1 or 2).
"""

from __future__ import annotations

import json
import re
import statistics
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from cluster_versions import OTHER_VERSIONS_NIGHTLY
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from listening import listening_addresses, not_on_loopback

from eoschaos.clusters import admin, processes
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.contract.rundir import CLUSTER_FILE
from eoschaos.workloads.smoke import create_topic, read_all, run_smoke

pytestmark = pytest.mark.cluster


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce_acks_all(bootstrap: str, topic: str, count: int) -> list[str]:
    """Produce `count` records with acks=all + idempotence; return the delivery errors."""
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 30000,
            "log_level": 3,
        }
    )
    for i in range(count):
        producer.produce(
            topic,
            value=str(i).encode(),
            on_delivery=lambda err, _m: err and errors.append(str(err)),
        )
    remaining = producer.flush(40)
    return errors + ["undelivered"] * remaining


def _reachable(bootstrap: str, timeout: float = 3.0) -> bool:
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        client.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False


def _topic_led_by(cluster: ProcessCluster, node_id: int) -> str:
    """A one-partition topic whose leader (first replica) is `node_id`."""
    topic = _topic("led")
    others = [n for n in cluster.spec.node_ids if n != node_id]
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assignment = [[node_id, *others]]
    client.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=assignment)])[
        topic
    ].result(30)
    deadline = time.monotonic() + 30
    while cluster.partition_leader(topic, 0) != node_id and time.monotonic() < deadline:
        time.sleep(0.2)
    return topic


def test_cluster_starts_three_registered_brokers_and_records_its_versions(cluster):
    info = json.loads((cluster.run_dir / CLUSTER_FILE).read_text())
    health = admin.health(admin.admin_client(cluster.bootstrap))
    assert health.brokers == {1, 2, 3}
    assert not health.under_replicated
    assert {"__consumer_offsets", "__transaction_state"} <= health.topics
    assert info["broker_ids"] == [1, 2, 3]
    assert info["kafka_version"] == cluster.dist.version
    assert info["metadata_version"].startswith(cluster.dist.version.rsplit(".", 1)[0])
    expected_tv = "2" if cluster.dist.major >= 4 else "0"
    assert info["transaction_version"] == expected_tv


def test_every_process_of_the_cluster_listens_on_loopback_only(cluster):
    pids = [process.pid for process in processes.still_alive(cluster.run_dir / "pids")]
    listening = listening_addresses(pids)
    assert len(listening) >= 4, "three brokers and Toxiproxy listen: they must be seen"
    assert not_on_loopback(pids) == {}


def test_clients_reach_brokers_only_through_their_proxies(cluster):
    metadata = admin.admin_client(cluster.bootstrap).list_topics(timeout=10)
    advertised = {f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    assert advertised == {cluster.client_address(n) for n in cluster.spec.node_ids}
    names = set(cluster.toxiproxy.proxies())
    links = ["client", "internal", *(f"controller-from-{n}" for n in (1, 2, 3))]
    links += [f"lane{n}" for n in range(cluster.spec.instance_lanes)]
    assert names == {f"node-{n}-{link}" for n in (1, 2, 3) for link in links}


def test_read_committed_consumer_sees_committed_records_and_none_aborted(cluster):
    topic = _topic("smoke")
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    result = run_smoke(cluster.bootstrap, topic)
    assert sorted(result.read_committed) == sorted(result.committed)
    assert not set(result.read_committed) & set(result.aborted)


def test_a_reader_that_saw_aborted_records_fails_the_isolation_check(cluster):
    topic = _topic("uncommitted")
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    result = run_smoke(cluster.bootstrap, topic)
    dirty = read_all(cluster.bootstrap, topic, "read_uncommitted", 10, timeout=30)
    assert set(result.aborted) <= set(dirty)  # the aborted records really are in the log
    assert result.isolation_holds
    assert not replace(result, read_committed=dirty).isolation_holds


@OTHER_VERSIONS_NIGHTLY
def test_wait_healthy_refuses_a_cluster_whose_killed_broker_is_still_in_metadata(cluster):
    cluster.kill_node(3)
    with pytest.raises(admin.ClusterNotReady, match="node 3 does not answer"):
        cluster.wait_healthy(timeout=3)


def test_with_one_broker_killed_acks_all_writes_and_transactions_succeed(cluster):
    topic = _topic("degraded")
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    cluster.kill_node(cluster.partition_leader(topic, 0))
    assert _produce_acks_all(cluster.bootstrap, topic, 200) == []
    smoke_topic = _topic("degraded-txn")
    create_topic(cluster.bootstrap, smoke_topic, partitions=3, replication=3)
    assert run_smoke(cluster.bootstrap, smoke_topic).isolation_holds


@OTHER_VERSIONS_NIGHTLY
def test_a_topic_is_created_while_the_controller_the_admin_client_knows_is_dead(cluster):
    client = admin.admin_client(cluster.bootstrap)
    known_controller = client.list_topics(timeout=10).controller_id
    cluster.kill_node(known_controller)
    topic = _topic("after-controller-kill")
    admin.create_topics(client, [NewTopic(topic, num_partitions=1, replication_factor=3)], 40)
    assert _produce_acks_all(cluster.bootstrap, topic, 10) == []


@OTHER_VERSIONS_NIGHTLY
def test_killed_broker_restarts_on_its_data_and_rejoins_without_under_replication(cluster):
    topic = _topic("rejoin")
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    victim = cluster.partition_leader(topic, 0)
    old_pid = cluster.node_pid(victim)
    cluster.kill_node(victim)
    assert _produce_acks_all(cluster.bootstrap, topic, 100) == []
    assert not cluster.node_alive(victim)
    cluster.start_node(victim)
    health = cluster.wait_healthy(timeout=120)
    assert victim in health.brokers and not health.under_replicated
    assert cluster.node_pid(victim) not in (None, old_pid)
    assert any((cluster.node_dir(victim) / "data").glob(f"{topic}-*"))


def test_clean_stop_exits_on_sigterm_and_the_node_restarts(cluster):
    assert cluster.stop_node(2, timeout=30) is True
    assert not cluster.node_alive(2)
    cluster.start_node(2)
    assert 2 in cluster.wait_healthy(timeout=120).brokers


@OTHER_VERSIONS_NIGHTLY
def test_disabling_a_client_proxy_cuts_clients_off_and_enabling_restores(cluster):
    only_node_2 = cluster.client_address(2)
    assert _reachable(only_node_2)
    cluster.set_link_enabled(2, "client", False)
    assert not _reachable(only_node_2)
    cluster.set_link_enabled(2, "client", True)
    assert _reachable(only_node_2, timeout=10)


@OTHER_VERSIONS_NIGHTLY
def test_paused_broker_stops_answering_and_answers_again_after_resume(cluster):
    only_node_3 = cluster.client_address(3)
    cluster.pause_node(3)
    try:
        assert not _reachable(only_node_3)
    finally:
        cluster.resume_node(3)
    assert _reachable(only_node_3, timeout=15)


def _produce_round_trips(bootstrap: str, topic: str, count: int) -> list[float]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 3}
    )
    producer.produce(topic, value=b"warm-up")
    producer.flush(30)
    samples = []
    for i in range(count):
        started = time.monotonic()
        producer.produce(topic, value=str(i).encode())
        assert producer.flush(30) == 0
        samples.append(time.monotonic() - started)
    return samples


@OTHER_VERSIONS_NIGHTLY
def test_downstream_latency_toxic_raises_produce_round_trip_by_the_delay(cluster):
    delay_ms = 400
    topic = _topic_led_by(cluster, 1)
    before = _produce_round_trips(cluster.bootstrap, topic, 10)
    name = cluster.add_toxic(
        1, "client", "latency", stream="downstream", attributes={"latency": delay_ms, "jitter": 0}
    )
    try:
        after = _produce_round_trips(cluster.bootstrap, topic, 5)
    finally:
        cluster.remove_toxic(1, "client", name)
    # Each delayed round trip is the broker's time plus the delay: none may be shorter than
    # the delay. The medians differ by the delay give or take the broker's own jitter.
    assert min(after) >= delay_ms / 1000
    assert statistics.median(after) - statistics.median(before) >= 0.95 * delay_ms / 1000
    assert max(before) < delay_ms / 1000


def test_partition_leader_is_the_first_replica_of_an_explicit_assignment(cluster):
    assert cluster.partition_leader(_topic_led_by(cluster, 3), 0) == 3


def test_transaction_coordinator_matches_kafkas_own_transactions_tool(cluster):
    transactional_id = f"coord-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": transactional_id,
            "log_level": 3,
        }
    )
    producer.init_transactions(30)
    out = admin.run_tool(
        cluster.dist,
        "org.apache.kafka.tools.TransactionsCommand",
        [
            "--bootstrap-server",
            cluster.bootstrap,
            "describe",
            "--transactional-id",
            transactional_id,
        ],
    )
    header, row = (line.split() for line in out.strip().splitlines()[:2])
    reported = int(row[header.index("CoordinatorId")])
    assert cluster.transaction_coordinator(transactional_id) == reported


def test_group_coordinator_matches_the_one_the_group_reports(cluster):
    group = f"group-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "log_level": 3})
    consumer.subscribe([admin.READINESS_TOPIC])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        described = client.describe_consumer_groups([group])[group].result(30)
    finally:
        consumer.close()
    assert cluster.group_coordinator(group) == described.coordinator.id


@OTHER_VERSIONS_NIGHTLY
def test_active_controller_is_a_voter_and_moves_when_killed(cluster):
    leader = cluster.active_controller()
    assert leader in cluster.spec.voter_ids
    cluster.kill_node(leader)
    deadline = time.monotonic() + 30
    new_leader = leader
    while new_leader == leader and time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            new_leader = cluster.active_controller()
        except (RuntimeError, admin.ClusterNotReady):
            continue
    assert new_leader != leader and new_leader in cluster.spec.voter_ids


@OTHER_VERSIONS_NIGHTLY
def test_broker_logs_and_data_stay_in_the_run_dir(cluster):
    for node_id in cluster.spec.node_ids:
        log = cluster.node_dir(node_id) / "logs" / "server.log"
        assert re.search(r"Kafka Server started|started \(kafka.server", log.read_text())
        assert (cluster.node_dir(node_id) / "data" / "meta.properties").exists()
    assert Path(cluster.run_dir / "toxiproxy.log").exists()
