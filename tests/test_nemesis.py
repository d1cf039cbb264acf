"""Each broker fault of the nemesis observably takes effect on a real cluster, and heals.

Faults are started and healed through the Nemesis itself (as in a run), aimed at topics and a
transactional.id these tests create. Instance faults (crash, zombie, twin) need a workload and
are covered by the scenarios in test_scenarios.py. A fault whose effect Kafka's version does
not change (a toxic, a cut, a pause) and the nemesis' own bookkeeping are tested on the first
Kafka version in CI and on the others nightly (conftest.OTHER_VERSIONS_NIGHTLY), and so are the
faults on Kafka's own machinery (coordinator kills, bounces, restarts, cuts of a broker) but one: a
split of the active controller, the quorum's hand-over, runs on every version in CI. The other
versions differ from the first in their transaction protocol, which the transactional tests meet
on every version.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_versions import KAFKA_VERSIONS, OTHER_VERSIONS_NIGHTLY
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from quorum import new_leader_of, until
from test_cluster import _produce_acks_all, _topic_led_by

from eoschaos.chaos.catalogue import CATALOGUE
from eoschaos.chaos.schedule import FaultEvent
from eoschaos.clusters import admin
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.contract.history import HistoryWriter, instance_name

pytestmark = pytest.mark.cluster


@dataclass
class Aim:
    """What a broker fault can be aimed at: the topics, group and transactional.id."""

    input_topic: str
    output_topic: str = "unused-output"
    group: str = "nemesis-test-group"
    instance_count: int = 0
    txn_id: str = "nemesis-test-txn"

    def transactional_id(self, _instance: int) -> str:
        return self.txn_id

    # No instance processes here: nothing to freeze while an isolate-instance cut installs.
    def pause_instance(self, _instance: int) -> None:
        pass

    def resume_instance(self, _instance: int) -> None:
        pass


def _event(fault: str, target: str, **params) -> FaultEvent:
    spec = CATALOGUE[fault]
    return FaultEvent(0.0, fault, target, spec.duration, {**spec.params, **params})


def _in_a_transaction(
    cluster: ProcessCluster, aim: Aim, value: bytes, config: dict | None = None
) -> Producer:
    """Instance 0's transactional producer, on its own lane, with `value` produced in an
    open transaction."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.instance_bootstrap(0),
            "transactional.id": aim.txn_id,
            "log_level": 0,
            **(config or {}),
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(aim.input_topic, value=value)
    producer.flush(30)
    return producer


def _fault_history(tmp_path: Path) -> list[dict]:
    lines = (tmp_path / "history" / "nemesis.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _answers(address: str, timeout: float = 3.0) -> bool:
    """Does a broker answer an ApiVersions request at `address` within `timeout`?

    Raw bytes on purpose: a librdkafka client torn down while its broker hangs can leave a
    stray Python exception behind, which then surfaces in an unrelated call."""
    host, port = address.rsplit(":", 1)
    request = struct.pack(">hhih", 18, 0, 7, -1)  # ApiVersions v0, correlation id 7, no client
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(request)) + request)
            header = sock.recv(8)
    except OSError:
        return False
    return len(header) == 8 and struct.unpack(">ii", header)[1] == 7


def _produce_within(bootstrap: str, topic: str, timeout_s: float) -> bool:
    """One acks=all record to `topic`, delivered within `timeout_s`?"""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "message.timeout.ms": int(timeout_s * 1000),
            "log_level": 0,
        }
    )
    errors: list[object] = []
    producer.produce(topic, value=b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(timeout_s + 5)
    # `is None`, not `== [None]`: KafkaError.__eq__(None) leaves a stray TypeError behind
    return len(errors) == 1 and errors[0] is None


def _read_seconds(bootstrap: str, topic: str, count: int) -> float:
    """Time for a fresh consumer to read `count` records of partition 0 from the start."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 65536,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    started, seen = time.monotonic(), 0
    try:
        while seen < count and time.monotonic() - started < 60:
            seen += len(consumer.consume(count - seen, timeout=0.1))
    finally:
        consumer.close()
    assert seen >= count
    return time.monotonic() - started


def _fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 3})
    for _ in range(records):
        producer.produce(topic, value=b"v" * size)
    assert producer.flush(60) == 0


@OTHER_VERSIONS_NIGHTLY
@pytest.mark.parametrize("mode", ["silent", "fail-fast"])
def test_partition_cuts_clients_off_the_broker_until_healed(cluster, nemesis, mode):
    topic = _topic_led_by(cluster, 2)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event("partition", "broker:2", mode=mode))
    assert active is not None
    assert not _answers(cluster.client_address(2), timeout=3)
    assert not _produce_within(cluster.bootstrap, topic, 3)
    assert _answers(cluster.client_address(1))  # the others still answer
    hurt.heal(active=active)
    assert _answers(cluster.client_address(2), timeout=10)
    assert _produce_within(cluster.bootstrap, topic, 60)


@OTHER_VERSIONS_NIGHTLY
def test_partition_cuts_the_broker_off_from_every_instance_lane_too(cluster, nemesis):
    hurt = nemesis(Aim(_topic_led_by(cluster, 2)))
    active = hurt.start(_event("partition", "broker:2"))
    assert active is not None
    lanes = [cluster.instance_bootstrap(n).split(",")[1] for n in (0, 1)]  # node 2's lane proxies
    assert not any(_answers(address, timeout=3) for address in lanes)
    hurt.heal(active=active)
    assert all(_answers(address, timeout=10) for address in lanes)


@OTHER_VERSIONS_NIGHTLY
@pytest.mark.parametrize("mode", ["silent", "fail-fast"])
def test_isolate_instance_cuts_only_that_instance_off_every_broker_until_healed(
    cluster, nemesis, mode
):
    topic = _topic_led_by(cluster, 1)
    hurt = nemesis(Aim(topic, instance_count=2))
    active = hurt.start(_event("isolate-instance", "instance:0", mode=mode))
    assert active is not None
    isolated, other = cluster.instance_bootstrap(0), cluster.instance_bootstrap(1)
    assert not any(_answers(address, timeout=3) for address in isolated.split(","))
    assert not _produce_within(isolated, topic, 3)
    assert _produce_within(other, topic, 30)  # the other instance still reaches the cluster
    assert _produce_within(cluster.bootstrap, topic, 30)  # and so do eoschaos's own clients
    hurt.heal(active=active)
    assert _produce_within(isolated, topic, 60)


@OTHER_VERSIONS_NIGHTLY
def test_delay_endtxn_holds_a_commit_caught_mid_transaction_until_healed(
    cluster, nemesis, tmp_path
):
    released_after_s = 3.0
    aim = Aim(_topic_led_by(cluster, 1), instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    producer = _in_a_transaction(cluster, aim, b"x")
    hurt = nemesis(aim)
    # This test is instance 0: it records its produced batch as a kip447 processor does, and
    # that is the moment the fault is aimed at.
    with HistoryWriter(tmp_path, instance_name(0, 0), flush_each=True) as history:
        history.record("txn", "ok", "init")
        threading.Timer(0.5, history.record, args=("txn", "ok", "produce")).start()
        event = _event("delay-endtxn", "instance:0", hold_ms=60_000)  # far past the heal
        active = hurt.start(event)
    assert active is not None
    threading.Timer(released_after_s, hurt.heal, kwargs={"active": active}).start()
    started = time.monotonic()
    producer.commit_transaction(30)
    committed_after_s = time.monotonic() - started
    assert released_after_s - 0.5 <= committed_after_s < released_after_s + 5
    ok = next(e for e in _fault_history(tmp_path) if e["type"] == "ok")
    params = json.loads(ok["params"])
    assert params["coordinator"] == cluster.transaction_coordinator(aim.txn_id)
    assert (params["mid_transaction"], params["took_effect"]) == (True, True)
    assert params["held_s"] >= released_after_s - 0.5


@OTHER_VERSIONS_NIGHTLY
def test_isolate_instance_without_a_lane_for_it_is_a_failed_fault(cluster, nemesis, tmp_path):
    hurt = nemesis(Aim(_topic_led_by(cluster, 1), instance_count=3))
    assert hurt.start(_event("isolate-instance", "instance:2")) is None
    failed = [e for e in _fault_history(tmp_path) if e["type"] == "fail"]
    assert "no lane of its own" in failed[0]["error"]


@OTHER_VERSIONS_NIGHTLY
def test_isolate_peers_keeps_clients_but_stalls_acks_all_on_the_partitions_it_leads(
    cluster, nemesis
):
    topic = _topic_led_by(cluster, 2)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event("isolate-peers", "broker:2"))
    assert active is not None
    assert _answers(cluster.client_address(2))  # clients still reach it ...
    assert not _produce_within(cluster.bootstrap, topic, 3)  # ... but followers cannot fetch
    hurt.heal(active=active)
    assert _produce_within(cluster.bootstrap, topic, 60)


@OTHER_VERSIONS_NIGHTLY
def test_split_cuts_the_minority_broker_off_from_clients_and_peers(cluster, nemesis):
    topic = _topic_led_by(cluster, 3)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event("split", "broker:3"))
    assert active is not None
    assert not _answers(cluster.client_address(3), timeout=3)
    assert _answers(cluster.client_address(1)) and _answers(cluster.client_address(2))
    cut = [(3, "client"), (3, "internal"), (3, "controller-from-1"), (1, "controller-from-3")]
    assert all(cluster.toxiproxy.toxics(cluster.proxy_name(*link)) for link in cut)
    hurt.heal(active=active)
    assert _answers(cluster.client_address(3), timeout=10)
    assert _produce_within(cluster.bootstrap, topic, 60)


def _majority_address(cluster, minority: int) -> str:
    """Client addresses of every node but `minority`: asked there, the answer is the majority's
    view (the cut node still believes what it believed when it was cut)."""
    return ",".join(cluster.client_address(n) for n in cluster.spec.node_ids if n != minority)


@pytest.mark.parametrize(
    ("session_cluster", "fault"),
    [
        (KAFKA_VERSIONS[0], "split"),
        (KAFKA_VERSIONS[0], "isolate-peers"),
        *((version, "split") for version in KAFKA_VERSIONS[1:]),
        # the same Raft code path as split; the other versions' run of it is nightly
        *(pytest.param(v, "isolate-peers", marks=pytest.mark.chaos) for v in KAFKA_VERSIONS[1:]),
    ],
    indirect=["session_cluster"],
)
def test_cutting_off_the_active_controller_hands_the_quorum_and_its_partitions_to_the_majority(
    cluster, nemesis, fault, tmp_path
):
    """Aimed at the Raft leader, the cut holds its Raft traffic too (a controller listener per
    pair, each advertised at its pair's proxy): the majority elects a new controller and a new
    leader for the cut node's partitions, which takes writes, all within the fault; after the
    heal the node is back in every ISR."""
    controller = cluster.active_controller()
    topic = _topic_led_by(cluster, controller)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event(fault, "controller"))
    assert active is not None
    majority = _majority_address(cluster, controller)
    others = [n for n in cluster.spec.node_ids if n != controller]

    new_controller = until(lambda: new_leader_of(cluster, others, controller), 60)
    assert new_controller, f"the majority follows no new controller 60 s into the {fault}"
    moved = until(lambda: admin.partition_leader(majority, topic, 0) != controller, 60)
    assert moved, f"{controller} still leads {topic}-0 60 s into the {fault}"
    # a request in flight to the cut broker would hang until its 30 s request timeout, so the
    # producer starts now, not before the move
    assert _produce_within(majority, topic, 30)
    hurt.heal(active=active)
    health = cluster.wait_healthy(timeout=120)
    assert health.under_replicated == ()
    healed = _healed_params(tmp_path)
    assert healed["broker"] == controller and healed["controller_during"] == new_controller
    assert healed["moved"] is True and healed["took_effect"] is True


def _healed_params(tmp_path: Path) -> dict:
    """The params of the last healed fault: what it recorded it saw."""
    ok = [e for e in _fault_history(tmp_path) if e["type"] == "ok"]
    return json.loads(ok[-1]["params"])


@OTHER_VERSIONS_NIGHTLY
def test_a_kill_of_a_broker_already_down_records_that_it_took_no_effect(cluster, nemesis, tmp_path):
    cluster.kill_node(3)
    hurt = nemesis(Aim("none"))
    active = hurt.start(_event("kill", "broker:3"))
    assert active is not None
    hurt.heal(active=active)  # restarts it
    assert _healed_params(tmp_path) == {"broker": 3, "was_running": False, "took_effect": False}


@OTHER_VERSIONS_NIGHTLY
def test_a_toxic_records_how_many_client_links_it_hurt_and_who_led_the_aimed_partition(
    cluster, nemesis, tmp_path
):
    topic = _topic_led_by(cluster, 2)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event("latency", f"leader:{topic}/0"))
    assert active is not None
    hurt.heal(active=active)
    healed = _healed_params(tmp_path)
    assert healed["links_hurt"] == len(cluster.client_links()) == 3  # shared listener, 2 lanes
    assert (healed["leader_during"], healed["moved"], healed["took_effect"]) == (2, False, True)


@OTHER_VERSIONS_NIGHTLY
def test_pause_freezes_the_broker_until_healed(cluster, nemesis):
    hurt = nemesis(Aim("none"))
    active = hurt.start(_event("pause", "broker:1"))
    assert active is not None
    assert not _answers(cluster.client_address(1), timeout=3)
    hurt.heal(active=active)
    assert _answers(cluster.client_address(1), timeout=10)


@OTHER_VERSIONS_NIGHTLY
def test_kill_aimed_at_the_transaction_coordinator_moves_it(cluster, nemesis, tmp_path):
    aim = Aim("none", txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": aim.txn_id})
    producer.init_transactions(30)
    coordinator = cluster.transaction_coordinator(aim.txn_id)
    hurt = nemesis(aim)
    active = hurt.start(_event("kill", "coordinator"))
    assert active is not None
    assert not cluster.node_alive(coordinator)
    deadline = time.monotonic() + 60
    moved = coordinator
    while moved == coordinator and time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            moved = cluster.transaction_coordinator(aim.txn_id)
        except Exception:  # no coordinator while the partition's leadership moves
            continue
    assert moved != coordinator
    hurt.heal(active=active)
    assert cluster.node_alive(coordinator)
    invoke = next(e for e in _fault_history(tmp_path) if e["type"] == "invoke")
    assert json.loads(invoke["params"])["broker"] == coordinator


@OTHER_VERSIONS_NIGHTLY
def test_bounce_stops_the_broker_cleanly_and_starts_it_again(cluster, nemesis):
    before = cluster.node_pid(2)
    log = cluster.node_dir(2) / "logs" / "server.log"
    clean_stops = log.read_text().count("[BrokerServer id=2] shut down completed")
    hurt = nemesis(Aim("none"))
    active = hurt.start(_event("bounce", "broker:2"))
    assert active is not None
    assert not cluster.node_alive(2)
    assert log.read_text().count("[BrokerServer id=2] shut down completed") == clean_stops + 1
    hurt.heal(active=active)
    assert cluster.node_alive(2) and cluster.node_pid(2) != before
    assert _answers(cluster.client_address(2))


@OTHER_VERSIONS_NIGHTLY
def test_rolling_restart_replaces_every_broker_and_leaves_the_cluster_healthy(cluster, nemesis):
    before = {node: cluster.node_pid(node) for node in cluster.spec.node_ids}
    hurt = nemesis(Aim("none"))
    active = hurt.start(_event("rolling-restart", "all"))
    assert active is not None
    after = {node: cluster.node_pid(node) for node in cluster.spec.node_ids}
    assert all(after[node] not in (None, before[node]) for node in before)
    hurt.heal(active=active)
    assert not cluster.wait_healthy(timeout=60).under_replicated


@OTHER_VERSIONS_NIGHTLY
def test_latency_on_the_coordinator_link_delays_every_commit(cluster, nemesis):
    delay_ms = 400
    aim = Aim(_topic_led_by(cluster, 1), txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": aim.txn_id})
    producer.init_transactions(30)

    def commit_seconds() -> float:
        producer.begin_transaction()
        producer.produce(aim.input_topic, value=b"x")
        producer.flush(30)
        started = time.monotonic()
        producer.commit_transaction(30)
        return time.monotonic() - started

    commit_seconds()
    hurt = nemesis(aim)
    active = hurt.start(_event("latency", "coordinator", latency_ms=delay_ms, jitter_ms=0))
    assert active is not None
    delayed = [commit_seconds() for _ in range(3)]
    hurt.heal(active=active)
    assert min(delayed) >= delay_ms / 1000


@OTHER_VERSIONS_NIGHTLY
@pytest.mark.parametrize(
    ("fault", "params", "slower_by_s"),
    [
        ("bandwidth", {"rate": 64}, 2.5),  # 256 KB at 64 KB/s: 4 s
        # 1,024 slices of 256 B, each delayed 2 ms
        ("slicer", {"average_size": 256, "size_variation": 0, "delay_us": 2000}, 0.5),
    ],
)
def test_throttling_toxics_slow_reads_from_the_broker(cluster, nemesis, fault, params, slower_by_s):
    topic = _topic_led_by(cluster, 2)
    _fill(cluster.bootstrap, topic, records=256, size=1024)
    before = _read_seconds(cluster.bootstrap, topic, 256)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event(fault, "leader:input/0", **params))
    assert active is not None
    assert _read_seconds(cluster.bootstrap, topic, 256) >= before + slower_by_s
    hurt.heal(active=active)


@OTHER_VERSIONS_NIGHTLY
def test_reset_breaks_client_connections_to_the_broker_until_healed(cluster, nemesis):
    topic = _topic_led_by(cluster, 3)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event("reset", "broker:3", timeout_ms=0))
    assert active is not None
    assert not _answers(cluster.client_address(3), timeout=3)
    hurt.heal(active=active)
    assert _answers(cluster.client_address(3), timeout=10)
    assert not _produce_acks_all(cluster.bootstrap, topic, 10)


@OTHER_VERSIONS_NIGHTLY
def test_every_fault_is_recorded_as_invoke_then_ok_with_the_broker_it_hit(
    cluster, nemesis, tmp_path
):
    topic = _topic_led_by(cluster, 2)
    hurt = nemesis(Aim(topic))
    active = hurt.start(_event("latency", "leader:input/0"))
    hurt.heal(active=active)
    events = _fault_history(tmp_path)
    assert [e["type"] for e in events] == ["invoke", "ok"]
    assert all(e["f"] == "latency" and e["target"] == "leader:input/0" for e in events)
    assert json.loads(events[0]["params"])["broker"] == 2


@OTHER_VERSIONS_NIGHTLY
def test_a_target_that_cannot_be_resolved_is_recorded_as_a_failed_fault(cluster, nemesis, tmp_path):
    hurt = nemesis(Aim("none"))
    assert hurt.start(_event("kill", "leader:no-such-topic/0")) is None
    assert [e["type"] for e in _fault_history(tmp_path)] == ["invoke", "fail"]
    assert all(cluster.node_alive(node) for node in cluster.spec.node_ids)


@OTHER_VERSIONS_NIGHTLY
def test_the_schedule_is_overdue_while_a_restarted_broker_delays_the_next_fault(cluster, nemesis):
    """The second kill is due 1 s in but waits for broker 3's replicas: the seeder holds input."""
    hurt = nemesis(Aim(_topic_led_by(cluster, 3)))
    schedule = [
        FaultEvent(0.0, "kill", "broker:3", 0.5, {}),
        FaultEvent(1.0, "kill", "broker:3", 0.5, {}),
    ]
    seen: list[bool] = []
    runner = threading.Thread(target=hurt.run, args=(schedule, time.monotonic(), threading.Event()))
    runner.start()
    while runner.is_alive():
        seen.append(hurt.overdue())
        time.sleep(0.05)
    assert seen[0] is False and True in seen and seen[-1] is False
    assert not hurt.overdue()


@dataclass
class SlowCrashAim(Aim):
    """An instance whose crash takes seconds to land, as an aimed crash does."""

    instance_count: int = 1

    def kill_instance(self, _instance: int) -> None:
        time.sleep(4.0)


@OTHER_VERSIONS_NIGHTLY
def test_a_late_start_waits_for_the_heal_the_schedule_put_before_it(cluster, nemesis, tmp_path):
    """Both kills are overdue when the slow crash ends: the second still starts only once the
    first has healed, so they never overlap (it once killed an already-dead broker)."""
    hurt = nemesis(SlowCrashAim(_topic_led_by(cluster, 3)))
    schedule = [
        FaultEvent(0.0, "crash", "instance:0", 0.0, {}),
        FaultEvent(0.5, "kill", "broker:3", 1.0, {}),
        FaultEvent(2.0, "kill", "broker:3", 1.0, {}),
    ]
    hurt.run(schedule, time.monotonic(), threading.Event())
    kills = [(e["type"], e["time"]) for e in _fault_history(tmp_path) if e["f"] == "kill"]
    assert [type_ for type_, _ in kills] == ["invoke", "ok", "invoke", "ok"]
    assert kills[1][1] <= kills[2][1]
