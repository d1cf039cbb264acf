"""The same KRaft cluster as eoschaos.clusters.process_backend, each node a container
(testcontainers).

Topology (docs/containers.md has the reasoning):

    clients ──► 127.0.0.1:<client proxy> ──┐
                                            ├─ Toxiproxy (host process) ─► 127.0.0.1:<real port>
    node ──► <gateway>:<peer proxy> ───────┘   published by the runtime ─► container:<real port>

- One network per cluster, made with the runtime's CLI (`--disable-dns`, a fixed /24 subnet).
  Each node is two plain `DockerContainer`s: its *address container* holds the node's static IP
  and MAC and its published ports for the whole run, and the broker container joins that
  network namespace. A restarted node is reachable at once (no stale ARP, no DNS to wait for),
  and a dead one refuses at once: its address never vanishes, so no dial into it black-holes.
- Toxiproxy is the host binary of the process backend. Client proxies listen on 127.0.0.1;
  inter-broker and controller proxies listen on the network's gateway address, the host's side
  of the bridge, which is the only host address the containers can reach. Every proxy's upstream
  is the node's port published on 127.0.0.1, so the host never dials container addresses: when
  the bridge is down a dialled container address would be routed off the machine.
- Nodes listen on their own address inside the network, on the same port numbers as the process
  backend's real ports; data and logs are host directories mounted at the same path, so the
  node's server.properties is formatted on the host and read in the container unchanged.
- Everything this module creates carries the label `eoschaos.run=<run_dir>`; `stop()` removes it
  (also on exceptions and Ctrl-C), `cleanup_containers()` removes leftovers by label.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from docker.errors import APIError, NotFound
from docker.models.containers import Container

from eoschaos.clusters import admin, toxiproxy
from eoschaos.clusters.base import BROKER_JVM, ClusterBase, ClusterInfo, new_cluster_id
from eoschaos.clusters.broker_config import ClusterSpec, broker_properties, render_properties
from eoschaos.clusters.container_runtime import (
    Runtime,
    connect,
    detect_runtime,
    last_line,
    require_runtime,
)
from eoschaos.clusters.container_runtime import stop_api_service as _stop_api_service
from eoschaos.clusters.images import KAFKA_LIBS, image_tag
from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.clusters.ports import is_controller_link
from eoschaos.clusters.registry import stop_run_dir
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.progress import progress_to_stderr

RUN_LABEL = "eoschaos.run"
NODE_LABEL = "eoschaos.node"
ADDRESS_LABEL = "eoschaos.address"  # on a node's address container, whose netns the node joins
# The JVM's own wait-forever (it waits until its pause file is gone): an image with nothing but
# `java` in it, as ours, can keep a node's address up while the broker is down.
_HOLD_ADDRESS = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+PauseAtStartup"]
PUBLIC_IMAGE = "docker.io/apache/kafka"
# Candidate subnets: 10.213.0.0/24 .. 10.213.255.0/24, the first not in use is taken.
_AUTO_SUBNETS = ipaddress.ip_network("10.213.0.0/16")
_FIRST_NODE_HOST = 10  # node i gets the subnet's address .(10 + i); .1 is the gateway
_NOT_KAFKA = ("Could not find or load main class kafka.Kafka", "ClassNotFoundException")
_SIGKILL_EXIT = 137
# Kafka's log configs (package data of clusters/), mounted read-only where the JVM flags say.
_LOG_CONFIGS = Path(__file__).parent / "log_configs"


def default_image(version: str, runtime: Runtime) -> str:
    """The image `eoschaos images build` made for `version` if the runtime has it, else the
    public apache/kafka image of that version (pulled on machines with a registry)."""
    local = image_tag(version)
    if runtime.run("image", "inspect", local, check=False).returncode == 0:
        return local
    return f"{PUBLIC_IMAGE}:{version}"


def run_digest(run_dir: Path) -> str:
    """What names a run's containers and network apart from any other run's."""
    return hashlib.sha1(str(run_dir).encode()).hexdigest()[:10]


class ContainerCluster(ClusterBase):
    """A cluster whose nodes are containers; proxies, waits and the "who leads what" questions
    are the base's, node operations act on the containers. Operated only by the process that
    started it (no attach): stop a crashed run's leftovers with `eoschaos cleanup`."""

    backend = "containers"
    start_timeout_s = 180.0

    def __init__(
        self,
        run_dir: Path,
        spec: ClusterSpec,
        dist: KafkaDistribution,
        image: str | None = None,
        progress: Callable[[str], None] = progress_to_stderr,
        subnet: str | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        super().__init__(run_dir, spec, dist, toxiproxy.server_binary(), progress)
        self.requested_image = image
        self.image: str | None = None
        self.requested_subnet = subnet
        self.runtime = runtime
        self.subnet: ipaddress.IPv4Network | None = None
        self.network_name = f"eoschaos-{run_digest(self.run_dir)}"
        self._containers: dict[int, Container] = {}
        self._addresses: dict[int, Container] = {}

    # ----------------------------------------------------------------- addresses

    @property
    def gateway(self) -> str:
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    def node_ip(self, node_id: int) -> str:
        assert self.subnet is not None
        return str(self.subnet.network_address + _FIRST_NODE_HOST + node_id)

    def node_mac(self, node_id: int) -> str:
        """Locally administered, derived from the IP: the same on every (re)start."""
        octets = ipaddress.ip_address(self.node_ip(node_id)).packed
        return "02:ec:" + ":".join(f"{b:02x}" for b in octets)

    def container_name(self, node_id: int) -> str:
        return f"{self.network_name}-node-{node_id}"

    def address_name(self, node_id: int) -> str:
        return f"{self.network_name}-address-{node_id}"

    # ----------------------------------------------------------------- lifecycle

    def start(self, timeout: float | None = None) -> ClusterInfo:
        """The runtime and the image first: without them nothing is created."""
        self.runtime = self.runtime or require_runtime()
        connect(self.runtime)
        self.image = self.requested_image or default_image(self.dist.version, self.runtime)
        return super().start(timeout)

    def _start(self) -> None:
        """Network, Toxiproxy, containers, proxies (the peer proxies listen on the network's
        gateway, which exists only once a container is attached)."""
        assert self.plan is not None and self.image is not None
        self._require_image()
        self._create_network()
        self._start_toxiproxy()
        self._start_kafka_proxy()
        self._format_log_dirs(new_cluster_id())
        # Creating a container takes podman seconds on a busy machine; do them at once.
        with ThreadPoolExecutor(max_workers=len(self.spec.node_ids)) as pool:
            list(pool.map(self.start_node, self.spec.node_ids))
        self._create_proxies()
        self._say(f"started {len(self.spec.node_ids)} containers ({self.image}); waiting")

    def _await_ready(self, timeout: float) -> ClusterInfo:
        info = super()._await_ready(timeout)
        (self.run_dir / "containers.json").write_text(
            json.dumps(
                {
                    "runtime": self.runtime.name if self.runtime else None,
                    "image": self.image,
                    "network": self.network_name,
                    "subnet": str(self.subnet),
                    "gateway": self.gateway,
                    "nodes": {
                        n: {
                            "container": self.container_name(n),
                            "address_container": self.address_name(n),
                            "ip": self.node_ip(n),
                        }
                        for n in self.spec.node_ids
                    },
                },
                indent=2,
            )
            + "\n"
        )
        return info

    def _require_image(self) -> None:
        """The image is present, or pullable; otherwise say how to get one."""
        assert self.runtime is not None and self.image is not None
        if self.runtime.run("image", "inspect", self.image, check=False).returncode == 0:
            return
        self._say(f"pulling {self.image}")
        pull = self.runtime.run("pull", self.image, check=False, timeout=600)
        if pull.returncode != 0:
            raise EoschaosError(
                f"image {self.image} is not available locally and could not be pulled "
                f"({last_line(pull.stderr)}); build one with `eoschaos images build "
                f"--kafka-version {self.dist.version}` (tag {image_tag(self.dist.version)})"
            )

    def _create_network(self) -> None:
        """A dedicated network without DNS, on the requested subnet or the first free one."""
        assert self.runtime is not None
        used = _subnets_in_use(self.runtime)
        if self.requested_subnet is not None:
            try:
                subnet = ipaddress.ip_network(self.requested_subnet)
            except ValueError:
                raise EoschaosError(
                    f"--subnet {self.requested_subnet} is not an IPv4 network; use e.g. "
                    "10.213.5.0/24"
                ) from None
            needed = _FIRST_NODE_HOST + len(self.spec.node_ids) + 2
            if not isinstance(subnet, ipaddress.IPv4Network) or subnet.num_addresses < needed:
                raise EoschaosError(
                    f"--subnet {subnet} is not IPv4 or too small for {len(self.spec.node_ids)} "
                    "nodes; use a /24 such as 10.213.5.0/24"
                )
            clash = next((u for u in used if u.overlaps(subnet)), None)
            if clash is not None:
                raise EoschaosError(
                    f"subnet {subnet} overlaps {clash}, already in use on this machine; pass "
                    "another --subnet, or remove leftovers with `eoschaos cleanup`"
                )
            candidates = [subnet]
        else:
            candidates = [
                s
                for s in _AUTO_SUBNETS.subnets(new_prefix=24)
                if not any(s.overlaps(u) for u in used)
            ]
        for subnet in candidates:
            args = ["network", "create", "--subnet", str(subnet)]
            args += ["--gateway", str(subnet.network_address + 1)]
            args += ["--label", f"{RUN_LABEL}={self.run_dir}"]
            if self.runtime.name == "podman":
                args.append("--disable-dns")  # aardvark-dns stalls ~40 s after a restart
            proc = self.runtime.run(*args, self.network_name, check=False)
            if proc.returncode == 0:
                self.subnet = subnet  # type: ignore[assignment]
                return
            if "already exists" in proc.stderr or self.requested_subnet is not None:
                raise EoschaosError(
                    f"creating network {self.network_name} on {subnet} failed "
                    f"({last_line(proc.stderr)}); pass another --subnet or run `eoschaos cleanup`"
                )
        raise EoschaosError(
            f"no free /24 subnet in {_AUTO_SUBNETS} for the cluster network; remove leftovers "
            "with `eoschaos cleanup` or pass --subnet"
        )

    def _peer_proxy_host(self) -> str:
        """The gateway: the host's side of the bridge, the only host address nodes reach."""
        return self.gateway

    def _write_node_config(self, node_id: int) -> None:
        assert self.plan is not None
        node_dir = self.node_dir(node_id)
        (node_dir / "logs").mkdir(parents=True, exist_ok=True)
        props = broker_properties(
            self.spec,
            self.plan,
            node_id,
            node_dir / "data",
            bind_host=self.node_ip(node_id),
            peer_proxy_host=self.gateway,
        )
        (node_dir / "server.properties").write_text(render_properties(props))

    def _watchdog_progress(self, message: str) -> None:
        """Report progress; fail fast if a node container exited instead of waiting it out."""
        for node_id, container in self._containers.items():
            container.reload()
            if container.status not in ("running", "paused", "created"):
                logs = container.logs(tail=40).decode(errors="replace")
                if any(marker in logs for marker in _NOT_KAFKA):
                    raise EoschaosError(
                        f"image {self.image} is not a Kafka image (no kafka.Kafka on "
                        f"{KAFKA_LIBS}); pass an apache/kafka image or build one with "
                        f"`eoschaos images build --kafka-version {self.dist.version}`"
                    )
                log = self.node_dir(node_id) / "logs" / "server.log"
                raise admin.ClusterNotReady(
                    f"container of node {node_id} exited during start ({last_line(logs)}); "
                    f"see {log}"
                )
        self._say(message)

    def stop(self) -> None:
        """Remove this cluster's containers and network, then stop Toxiproxy. Logs stay.
        The brokers go first: an address container cannot be removed while a node uses it."""
        with ThreadPoolExecutor(max_workers=max(1, len(self._containers))) as pool:
            list(pool.map(self._remove_container, list(self._containers)))
            list(pool.map(_remove, self._addresses.values()))
        self._containers.clear()
        self._addresses.clear()
        removed = _remove_labelled(self.runtime, self.run_dir) if self.runtime else []
        stopped = stop_run_dir(self.run_dir)
        if removed or stopped:
            self._say(
                f"removed {', '.join(removed + stopped)}; logs and data kept in {self.run_dir}"
            )

    def _remove_container(self, node_id: int) -> None:
        """Keep the container's own output (stdout.log), then remove it with its volumes."""
        container = self._containers[node_id]
        try:
            logs = container.logs()
            (self.node_dir(node_id) / "logs" / "stdout.log").write_bytes(logs)
            container.reload()
            if container.status == "paused":
                container.unpause()  # a paused container cannot be stopped
        except NotFound:
            return
        _remove(container)

    # ----------------------------------------------------------------- node operations

    def _container(self, node_id: int) -> Container | None:
        container = self._containers.get(node_id)
        if container is not None:
            try:
                container.reload()
            except NotFound:
                return None
        return container

    def node_alive(self, node_id: int) -> bool:
        container = self._container(node_id)
        return container is not None and container.status in ("running", "paused")

    def node_pid(self, node_id: int) -> int | None:
        """The broker JVM's PID on the host (the container's init process)."""
        container = self._container(node_id)
        if container is None or container.status not in ("running", "paused"):
            return None
        return int(container.attrs["State"]["Pid"]) or None

    def start_node(self, node_id: int) -> None:
        """Create and start the node's container, or start it again (same container, same
        address, same data)."""
        if self.node_alive(node_id):
            raise RuntimeError(f"node {node_id} is already running")
        container = self._container(node_id)
        try:
            if container is None:
                self._addresses[node_id] = self._create_address(node_id)
                self._containers[node_id] = self._create_container(node_id)
            else:
                container.start()
        except APIError as exc:
            if "not found" in str(exc) and "java" in str(exc):
                raise EoschaosError(
                    f"image {self.image} is not a Kafka image (no `java` on its PATH); pass an "
                    f"apache/kafka image or build one with `eoschaos images build`"
                ) from None
            raise

    def _create_address(self, node_id: int) -> Container:
        """The node's address for the whole run: its IP and MAC on the network and its
        published ports, held by a JVM that only waits, in the node's own image.

        While the broker container is down its ports refuse at once. Were the address the
        broker container's own, it would vanish with it, and a dial in the moment after (the
        runtime's port forwarding still in place) would be black-holed: SYNs unanswered until
        the kernel gives up, ~2 min. Toxiproxy dials upstream in its accept loop, so one such
        dial stalls its proxy, every later connection and every API call that touches it."""
        from testcontainers.core.container import DockerContainer

        assert self.image is not None
        node_dir = self.node_dir(node_id)
        pause_file = node_dir / "address.hold"
        pause_file.touch()
        container = (
            DockerContainer(self.image)
            .with_name(self.address_name(node_id))
            .with_command([*_HOLD_ADDRESS, f"-XX:PauseAtStartupFile={pause_file}", "-version"])
            .with_volume_mapping(str(node_dir), str(node_dir), "rw")
            .with_kwargs(
                entrypoint=["java"],
                user="0",
                hostname=f"node-{node_id}",
                labels={RUN_LABEL: str(self.run_dir), ADDRESS_LABEL: str(node_id)},
                network=self.network_name,
                networking_config={
                    self.network_name: {
                        "IPAMConfig": {"IPv4Address": self.node_ip(node_id)},
                        "MacAddress": self.node_mac(node_id),
                    }
                },
            )
        )
        for port in self._published_ports(node_id):
            container.ports[f"{port}/tcp"] = ("127.0.0.1", port)  # type: ignore[assignment]
        container.start()
        return container.get_wrapped_container()

    def _create_container(self, node_id: int) -> Container:
        """The broker, in its address container's network namespace."""
        from testcontainers.core.container import DockerContainer

        assert self.plan is not None and self.image is not None
        node_dir = self.node_dir(node_id)
        command = [
            *BROKER_JVM,
            *self.dist.logging_args(node_dir / "logs"),
            "-cp",
            f"{KAFKA_LIBS}/*",
            "kafka.Kafka",
            str(node_dir / "server.properties"),
        ]
        container = (
            DockerContainer(self.image)
            .with_name(self.container_name(node_id))
            .with_command(command)
            # Same paths inside as outside: server.properties, data and logs need no rewriting.
            .with_volume_mapping(str(node_dir), str(node_dir), "rw")
            .with_volume_mapping(str(_LOG_CONFIGS), str(_LOG_CONFIGS), "ro")
            .with_kwargs(
                entrypoint=["java"],
                user="0",  # the data dirs on the host are root's; apache/kafka runs as appuser
                labels={RUN_LABEL: str(self.run_dir), NODE_LABEL: str(node_id)},
                network_mode=f"container:{self._addresses[node_id].id}",
            )
        )
        container.start()
        return container.get_wrapped_container()

    def _published_ports(self, node_id: int) -> list[int]:
        """The node's real listener ports, published on 127.0.0.1 (a broker-only node has no
        controller listener)."""
        assert self.plan is not None
        return [
            port
            for link, port in self.plan.nodes[node_id].real.items()
            if not is_controller_link(link) or node_id in self.spec.voter_ids
        ]

    def kill_node(self, node_id: int) -> None:
        """SIGKILL the broker: no controlled shutdown; the container and its data stay."""
        container = self._container(node_id)
        if container is None or container.status not in ("running", "paused"):
            return
        if container.status == "paused":
            container.unpause()
        container.kill()
        container.wait(timeout=30)

    def stop_node(self, node_id: int, timeout: float = 30.0) -> bool:
        """SIGTERM (controlled shutdown), SIGKILL after `timeout`. True if it exited on TERM."""
        container = self._container(node_id)
        if container is None or container.status not in ("running", "paused"):
            return True
        if container.status == "paused":
            container.unpause()
        container.stop(timeout=max(1, round(timeout)))
        container.reload()
        return container.attrs["State"]["ExitCode"] != _SIGKILL_EXIT

    def pause_node(self, node_id: int) -> None:
        """Freeze the container (cgroup freezer): sockets stay open, nothing answers."""
        container = self._container(node_id)
        if container is None or container.status != "running":
            raise RuntimeError(f"node {node_id} is not running")
        container.pause()

    def resume_node(self, node_id: int) -> None:
        container = self._container(node_id)
        if container is None or container.status not in ("running", "paused"):
            raise RuntimeError(f"node {node_id} is not running")
        if container.status == "paused":
            container.unpause()

    def disconnect_node(self, node_id: int) -> None:
        """Take the node off the network: peers, clients and controllers all lose it silently
        (packets vanish; connections hang until their timeouts), while the JVM runs on."""
        assert self.runtime is not None
        self.runtime.run("network", "disconnect", self.network_name, self.address_name(node_id))

    def connect_node(self, node_id: int) -> None:
        """Put the node back on the network at its own address and MAC."""
        assert self.runtime is not None
        args = ["network", "connect", "--ip", self.node_ip(node_id)]
        if self.runtime.name == "podman":
            args += ["--mac-address", self.node_mac(node_id)]
        self.runtime.run(*args, self.network_name, self.address_name(node_id))


def _remove(container: Container) -> None:
    with contextlib.suppress(NotFound):
        container.remove(force=True, v=True)


def _subnets_in_use(runtime: Runtime) -> list[ipaddress.IPv4Network]:
    """Subnets of every network the runtime has, and of every route on the host."""
    used: list[ipaddress.IPv4Network] = []
    names = runtime.run("network", "ls", "--format", "{{.Name}}").stdout.split()
    if names:
        inspect = runtime.run("network", "inspect", *names).stdout
        for network in json.loads(inspect or "[]"):
            subnets = network.get("subnets") or network.get("IPAM", {}).get("Config") or []
            for entry in subnets:
                text = entry.get("subnet") or entry.get("Subnet")
                if text and ":" not in text:
                    used.append(ipaddress.ip_network(text, strict=False))
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False)
    for line in routes.stdout.splitlines():
        first = line.split()[0] if line.split() else ""
        if first and first != "default":
            try:
                used.append(ipaddress.ip_network(first, strict=False))
            except ValueError:
                continue
    return used


def _remove_labelled(runtime: Runtime, run_dir: Path | None) -> list[str]:
    """Remove containers (with their anonymous volumes) and networks labelled with `run_dir` or
    a directory inside it (any eoschaos run if None); return their names. Inside, because an
    `eoschaos run` directory keeps its cluster in `cluster/` and a matrix output one cluster per
    Kafka version: cleaning up the directory a user names must find them all."""
    removed: list[str] = []
    nodes, addresses = [], []  # the nodes first: an address container outlives its node's
    role = '{{.State.Status}} {{index .Config.Labels "' + ADDRESS_LABEL + '"}}'
    for name in _labelled(runtime, CONTAINERS, run_dir):
        status, _, address_of = (
            runtime.run("inspect", "--format", role, name, check=False)
            .stdout.strip()
            .partition(" ")
        )
        if status == "paused":
            runtime.run("unpause", name, check=False)
        (addresses if address_of.isdigit() else nodes).append(name)
    for containers in (nodes, addresses):
        if containers:
            runtime.run("rm", "-f", "-v", *containers, check=False, timeout=300)
            removed += containers
    for name in _labelled(runtime, NETWORKS, run_dir):
        if runtime.run("network", "rm", name, check=False).returncode == 0:
            removed.append(name)
    return removed


# How to list (with the name's format field) and inspect each kind of object eoschaos labels.
CONTAINERS = (("ps", "-a"), "{{.Names}}", ("inspect",))
NETWORKS = (("network", "ls"), "{{.Name}}", ("network", "inspect"))


def _labelled(
    runtime: Runtime, kind: tuple[tuple[str, ...], str, tuple[str, ...]], run_dir: Path | None
) -> dict[str, Path]:
    """Name -> run dir of the containers or networks carrying RUN_LABEL whose run dir is
    `run_dir` or inside it (all of them if None). The runtime's label filter matches exact
    values only, so the paths are compared here; one removed meanwhile is skipped."""
    list_cmd, name_field, inspect_cmd = kind
    listed = runtime.run(*list_cmd, "--filter", f"label={RUN_LABEL}", "--format", name_field)
    root = run_dir.resolve() if run_dir is not None else None
    found = {}
    for name in listed.stdout.split():
        inspected = runtime.run(*inspect_cmd, name, check=False)
        items = json.loads(inspected.stdout or "[]") if inspected.returncode == 0 else []
        for item in items:  # podman and Docker keep the labels in different places
            labels = (item.get("Config") or {}).get("Labels") or item.get("labels") or {}
            labelled = labels.get(RUN_LABEL) or (item.get("Labels") or {}).get(RUN_LABEL)
            if labelled and (root is None or Path(labelled).resolve().is_relative_to(root)):
                found[name] = Path(labelled)
    return found


def cleanup_containers(run_dir: Path | None = None) -> list[str]:
    """Remove what crashed or killed runs left: containers, networks, their Toxiproxy, and
    (with no `run_dir`) the podman API service. Returns what was removed or stopped."""
    runtime = detect_runtime()
    if runtime is None:
        return stop_run_dir(run_dir) if run_dir is not None else []
    # every cluster has exactly one network; its Toxiproxy runs on the host (a pid file)
    run_dirs = set(_labelled(runtime, NETWORKS, run_dir).values())
    if run_dir is not None:
        run_dirs.add(run_dir)
    removed = _remove_labelled(runtime, run_dir)
    for directory in sorted(run_dirs):
        removed += stop_run_dir(directory)
    if run_dir is None and runtime.managed_service and _stop_api_service():
        removed.append("podman-api")
    return removed
