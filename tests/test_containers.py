"""The containers backend on a real runtime (podman on our machines): the same cluster, the same
node operations and faults as the process backend, and nothing left behind on bad input.

One 3-broker cluster in containers serves the module and is healed after every test. Skipped
only where no container runtime can be set up (scripts/setup_podman.sh sets podman up).
"""

from __future__ import annotations

import ipaddress
import json
import signal
import socket
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import copier_image
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kill_trials import RUN_ARGS, run_trial
from listening import is_loopback, listening_addresses, listening_sockets
from quorum import new_leader_of, until

from eoschaos.chaos import faults
from eoschaos.clusters import admin, kafka_dist, processes
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.container_runtime import (
    NO_RUNTIME_FIX,
    Runtime,
    api_answers,
    detect_runtime,
    stop_api_service,
)
from eoschaos.clusters.containers_backend import RUN_LABEL, ContainerCluster, cleanup_containers
from eoschaos.clusters.images import build_image
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.history import NEMESIS
from eoschaos.contract.rundir import CLUSTER_FILE, HISTORY_DIR
from eoschaos.run import WarmJudge
from eoschaos.workloads.smoke import create_topic, run_smoke

pytestmark = pytest.mark.cluster


def _quiet(_message: str) -> None:
    pass


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    """The detected runtime; a podman API service these tests started is stopped after them."""
    found = detect_runtime()
    if found is None:
        pytest.skip(f"containers backend not testable here: {NO_RUNTIME_FIX}")
    started_here = found.managed_service and not api_answers(found)
    yield found
    if started_here:
        stop_api_service()


@pytest.fixture(scope="module")
def image(runtime: Runtime) -> str:
    return build_image(kafka_dist.resolve(), _quiet, runtime)


@pytest.fixture(scope="module")
def module_cluster(runtime, image, tmp_path_factory) -> Iterator[ContainerCluster]:
    run_dir = tmp_path_factory.mktemp("containers-cluster")
    cluster = ContainerCluster(run_dir, ClusterSpec(brokers=3), kafka_dist.resolve(), image)
    with cluster:
        yield cluster
    assert _leftovers(runtime, run_dir) == []


@pytest.fixture
def cluster(module_cluster: ContainerCluster) -> Iterator[ContainerCluster]:
    """The module's cluster, put back to full health after the test whatever it broke."""
    yield module_cluster
    module_cluster.heal_network()
    for node_id in module_cluster.spec.node_ids:
        if module_cluster.node_alive(node_id):
            module_cluster.resume_node(node_id)
        else:
            module_cluster.start_node(node_id)
    module_cluster.wait_healthy(timeout=180)


def _leftovers(runtime: Runtime, run_dir: Path) -> list[str]:
    label = f"label={RUN_LABEL}={run_dir.resolve()}"
    containers = runtime.run("ps", "-a", "--filter", label, "--format", "{{.Names}}")
    networks = runtime.run("network", "ls", "--filter", label, "--format", "{{.Name}}")
    return containers.stdout.split() + networks.stdout.split()


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic_led_by(cluster: ContainerCluster, node_id: int) -> str:
    topic = _topic("led")
    others = [n for n in cluster.spec.node_ids if n != node_id]
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[[node_id, *others]])
    client.create_topics([new])[topic].result(30)
    deadline = time.monotonic() + 30
    while cluster.partition_leader(topic, 0) != node_id and time.monotonic() < deadline:
        time.sleep(0.2)
    return topic


def _produce(bootstrap: str, topic: str, count: int, timeout_ms: int = 30000) -> list[str]:
    """Produce with acks=all; return the delivery errors (undelivered ones included)."""
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "message.timeout.ms": timeout_ms,
            "log_level": 0,
        }
    )
    for i in range(count):
        producer.produce(
            topic, value=str(i).encode(), on_delivery=lambda e, _m: e and errors.append(str(e))
        )
    remaining = producer.flush(timeout_ms / 1000 + 10)
    return errors + ["undelivered"] * remaining


def _reachable(bootstrap: str, timeout: float = 3.0) -> bool:
    try:
        admin.admin_client(bootstrap).list_topics(timeout=timeout)
        return True
    except Exception:
        return False


# ----------------------------------------------------------------------------- the cluster


def test_cluster_in_containers_is_ready_and_records_backend_and_feature_levels(cluster):
    info = json.loads((cluster.run_dir / CLUSTER_FILE).read_text())
    assert info["backend"] == "containers"
    assert info["metadata_version"].startswith(cluster.dist.version.rsplit(".", 1)[0])
    assert info["transaction_version"] == ("2" if cluster.dist.major >= 4 else "0")
    health = admin.health(admin.admin_client(cluster.bootstrap))
    assert health.brokers == {1, 2, 3} and not health.under_replicated
    assert {"__consumer_offsets", "__transaction_state"} <= health.topics


def test_every_node_is_a_labelled_container_in_the_netns_of_its_address_container(cluster, runtime):
    for node_id in cluster.spec.node_ids:
        fmt = "{{json .Config.Labels}}|{{json .NetworkSettings.Networks}}|{{.Id}}"
        address = runtime.run("inspect", "--format", fmt, cluster.address_name(node_id))
        labels, networks, address_id = address.stdout.strip().split("|")
        assert json.loads(labels)[RUN_LABEL] == str(cluster.run_dir)
        endpoint = json.loads(networks)[cluster.network_name]
        assert endpoint["IPAddress"] == cluster.node_ip(node_id)
        assert endpoint["MacAddress"] == cluster.node_mac(node_id)
        fmt = "{{json .Config.Labels}}|{{.HostConfig.NetworkMode}}"
        node = runtime.run("inspect", "--format", fmt, cluster.container_name(node_id))
        labels, network_mode = node.stdout.strip().split("|")
        assert json.loads(labels)[RUN_LABEL] == str(cluster.run_dir)
        assert network_mode == f"container:{address_id}"


def test_clients_and_peers_reach_nodes_only_through_proxies(cluster):
    metadata = admin.admin_client(cluster.bootstrap).list_topics(timeout=10)
    advertised = {f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    assert advertised == {cluster.client_address(n) for n in cluster.spec.node_ids}
    proxies = cluster.toxiproxy.proxies()
    assert {p["listen"].rsplit(":", 1)[0] for p in proxies.values()} == {
        "127.0.0.1",
        cluster.gateway,
    }
    assert all(p["upstream"].startswith("127.0.0.1:") for p in proxies.values())


def test_every_socket_of_the_cluster_listens_on_loopback_or_on_the_network_it_made(cluster):
    """Toxiproxy and its API on the host, each broker in its container's own namespace, and
    whatever the runtime listens with on the host for the published ports: each is bound to
    loopback or to an address of the cluster's own network (its gateway, its nodes)."""
    nodes = {n: cluster.node_pid(n) for n in cluster.spec.node_ids}
    host = {process.name: process.pid for process in processes.still_alive(cluster.pid_dir)}
    listening = listening_addresses([*host.values(), *nodes.values()])
    assert all(listening.get(pid) for pid in nodes.values()), "every broker must be seen"
    assert listening.get(host["toxiproxy"]), "Toxiproxy and its API must be seen"
    published = {port for node in cluster.plan.nodes.values() for port in node.real.values()}
    forwarders = [a for a, _ in listening_sockets() if int(a.rsplit(":", 1)[1]) in published]
    seen = [address for addresses in listening.values() for address in addresses] + forwarders
    outside = [
        address
        for address in seen
        if not is_loopback(address)
        and ipaddress.ip_address(address.rsplit(":", 1)[0]) not in cluster.subnet
    ]
    assert outside == []


def test_transactions_commit_and_abort_under_read_committed(cluster):
    topic = _topic("smoke")
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    result = run_smoke(cluster.bootstrap, topic)
    assert result.committed and result.aborted
    assert sorted(result.read_committed) == sorted(result.committed)
    assert result.isolation_holds


# ----------------------------------------------------------------------------- node operations


def test_killed_broker_container_restarts_on_its_data_and_rejoins(cluster):
    topic = _topic("rejoin")
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    victim = cluster.partition_leader(topic, 0)
    old_pid = cluster.node_pid(victim)
    cluster.kill_node(victim)
    assert not cluster.node_alive(victim)
    assert _produce(cluster.bootstrap, topic, 100) == []
    cluster.start_node(victim)
    health = cluster.wait_healthy(timeout=180)
    assert victim in health.brokers and not health.under_replicated
    assert cluster.node_pid(victim) not in (None, old_pid)
    assert any((cluster.node_dir(victim) / "data").glob(f"{topic}-*"))


def test_a_killed_nodes_ports_refuse_at_once_and_its_proxies_stay_responsive(cluster):
    """Its address outlives it: a dial into a dead node is refused, never black-holed (a
    black-holed upstream dial stalls Toxiproxy's accept loop, and its API, for ~2 min)."""
    assert cluster.plan is not None
    for _ in range(3):  # the black-holed moment came right after the kill, on most kills
        cluster.kill_node(1)
        for port in cluster.plan.nodes[1].real.values():
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5)
        for link in cluster.proxied_links(1):
            host = "127.0.0.1" if link in cluster.client_links() else cluster.gateway
            with socket.create_connection((host, cluster.plan.nodes[1].proxy[link]), 5) as s:
                s.settimeout(5)
                assert s.recv(1) == b""  # Toxiproxy closes it: its upstream refused
            cluster.set_link_enabled(1, link, True)  # an API call on that proxy answers
        cluster.start_node(1)


def test_clean_stop_of_the_active_controller_exits_on_sigterm_and_it_restarts(cluster):
    """The hardest clean stop: its controlled shutdown needs its peers (the quorum it leads,
    the follower of the partition it leads) until its listeners close."""
    node = cluster.active_controller()
    _topic_led_by(cluster, node)
    assert cluster.stop_node(node, timeout=60) is True
    assert not cluster.node_alive(node)
    cluster.start_node(node)
    assert node in cluster.wait_healthy(timeout=180).brokers


def test_split_of_the_active_controller_hands_the_quorum_to_the_majority(cluster):
    """The controller listener per pair, advertised at the gateway's proxy of that pair, holds
    the cut leader's Raft traffic in containers too: the majority elects a new controller."""
    controller = cluster.active_controller()
    others = [n for n in cluster.spec.node_ids if n != controller]
    ctx = faults.FaultContext(cluster, None, cluster.run_dir, _quiet)  # type: ignore[arg-type]
    heal = faults.split(ctx, {"broker": controller})
    try:
        new_controller = until(lambda: new_leader_of(cluster, others, controller), 60)
    finally:
        heal()
    assert new_controller, "the majority follows no new controller 60 s into the split"
    assert not cluster.wait_healthy(timeout=180).under_replicated


def test_paused_broker_stops_answering_and_answers_again_after_resume(cluster):
    only_node_3 = cluster.client_address(3)
    cluster.pause_node(3)
    try:
        assert cluster.node_alive(3)
        assert not _reachable(only_node_3)
    finally:
        cluster.resume_node(3)
    assert _reachable(only_node_3, timeout=15)


def test_disabled_client_proxy_fails_produce_to_its_node_and_enabling_heals(cluster):
    topic = _topic_led_by(cluster, 2)
    only_node_2 = cluster.client_address(2)
    cluster.set_link_enabled(2, "client", False)
    try:
        assert _produce(only_node_2, topic, 5, timeout_ms=4000) != []
    finally:
        cluster.set_link_enabled(2, "client", True)
    assert _produce(only_node_2, topic, 5) == []


def test_downstream_latency_toxic_raises_every_round_trip_by_the_delay(cluster):
    delay_s = 0.4
    topic = _topic_led_by(cluster, 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
    producer.produce(topic, value=b"warm-up")
    producer.flush(30)
    attributes = {"latency": int(delay_s * 1000), "jitter": 0}
    name = cluster.add_toxic(1, "client", "latency", attributes=attributes)
    try:
        samples = []
        for i in range(5):
            started = time.monotonic()
            producer.produce(topic, value=str(i).encode())
            assert producer.flush(30) == 0
            samples.append(time.monotonic() - started)
    finally:
        cluster.remove_toxic(1, "client", name)
    assert min(samples) >= delay_s


def test_disconnected_node_drops_out_and_rejoins_at_its_address_after_connect(cluster):
    cluster.disconnect_node(3)
    try:
        assert not _reachable(cluster.client_address(3))
    finally:
        cluster.connect_node(3)
    assert 3 in cluster.wait_healthy(timeout=180).brokers


def test_cluster_comes_back_after_every_node_was_killed_at_once(cluster):
    """The address containers keep the network (and the gateway the peer proxies listen on)
    up while no broker runs."""
    for node_id in cluster.spec.node_ids:
        cluster.kill_node(node_id)
    for node_id in cluster.spec.node_ids:
        cluster.start_node(node_id)
    health = cluster.wait_healthy(timeout=240)
    assert health.brokers == {1, 2, 3} and not health.under_replicated


# ----------------------------------------------------------------------------- scenarios


def _verdict(
    cluster: ContainerCluster, judge: WarmJudge, run_dir: Path, faults: str, **options
) -> dict:
    """One kip447 run on the containers cluster (seed 1 unless given), judged like any other,
    in the pytest session's warm Spark (the plugin's eoschaos_judge)."""
    from eoschaos.config import RunConfig
    from eoschaos.run import record_run

    suffix = uuid.uuid4().hex[:8]
    config = RunConfig.from_options(
        faults=faults,
        input_topic=f"in-{suffix}",
        output_topic=f"out-{suffix}",
        group=f"group-{suffix}",
        kafka_version=cluster.dist.version,
        **{"seed": 1, **options},
    )
    record_run(config, run_dir, cluster=cluster, progress=_quiet)
    return judge.judge(run_dir)[0]


def test_eos_pipeline_passes_under_broker_kill_and_zombie_in_containers(
    cluster, eoschaos_judge, tmp_path
):
    # Seed 5 schedules the zombie first and the kill at 15.7 s: both start however long a
    # loaded machine takes to restart a broker (seed 1's kill-then-zombie did not, at 54 s).
    verdict = _verdict(
        cluster,
        eoschaos_judge,
        tmp_path,
        "kill,zombie",
        mode="eos",
        duration=32,
        records=12000,
        seed=5,
    )
    failed = {name for name, check in verdict["checks"].items() if check["verdict"] != "PASS"}
    assert verdict["verdict"] == "PASS" and not failed, (failed, tmp_path)
    assert verdict["cluster"]["backend"] == "containers"
    applied = {fault["f"] for fault in verdict["timeline"]["faults"] if fault["end"] is not None}
    assert applied == {"kill", "zombie"}


@pytest.mark.chaos  # nightly: CI has the eos run in containers and alos on the process backend
def test_alos_pipeline_fails_with_duplicates_under_kill_and_crash_in_containers(
    cluster, eoschaos_judge, tmp_path
):
    verdict = _verdict(
        cluster, eoschaos_judge, tmp_path, "kill,crash", mode="alos", duration=30, records=12000
    )
    duplicate = verdict["checks"]["delivery.duplicate"]
    assert verdict["verdict"] == "FAIL"
    assert duplicate["verdict"] == "FAIL" and duplicate["count"] > 0 and duplicate["examples"]
    assert verdict["cluster"]["backend"] == "containers"


@pytest.mark.chaos  # nightly: CI runs the same image's instances on the process backend
def test_a_pipeline_image_passes_under_crashes_in_containers(cluster, eoschaos_judge, tmp_path):
    """Both backends serve a user's image alike: its containers reach the cluster through the
    instances' lanes on the host, whichever backend the brokers run on."""
    verdict = _verdict(
        cluster,
        eoschaos_judge,
        tmp_path,
        "crash",
        **copier_image.OPTIONS,
        partitions=3,
        instances=3,
        duration=20,
        records=3000,
    )
    assert verdict["verdict"] == "PASS", tmp_path
    assert verdict["cluster"]["backend"] == "containers"
    assert {fault["f"] for fault in verdict["timeline"]["faults"]} == {"crash"}


@pytest.mark.chaos  # nightly: a run on a cluster of its own; CI holds a commit on processes
def test_stale_endtxn_holds_commits_and_lets_them_land_late_in_containers(
    image, tmp_path, eoschaos
):
    """The protocol proxy is on the host whichever backend runs the brokers: on containers too
    an EndTxn is held until its client gives up, then lands into whatever the client does
    next, and the coordinator answers it."""
    run_dir = tmp_path / "run"
    args = ["--backend", "containers", "--image", image, "--faults", "stale-endtxn"]
    args += ["--duration", "45", "--records", "20000", "--seed", "1", "--out", str(run_dir)]
    done = eoschaos("run", *args)
    assert done.returncode in (0, 1), done.stderr  # PASS, or FAIL where a stale commit harmed
    rows = (run_dir / HISTORY_DIR / f"{NEMESIS}.jsonl").read_text().splitlines()
    events = [json.loads(row) for row in rows]
    healed = [
        json.loads(e["params"]) for e in events if (e["f"], e["type"]) == ("stale-endtxn", "ok")
    ]
    landed = [p for p in healed if p["took_effect"] and "late_answer" in p]
    assert landed, healed
    assert all(p["landed_after_close_s"] < 5.0 for p in landed)
    assert json.loads((run_dir / "verdict.json").read_text())["cluster"]["backend"] == "containers"


# ----------------------------------------------------------------------------- bad input


def _refused(run_dir: Path, match: str, **options) -> None:
    cluster = ContainerCluster(
        run_dir, ClusterSpec(brokers=3), kafka_dist.resolve(), progress=_quiet, **options
    )
    with pytest.raises(EoschaosError, match=match):
        cluster.start()


def test_no_container_runtime_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither podman nor docker on it
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    _refused(
        tmp_path / "run", "no container runtime answers.*setup_podman.sh"
    )  # asserts by raising


def test_missing_image_names_the_build_command_and_leaves_nothing(runtime, tmp_path):
    _refused(tmp_path / "run", "eoschaos images build", image="localhost/eoschaos/none:0")
    assert _leftovers(runtime, tmp_path / "run") == []


def test_image_without_kafka_is_refused_and_leaves_nothing(runtime, tmp_path):
    rootfs = tmp_path / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        info = tarfile.TarInfo("etc")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    tag = f"localhost/eoschaos/not-kafka:{uuid.uuid4().hex[:8]}"
    runtime.run("import", str(rootfs), tag)
    try:
        _refused(tmp_path / "run", "is not a Kafka image", image=tag)
    finally:
        runtime.run("rmi", "-f", tag, check=False)
    assert _leftovers(runtime, tmp_path / "run") == []


def test_port_clash_names_the_port_and_leaves_nothing(runtime, image, tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        base = held.getsockname()[1]
        cluster = ContainerCluster(
            tmp_path / "run",
            ClusterSpec(brokers=3, base_port=base),
            kafka_dist.resolve(),
            image,
            progress=_quiet,
        )
        with pytest.raises(EoschaosError, match=f"port {base} .* already in use"):
            cluster.start()
    assert _leftovers(runtime, tmp_path / "run") == []


def test_subnet_in_use_names_the_fix_and_leaves_nothing(module_cluster, runtime, image, tmp_path):
    taken = str(module_cluster.subnet)
    _refused(tmp_path / "run", f"subnet {taken} overlaps .*--subnet", image=image, subnet=taken)
    assert _leftovers(runtime, tmp_path / "run") == []


def test_cleanup_of_a_killed_runs_directory_removes_its_clusters_containers_and_no_other(
    module_cluster, runtime, image, tmp_path
):
    """A run whose harness died without stop(): `eoschaos cleanup RUN_DIR` names the run's
    directory, and the cluster lives inside it (`RUN_DIR/cluster`, as `eoschaos run` lays it
    out). Cleanup finds it by label alone and leaves other runs' clusters alone."""
    run_dir = tmp_path / "crashed"
    cluster = ContainerCluster(
        run_dir / "cluster", ClusterSpec(brokers=1), kafka_dist.resolve(), image, progress=_quiet
    )
    cluster.start()
    assert _leftovers(runtime, run_dir / "cluster")
    removed = cleanup_containers(run_dir)
    assert cluster.container_name(1) in removed and "toxiproxy" in removed
    assert _leftovers(runtime, run_dir / "cluster") == []
    assert all(module_cluster.node_alive(node_id) for node_id in module_cluster.spec.node_ids)


@pytest.mark.chaos
def test_a_containers_run_killed_mid_workload_leaves_nothing_after_cleanup(image, tmp_path):
    """`eoschaos run --backend containers` SIGKILLed mid-run (a CI job's timeout), then
    `eoschaos cleanup RUN_DIR`: no container, network, process or port of it is left, it
    listened only on loopback and its own network, and the re-check never reads as PASS."""
    run_args = [*RUN_ARGS, "--backend", "containers", "--image", image]
    trial = run_trial(tmp_path / "run", "workload", 6.0, run_args)
    assert not trial.finished_first and trial.phase_hit == "workload"
    assert trial.own_networks, "the run's own network must have been seen"
    assert trial.problems() == [], trial
    assert (trial.check_verdict, trial.check_complete) in (("UNKNOWN", False), ("FAIL", False))


_START_AND_WAIT = """
import sys, time
from pathlib import Path
from eoschaos.clusters import kafka_dist
from eoschaos.clusters.broker_config import ClusterSpec
from eoschaos.clusters.containers_backend import ContainerCluster
spec = ClusterSpec(brokers=1)
with ContainerCluster(Path(sys.argv[1]), spec, kafka_dist.resolve(), sys.argv[2]) as cluster:
    time.sleep(600)
"""


def test_ctrl_c_during_start_removes_containers_network_and_toxiproxy(runtime, image, tmp_path):
    run_dir = tmp_path / "interrupted"
    child = subprocess.Popen(
        [sys.executable, "-c", _START_AND_WAIT, str(run_dir), image],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(_leftovers(runtime, run_dir)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # until the network and the node's container exist
        assert len(_leftovers(runtime, run_dir)) == 2, "the start never got to the containers"
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=120)
    finally:
        child.kill()
    assert "KeyboardInterrupt" in stderr
    assert _leftovers(runtime, run_dir) == []
    assert processes.still_alive(run_dir / "pids") == []
