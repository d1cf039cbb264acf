"""The Kafka protocol proxy on a real cluster: idle it changes nothing a client sees; a rule acts
on exactly the requests it names, and says what it did.

One cluster with the proxy on every client link (conftest's proxied_cluster), on the first Kafka
version only: the proxy acts on requests, which kmsg frames alike for every version; the Go
tests in clusters/kafka_proxy test the framing itself.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from quorum import until
from test_cluster import _topic_led_by
from test_nemesis import Aim, _event, _fault_history, _in_a_transaction

from eoschaos.checkers.spark import QUICK_JIT, spark_session
from eoschaos.checkers.verdict import check_run
from eoschaos.clusters.kafka_proxy import ProtocolRule
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.clusters.transaction_log import record_transaction_log
from eoschaos.contract.history import LOG_BATCHES, HistoryWriter, instance_name
from eoschaos.contract.rundir import HISTORY_DIR, write_manifest
from eoschaos.workloads.harness.pipeline import PipelineConfig
from eoschaos.workloads.kip447.config import ProcessorConfig
from eoschaos.workloads.kip447.group_member import GroupMember
from eoschaos.workloads.smoke import create_topic

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(proxied_cluster: ProcessCluster) -> Iterator[ProcessCluster]:
    """The module's cluster with every rule gone after each test."""
    yield proxied_cluster
    proxied_cluster.heal_network()


def _topic(cluster: ProcessCluster, partitions: int = 1) -> str:
    name = f"proxied-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, name, partitions, cluster.spec.replication_factor)
    return name


def _producer(cluster: ProcessCluster, **config) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 3, **config})


def _committed(cluster: ProcessCluster, topic: str, expected: int) -> list[bytes]:
    """The topic's committed records, read_committed, once `expected` came or 20 s passed."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(40):
            values += [m.value() for m in consumer.consume(500, timeout=0.5) if not m.error()]
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def _transaction(cluster: ProcessCluster, topic: str, txn_id: str, count: int, **config) -> None:
    producer = _producer(cluster, **{"transactional.id": txn_id, **config})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, value=f"{txn_id}-{i}".encode())
    producer.commit_transaction(60)


def test_every_client_link_of_every_node_has_a_lane_named_as_its_toxiproxy_proxy(cluster):
    names = {lane["name"] for lane in cluster.kafka_proxy.lanes()}
    links = cluster.client_links()
    assert names == {cluster.proxy_name(n, link) for n in cluster.spec.node_ids for link in links}


def test_a_transaction_through_the_idle_proxy_is_committed_and_read(cluster):
    topic = _topic(cluster)
    _transaction(cluster, topic, f"idle-{uuid.uuid4().hex[:6]}", 50)
    assert len(_committed(cluster, topic, 50)) == 50


def test_an_endtxn_answered_concurrent_transactions_is_retried_and_commits(cluster):
    topic, txn_id = _topic(cluster), f"answered-{uuid.uuid4().hex[:6]}"
    rule = ProtocolRule(
        "answer-endtxn",
        api="EndTxn",
        action="answer",
        transactional_id=txn_id,
        error="CONCURRENT_TRANSACTIONS",
        limit=1,
    )
    cluster.kafka_proxy.add_rule(rule)
    _transaction(cluster, topic, txn_id, 20)
    effects = cluster.kafka_proxy.rule(rule.id)["effects"]
    assert (effects["matched"], effects["answered"]) == (1, 1)
    assert len(_committed(cluster, topic, 20)) == 20


def test_a_held_endtxn_lands_alone_after_its_client_gave_up_on_the_connection(cluster):
    topic, txn_id = _topic(cluster), f"held-{uuid.uuid4().hex[:6]}"
    rule = ProtocolRule(
        "hold-endtxn",
        api="EndTxn",
        action="hold",
        transactional_id=txn_id,
        release_after_close_ms=0,
        limit=1,
    )
    cluster.kafka_proxy.add_rule(rule)
    # the client gives up on a request after 3 s, closes the connection and retries
    _transaction(cluster, topic, txn_id, 20, **{"socket.timeout.ms": 3000})
    view = cluster.kafka_proxy.rule(rule.id)
    kinds = [event["kind"] for event in view["events"]]
    assert kinds[:3] == ["held", "client-closed", "delivered-alone"]
    assert view["effects"]["released_alone"] == 1
    assert len(_committed(cluster, topic, 20)) == 20


@pytest.mark.parametrize(("idempotent", "copies"), [(True, 1), (False, 2)])
def test_a_duplicated_produce_is_written_twice_unless_the_producer_is_idempotent(
    cluster, idempotent, copies
):
    topic = _topic(cluster)
    rule = ProtocolRule("duplicate-produce", api="Produce", action="duplicate", limit=1)
    producer = _producer(
        cluster, **{"enable.idempotence": idempotent, "acks": "all", "linger.ms": 0}
    )
    producer.produce(topic, value=b"warm-up")  # metadata first, so the rule meets the record
    producer.flush(30)
    cluster.kafka_proxy.add_rule(rule)
    producer.produce(topic, value=b"once")
    assert producer.flush(30) == 0
    assert cluster.kafka_proxy.rule(rule.id)["effects"]["duplicated"] == 1
    values = _committed(cluster, topic, 1 + copies)
    assert values.count(b"once") == copies


# ----------------------------------------------------------------- the faults, through the nemesis


def _fault_params(tmp_path) -> dict:
    return json.loads(next(e for e in _fault_history(tmp_path) if e["type"] == "ok")["params"])


def test_stale_endtxn_lands_a_commit_in_the_clients_next_transaction(cluster, nemesis, tmp_path):
    """KAFKA-17754 with librdkafka, which keeps its producer epoch across transactions on every
    Kafka version: the stale commit of transaction 1 commits transaction 2, still open. Seen
    three ways: in what read_committed returns, in the coordinator's log, and in the verdict
    on the client's history (recorded as a kip447 processor records it) next to that log."""
    aim = Aim(_topic_led_by(cluster, 1), instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    since = time.time()
    producer = _in_a_transaction(cluster, aim, b"first", {"socket.timeout.ms": 5000})
    hurt = nemesis(aim)
    active = hurt.start(_event("stale-endtxn", "instance:0"))
    assert active is not None
    client = HistoryWriter(tmp_path, instance_name(0, 0), flush_each=True)
    txn = {"instance": 0, "incarnation": 0, "txn_id": aim.txn_id}
    started = time.monotonic()
    client.record("txn", "invoke", "commit", **txn, txn_seq=1)
    producer.commit_transaction(30)  # its EndTxn is held; the retry on a new connection passes
    client.record("txn", "ok", "commit", **txn, txn_seq=1)
    assert 4.0 < time.monotonic() - started < 15.0
    client.record("txn", "invoke", "begin", **txn, txn_seq=2, fate="commit")
    producer.begin_transaction()
    client.record("txn", "ok", "begin", **txn, txn_seq=2, fate="commit")
    producer.produce(aim.input_topic, value=b"second")
    producer.flush(30)
    client.record("txn", "ok", "produce", **txn, txn_seq=2, count=1)
    hurt.heal(active=active)  # returns once the stale EndTxn landed and was answered
    client.close()
    assert _committed(cluster, aim.input_topic, 2) == [b"first", b"second"]  # never committed
    params = _fault_params(tmp_path)
    assert 4.0 < params["held_s"] < 15.0 and params["late_answer"] == "NONE"
    assert 2.0 < params["landed_after_close_s"] < 5.0 and params["took_effect"] is True
    # The coordinator's own log, as a run records it: transaction 2 prepared and committed
    # though its client never asked, under transaction 1's producer epoch.
    transaction = ["Ongoing", "PrepareCommit", "CompleteCommit"]
    states = until(lambda: _coordinator_states(cluster, aim.txn_id, since, tmp_path, 7), 15)
    assert states == [(state, 0) for state in ["Empty", *transaction, *transaction]]
    manifest = {"workload": "kip447", "mode": "eos", "input_topic": aim.input_topic}
    write_manifest(tmp_path, {**manifest, "output_topic": aim.input_topic})
    spark = spark_session(app="eoschaos-tests", java_options=QUICK_JIT)
    stale = check_run(spark, tmp_path, lineage=False)["checks"]["fencing.stale-commit"]
    assert (stale["verdict"], stale["count"]) == ("FAIL", 1)
    assert stale["examples"][0]["txn_id"] == aim.txn_id


def _coordinator_states(
    cluster: ProcessCluster, txn_id: str, since: float, directory: Path, at_least: int
) -> list[tuple[str, int]] | None:
    """(state, producer epoch) of each record the coordinator wrote for `txn_id` since
    `since`, once there are `at_least` (the last ones are written just after the markers)."""
    log = directory / HISTORY_DIR / f"{LOG_BATCHES}.jsonl"
    log.unlink(missing_ok=True)
    with HistoryWriter(directory, LOG_BATCHES) as writer:
        record_transaction_log(cluster.dist, cluster.data_dirs(), since, writer)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    params = [json.loads(row["params"]) for row in rows if row["txn_id"] == txn_id]
    states = [(p["state"], p["producer_epoch"]) for p in params]
    return states if len(states) >= at_least else None


def test_lose_endtxn_response_makes_the_client_retry_a_commit_that_happened(
    cluster, nemesis, tmp_path
):
    aim = Aim(_topic_led_by(cluster, 2), instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    producer = _in_a_transaction(cluster, aim, b"only", {"socket.timeout.ms": 5000})
    hurt = nemesis(aim)
    active = hurt.start(_event("lose-endtxn-response", "instance:0"))
    started = time.monotonic()
    producer.commit_transaction(30)
    assert time.monotonic() - started > 4.0  # it waited for an answer that never came
    hurt.heal(active=active)
    assert _committed(cluster, aim.input_topic, 1) == [b"only"]
    params = _fault_params(tmp_path)
    assert params["effects"]["dropped_responses"] == 1 and params["took_effect"] is True


def test_coordinator_error_answers_the_commit_and_the_client_retries_past_it(
    cluster, nemesis, tmp_path
):
    aim = Aim(_topic_led_by(cluster, 3), instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    producer = _in_a_transaction(cluster, aim, b"only")
    hurt = nemesis(aim)
    active = hurt.start(_event("coordinator-error", "instance:0", error="CONCURRENT_TRANSACTIONS"))
    producer.commit_transaction(30)
    hurt.heal(active=active)
    assert _committed(cluster, aim.input_topic, 1) == [b"only"]
    params = _fault_params(tmp_path)
    assert params["effects"]["answered"] == 3 and params["took_effect"] is True


def test_duplicate_produce_is_refused_by_the_idempotent_transactional_producer(
    cluster, nemesis, tmp_path
):
    aim = Aim(_topic_led_by(cluster, 1), instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    producer = _in_a_transaction(cluster, aim, b"warm-up", {"linger.ms": 0})
    hurt = nemesis(aim)
    active = hurt.start(_event("duplicate-produce", "instance:0", limit=3))
    for i in range(3):
        producer.produce(aim.input_topic, value=f"v{i}".encode())
        producer.flush(30)
    producer.commit_transaction(30)
    hurt.heal(active=active)
    values = _committed(cluster, aim.input_topic, 4)
    assert values == [b"warm-up", b"v0", b"v1", b"v2"]
    assert _fault_params(tmp_path)["effects"]["duplicated"] == 3


def test_late_produce_holds_the_next_produce_until_the_heal_and_the_waiting_client_gets_its_answer(
    cluster, nemesis, tmp_path
):
    aim = Aim(_topic_led_by(cluster, 2), instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    producer = _in_a_transaction(cluster, aim, b"before", {"linger.ms": 0})
    hurt = nemesis(aim)
    active = hurt.start(_event("late-produce", "instance:0"))
    producer.produce(aim.input_topic, value=b"late")
    assert producer.flush(3) == 1  # held: no answer within 3 s
    hurt.heal(active=active)
    assert producer.flush(30) == 0  # delivered to the client still waiting, and answered
    producer.commit_transaction(30)
    assert _committed(cluster, aim.input_topic, 2) == [b"before", b"late"]
    params = _fault_params(tmp_path)
    assert params["took_effect"] is True
    assert params["effects"]["held"] == params["effects"]["released"] == 1
    assert "released_alone" not in params["effects"]  # the client had not given it up


@dataclass
class _KillableAim(Aim):
    """An aim whose instance kills are recorded: the group's members are the test's own."""

    killed: list[int] = field(default_factory=list)

    def kill_instance(self, instance: int) -> None:
        self.killed.append(instance)


def _group_committed_at_10(cluster: ProcessCluster) -> tuple[str, str]:
    """A topic of 2 partitions of 20 records each, and a group with offset 10 committed on both."""
    topic, group = _topic(cluster, partitions=2), f"group-{uuid.uuid4().hex[:8]}"
    producer = _producer(cluster)
    for partition in (0, 1):
        for i in range(20):
            producer.produce(topic, partition=partition, value=f"{partition}-{i}".encode())
    producer.flush(30)
    committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    committer.commit(offsets=[TopicPartition(topic, p, 10) for p in (0, 1)], asynchronous=False)
    committer.close()
    return topic, group


def _first_offsets(consume: Callable[[], list[Message]], wait_s: float = 30) -> dict[int, int]:
    """The offset of the first record read next of each of the 2 partitions, within `wait_s`."""
    first: dict[int, int] = {}
    deadline = time.monotonic() + wait_s
    while len(first) < 2 and time.monotonic() < deadline:
        for message in consume():
            if not message.error():
                first.setdefault(message.partition(), message.offset())
    return first


def test_unstable_offset_fetch_is_retried_and_the_group_resumes_at_its_committed_offsets(
    cluster, nemesis, tmp_path
):
    """The group's member fetches its offsets as after a rebalance, is told they are unstable
    three times, and still starts at the committed offset 10 of each partition, not at the
    earliest (auto.offset.reset) where "no offset" would put it."""
    topic, group = _group_committed_at_10(cluster)
    aim = _KillableAim(topic, group=group, instance_count=1)
    hurt = nemesis(aim)
    active = hurt.start(_event("unstable-offset-fetch", "instance:0", limit=3))
    assert aim.killed == [0]
    member = Consumer(
        {
            "bootstrap.servers": cluster.instance_bootstrap(0),
            "group.id": group,
            "isolation.level": "read_committed",  # asks for stable offsets
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    member.subscribe([topic])
    try:
        first = _first_offsets(lambda: member.consume(100, timeout=0.5))
    finally:
        member.close()
    hurt.heal(active=active)
    assert first == {0: 10, 1: 10}
    params = _fault_params(tmp_path)
    assert params["effects"]["answered"] == 3 and params["took_effect"] is True


@dataclass
class _FreezableAim(Aim):
    """An aim whose instance freezes and thaws are recorded: instance 0 is the test's own."""

    moments: list[str] = field(default_factory=list)

    def pause_instance(self, instance: int) -> None:
        self.moments.append("frozen")

    def resume_instance(self, instance: int) -> None:
        self.moments.append("thawed")


def _read_committed_member(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",  # asks for stable offsets
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )


def test_a_member_taking_over_partitions_whose_commit_is_pending_starts_where_it_commits(
    cluster, nemesis, tmp_path
):
    """The pending-commit fault's window: instance 0's transaction sent offset 15 of both
    partitions (10 is stable) and its commit is held. A read_committed member that takes the
    partitions over meanwhile reads nothing while the commit is held, and starts at 15 once it
    is delivered: not at the stable 10, nor at the earliest offset, where an answer of "no
    committed offset" would put it (the 99-duplicates lead of docs/findings.md)."""
    topic, group = _group_committed_at_10(cluster)
    aim = _FreezableAim(
        _topic(cluster), group=group, instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}"
    )
    owner = _read_committed_member(cluster.instance_bootstrap(0), group)
    owner.subscribe([topic])
    assert _first_offsets(lambda: owner.consume(100, timeout=0.5)) == {0: 10, 1: 10}
    producer = _in_a_transaction(cluster, aim, b"out")
    consumed = [TopicPartition(topic, partition, 15) for partition in (0, 1)]
    producer.send_offsets_to_transaction(consumed, owner.consumer_group_metadata(), 30)
    hurt = nemesis(aim)
    started: list[object] = []
    fault = threading.Thread(
        target=lambda: started.append(hurt.start(_event("pending-commit", "instance:0")))
    )
    fault.start()  # returns once it holds the commit, or gives up after 20 s
    assert until(lambda: cluster.kafka_proxy.rules(), 10)  # its rule is in place
    outcome: list[BaseException | None] = []
    committing = threading.Thread(target=_outcome_of, args=(producer.commit_transaction, outcome))
    committing.start()
    fault.join(30)
    (active,) = started
    assert aim.moments == ["frozen"]
    owner.close()  # as a frozen member's session ends: the partitions move
    taker = _read_committed_member(cluster.bootstrap, group)
    taker.subscribe([topic])
    try:
        assert _first_offsets(lambda: taker.consume(100, timeout=0.5), wait_s=5) == {}
        hurt.heal(active=active)
        committing.join(30)
        assert outcome == [None]  # the held commit committed
        assert _first_offsets(lambda: taker.consume(100, timeout=0.5)) == {0: 15, 1: 15}
    finally:
        taker.close()
    assert aim.moments == ["frozen", "thawed"]
    params = _fault_params(tmp_path)
    assert params["took_effect"] is True and params["effects"]["held"] == 1
    assert params["pending_s"] > 5


# Instance 0 as a process of its own: one transaction of one record, then its commit.
_COMMITTING_CLIENT = """
import sys
from confluent_kafka import Producer
bootstrap, txn_id, topic = sys.argv[1:4]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "log_level": 0})
producer.init_transactions(30)
producer.begin_transaction()
producer.produce(topic, value=b"doomed")
producer.flush(30)
producer.commit_transaction(60)
"""


@dataclass
class _ProcessAim(Aim):
    """An aim whose instance 0 is a real process, killed -9 by the fault."""

    process: subprocess.Popen | None = None

    def kill_instance(self, instance: int) -> None:
        assert self.process is not None
        self.process.kill()


def test_crash_in_commit_kills_the_instance_while_its_commit_is_held_and_it_never_commits(
    cluster, nemesis, tmp_path
):
    """The instance dies with its commit held; the commit never reaches the coordinator, so
    the transaction is aborted by the replacement's InitProducerId and nothing of it is ever
    read_committed: only the replacement's own transaction is."""
    aim = _ProcessAim(_topic(cluster), instance_count=1, txn_id=f"txn-{uuid.uuid4().hex[:8]}")
    hurt = nemesis(aim)
    started: list[object] = []
    fault = threading.Thread(
        target=lambda: started.append(hurt.start(_event("crash-in-commit", "instance:0")))
    )
    fault.start()  # returns once it killed the instance with its commit held
    assert until(lambda: cluster.kafka_proxy.rules(), 10)  # its rule is in place
    argv = [cluster.instance_bootstrap(0), aim.txn_id, aim.input_topic]
    aim.process = subprocess.Popen([sys.executable, "-c", _COMMITTING_CLIENT, *argv])
    fault.join(30)
    (active,) = started
    hurt.heal(active=active)  # records what the fault did
    assert aim.process.wait(10) == -signal.SIGKILL
    replacement = _in_a_transaction(cluster, aim, b"after")  # its InitProducerId aborts
    replacement.commit_transaction(30)
    assert _committed(cluster, aim.input_topic, 1) == [b"after"]
    params = _fault_params(tmp_path)
    assert params["took_effect"] is True and params["effects"]["held"] == 1
    assert cluster.kafka_proxy.rules() == []  # the held commit went with the rule


def _outcome_of(call: Callable[[], object], outcome: list[BaseException | None]) -> None:
    """Run `call`, noting the exception it raised or None."""
    try:
        call()
    except BaseException as error:  # noted for the test to assert on
        outcome.append(error)
    else:
        outcome.append(None)


@pytest.mark.parametrize(
    "error",
    [
        "UNSTABLE_OFFSET_COMMIT",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
    ],
)
def test_a_rewind_told_its_offsets_are_not_available_yet_waits_for_them(cluster, tmp_path, error):
    """A kip447 processor's rewind after an abort: its committed-offset fetch is answered with
    an error three times, and it still seeks each partition to the committed offset 10, not to
    the beginning where a missing offset would put it (99 input records processed twice)."""
    topic, group = _group_committed_at_10(cluster)
    pipeline = PipelineConfig(input_topic=topic, group=group)
    config = ProcessorConfig(cluster.instance_bootstrap(0), str(tmp_path), pipeline)
    history = HistoryWriter(tmp_path, instance_name(0, 0))
    member = GroupMember(config, history, {"instance": 0, "incarnation": 0})
    member.subscribe()
    try:
        assert _first_offsets(member.consume) == {0: 10, 1: 10}
        rule = ProtocolRule(
            "not-yet", api="OffsetFetch", action="answer", error=error, group=group, limit=3
        )
        cluster.kafka_proxy.add_rule(rule)
        member.rewind()
        assert cluster.kafka_proxy.rule(rule.id)["effects"]["answered"] == 3
        assert _first_offsets(member.consume) == {0: 10, 1: 10}
    finally:
        member.close()
        history.close()


def test_librdkafka_never_fetches_partitions_whose_offset_fetch_a_moved_coordinator_answered(
    cluster,
):
    """librdkafka #5586, as librdkafka 2.16 does it: a member's first offset fetch after its
    assignment is answered NOT_COORDINATOR. It finds the coordinator again, but never asks for
    the offsets again, so its partitions are never fetched while it stays in the group
    (docs/findings.md). When a librdkafka upgrade fails this, the bug is fixed there: the
    finding and this test go."""
    topic, group = _group_committed_at_10(cluster)
    rule = ProtocolRule(
        "moved", api="OffsetFetch", action="answer", error="NOT_COORDINATOR", group=group, limit=1
    )
    cluster.kafka_proxy.add_rule(rule)
    member = Consumer(
        {
            "bootstrap.servers": cluster.instance_bootstrap(0),
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    member.subscribe([topic])
    try:
        first = _first_offsets(lambda: member.consume(100, timeout=0.5), wait_s=15)
        assignment = member.assignment()
    finally:
        member.close()
    assert cluster.kafka_proxy.rule(rule.id)["effects"]["answered"] == 1
    assert sorted(tp.partition for tp in assignment) == [0, 1]  # assigned, yet never read
    assert first == {}
