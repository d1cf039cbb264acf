"""Pure logic of the cluster layer: ports, broker configs, versions, coordinator hashing, PIDs."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eoschaos.clusters import kafka_dist, processes
from eoschaos.clusters.admin import coordinator_partition, java_string_hash
from eoschaos.clusters.base import new_cluster_id
from eoschaos.clusters.broker_config import ClusterSpec, broker_properties
from eoschaos.clusters.kafka_proxy import ProtocolRule
from eoschaos.clusters.ports import layout, plan_ports
from eoschaos.contract.errors import EoschaosError


def test_port_layout_gives_every_listener_and_proxy_its_own_port():
    plan = layout(30000, [1, 2, 3])
    assert len(set(plan.all_ports())) == len(plan.all_ports()) == 1 + 3 * (4 + 2 * 3)
    assert plan.toxiproxy_api == 30000


def test_port_layout_with_the_protocol_proxy_gives_each_client_link_a_port_between():
    plan = layout(30000, [1, 2, 3], lanes=2, protocol_proxy=True)
    ports = plan.all_ports()
    assert len(set(ports)) == len(ports) == 2 + 3 * (4 + 2 * 3 + 2 * 2 + 3)
    assert plan.kafka_proxy_api == 30001
    assert set(plan.nodes[2].protocol) == {"client", "lane0", "lane1"}
    assert layout(30000, [1, 2, 3]).kafka_proxy_api is None


def test_a_protocol_rule_names_its_api_and_error_by_number():
    rule = ProtocolRule("r", api="EndTxn", action="answer", error="CONCURRENT_TRANSACTIONS")
    body = rule.to_json()
    assert (body["api_key"], body["error_code"], "release_after_close_ms" in body) == (
        26,
        51,
        False,
    )
    assert (
        ProtocolRule("h", "EndTxn", "hold", release_after_close_ms=0).to_json()[
            "release_after_close_ms"
        ]
        == 0
    )


def test_explicit_base_port_with_a_busy_port_names_that_port():
    plan = layout(31000, [1, 2, 3])
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", plan.nodes[3].proxy["internal"]))
        holder.listen()
        with pytest.raises(EoschaosError, match=str(plan.nodes[3].proxy["internal"])):
            plan_ports([1, 2, 3], 31000)


def test_automatic_port_plan_skips_a_block_with_a_busy_port():
    first_free = plan_ports([1, 2, 3], None).toxiproxy_api
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", first_free + 13))
        holder.listen()
        assert plan_ports([1, 2, 3], None).toxiproxy_api != first_free


def test_brokers_advertise_only_proxy_addresses_and_vote_through_proxies():
    spec = ClusterSpec(brokers=3)
    plan = layout(30000, spec.node_ids)
    props = broker_properties(spec, plan, 2, Path("/data"))
    proxy_ports = {port for n in plan.nodes.values() for port in n.proxy.values()}
    advertised = [int(a.rsplit(":", 1)[1]) for a in props["advertised.listeners"].split(",")]
    voters = [int(v.rsplit(":", 1)[1]) for v in props["controller.quorum.voters"].split(",")]
    assert set(advertised) | set(voters) <= proxy_ports
    assert props["inter.broker.listener.name"] == "INTERNAL"


def test_each_node_reaches_every_controller_through_proxies_of_its_own():
    spec = ClusterSpec(brokers=4)
    plan = layout(30000, spec.node_ids)
    voters = {
        node_id: broker_properties(spec, plan, node_id, Path("/d"))["controller.quorum.voters"]
        for node_id in spec.node_ids
    }
    assert voters[4].split(",") == [
        f"{v}@127.0.0.1:{plan.nodes[v].proxy['controller-from-4']}" for v in (1, 2, 3)
    ]
    assert len(set(voters.values())) == 4  # no two nodes share a path to a controller


def test_a_voter_advertises_a_controller_listener_per_source_node_at_that_pairs_proxy():
    spec = ClusterSpec(brokers=4)
    plan = layout(30000, spec.node_ids)
    props = broker_properties(spec, plan, 2, Path("/d"))
    advertised = props["advertised.listeners"].split(",")
    listeners = props["listeners"].split(",")
    for source in spec.node_ids:
        link = f"controller-from-{source}"
        name = f"CONTROLLER_FROM_{source}"
        assert f"{name}://127.0.0.1:{plan.nodes[2].proxy[link]}" in advertised
        assert f"{name}://127.0.0.1:{plan.nodes[2].real[link]}" in listeners


def test_each_node_names_its_own_controller_listener_first():
    """A KRaft 3.9+ follower looks the leader's endpoint up under its first controller listener
    name: its own, so the leader's answer is the proxy of this pair, which a cut holds."""
    spec = ClusterSpec(brokers=4)
    plan = layout(30000, spec.node_ids)
    names = {
        n: broker_properties(spec, plan, n, Path("/d"))["controller.listener.names"].split(",")
        for n in spec.node_ids
    }
    assert names[2] == [
        "CONTROLLER_FROM_2",
        "CONTROLLER_FROM_1",
        "CONTROLLER_FROM_3",
        "CONTROLLER_FROM_4",
    ]
    assert names[4] == ["CONTROLLER_FROM_4"]  # a broker-only node listens on none


def test_instance_lanes_get_ports_of_their_own_on_every_node():
    plan = layout(30000, [1, 2, 3], lanes=6)
    assert len(set(plan.all_ports())) == len(plan.all_ports()) == 1 + 3 * (4 + 2 * 3 + 2 * 6)
    assert layout(30000, [1, 2, 3]).nodes == layout(30000, [1, 2, 3], lanes=0).nodes


def test_each_lane_is_a_listener_advertised_at_its_own_proxy():
    spec = ClusterSpec(brokers=3, instance_lanes=2)
    plan = layout(30000, spec.node_ids, lanes=2)
    props = broker_properties(spec, plan, 2, Path("/data"))
    proxy = plan.nodes[2].proxy
    assert f"LANE1://127.0.0.1:{proxy['lane1']}" in props["advertised.listeners"].split(",")
    assert f"LANE0://127.0.0.1:{plan.nodes[2].real['lane0']}" in props["listeners"].split(",")
    assert "LANE1:PLAINTEXT" in props["listener.security.protocol.map"].split(",")


def test_eos_grade_settings_for_three_brokers():
    spec = ClusterSpec(brokers=3)
    props = broker_properties(spec, layout(30000, spec.node_ids), 1, Path("/data"))
    assert props["default.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"
    assert props["transaction.state.log.replication.factor"] == "3"
    assert props["transaction.state.log.min.isr"] == "2"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["unclean.leader.election.enable"] == "false"


def test_nodes_beyond_three_are_brokers_only_and_a_single_node_has_replication_one():
    five = ClusterSpec(brokers=5)
    plan = layout(30000, five.node_ids)
    assert broker_properties(five, plan, 5, Path("/d"))["process.roles"] == "broker"
    assert broker_properties(five, plan, 3, Path("/d"))["process.roles"] == "broker,controller"
    one = ClusterSpec(brokers=1)
    props = broker_properties(one, layout(30000, [1]), 1, Path("/d"))
    assert (props["default.replication.factor"], props["min.insync.replicas"]) == ("1", "1")


@pytest.mark.parametrize("version", ["3.9.2", "4.0.0", "4.3.1"])
def test_supported_kafka_versions(version):
    assert kafka_dist.parse_version(version)[0] in (3, 4)


@pytest.mark.parametrize("version", ["3.8.1", "2.8.2", "5.0.0", "4.3", "latest"])
def test_unsupported_kafka_versions_are_refused(version):
    with pytest.raises(EoschaosError):
        kafka_dist.parse_version(version)


def test_kafka_home_version_is_read_from_its_core_jar(tmp_path, monkeypatch):
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "kafka_2.13-3.9.2.jar").touch()
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    assert kafka_dist.resolve().version == "3.9.2"
    with pytest.raises(EoschaosError, match="differs"):
        kafka_dist.resolve("4.3.1")


def test_log4j2_without_binding_gets_the_matching_slf4j_binding(tmp_path):
    for jar in ("log4j-core-2.25.4.jar", "slf4j-api-1.7.36.jar"):
        (tmp_path / jar).touch()
    binding = kafka_dist._missing_slf4j_binding(tmp_path)
    assert binding == "org.apache.logging.log4j:log4j-slf4j-impl:2.25.4"
    (tmp_path / "log4j-slf4j-impl-2.25.4.jar").touch()
    assert kafka_dist._missing_slf4j_binding(tmp_path) is None


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [("", 0), ("hello", 99162322), ("é", 233), ("😀", 1772899), ("polygenelubricants", -(2**31))],
)
def test_java_string_hash_matches_java(text, java_hash):
    assert java_string_hash(text) == java_hash


def test_coordinator_partition_maps_min_int_hash_to_partition_zero():
    assert coordinator_partition("polygenelubricants", 10) == 0
    assert coordinator_partition("hello", 10) == 99162322 % 10


def _sleeper(tmp_path: Path) -> tuple[subprocess.Popen, processes.ManagedProcess]:
    return processes.spawn(
        "sleeper",
        [sys.executable, "-c", "import time; time.sleep(60)"],
        tmp_path / "sleeper.log",
        tmp_path / "pids",
    )


def test_spawn_records_a_pid_file_and_the_history(tmp_path):
    popen, proc = _sleeper(tmp_path)
    try:
        assert processes.read_pid_files(tmp_path / "pids") == [proc]
        assert processes.read_history(tmp_path / "pids") == [proc]
        assert proc.alive()
    finally:
        processes.kill(proc, popen)
    assert not proc.alive()


def test_a_process_that_outlives_its_stop_is_reported_until_it_is_killed(tmp_path):
    popen, proc = _sleeper(tmp_path)
    processes.remove_pid_file(tmp_path / "pids", proc.name)  # its run believes it stopped it
    assert processes.still_alive(tmp_path / "pids") == [proc]
    processes.kill(proc, popen)
    assert processes.still_alive(tmp_path / "pids") == []


def test_a_zombie_counts_as_dead(tmp_path):
    popen, proc = _sleeper(tmp_path)
    popen.send_signal(signal.SIGKILL)
    time.sleep(0.5)  # not reaped: the kernel keeps a zombie that still answers kill(pid, 0)
    assert not proc.alive()
    popen.wait()


def test_a_recycled_pid_is_not_ours(tmp_path):
    popen, proc = _sleeper(tmp_path)
    try:
        impostor = processes.ManagedProcess(proc.name, proc.pid, proc.start_ticks + 1, [], "")
        assert not impostor.alive()
        assert not processes.signal_group(impostor, signal.SIGKILL)
        assert proc.alive()
    finally:
        processes.kill(proc, popen)


def test_terminate_stops_a_paused_process(tmp_path):
    popen, proc = _sleeper(tmp_path)
    processes.signal_group(proc, signal.SIGSTOP)
    assert processes.terminate(proc, timeout=10, popen=popen) is True
    assert not proc.alive()


def test_cluster_ids_never_start_with_a_dash():
    ids = [new_cluster_id() for _ in range(2000)]  # about 1 in 64 raw ids starts with '-'
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_the_last_node_of_a_stopping_cluster_is_killed_once_its_peers_are_gone(tmp_path):
    """Nodes stop together. Two exit on SIGTERM; the third, left without a quorum, would wait
    out a controlled shutdown that cannot finish: it gets a short grace, not the timeout."""
    from eoschaos.clusters.registry import LAST_NODE_GRACE_S, stop_run_dir

    deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('deaf')"
    commands = {
        "node-1": ["sleep", "60"],
        "node-2": ["sleep", "60"],
        "node-3": [sys.executable, "-u", "-c", f"{deaf}; time.sleep(60)"],
    }
    popens = [
        processes.spawn(name, command, tmp_path / f"{name}.log", tmp_path / "pids")[0]
        for name, command in commands.items()
    ]
    deadline = time.monotonic() + 10
    while "deaf" not in (tmp_path / "node-3.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    stopped = stop_run_dir(tmp_path, timeout=30)
    took = time.monotonic() - started
    assert sorted(stopped) == sorted(commands)
    assert LAST_NODE_GRACE_S <= took < LAST_NODE_GRACE_S + 5
    assert [popen.wait(5) for popen in popens][2] == -signal.SIGKILL
