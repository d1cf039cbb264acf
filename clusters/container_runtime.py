"""Which container runtime answers here, and the setup testcontainers needs to drive it.

A Docker engine is used as it is. Without one, podman is used through its Docker-compatible
API: eoschaos starts `podman system service` on a socket in its cache and points testcontainers
at it. On our machines podman needs settings its defaults lack (crun fails on the hybrid cgroup
hierarchy, the default ulimits exceed the hard limits), so eoschaos runs podman with a private
containers.conf named by CONTAINERS_CONF instead of editing /etc. Ryuk, testcontainers' reaper,
is disabled: its image cannot be pulled without a registry, and eoschaos removes what it
created by label (eoschaos.clusters.containers_backend.cleanup_containers).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import DockerException

from eoschaos.clusters import processes
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.host import cache_root

API_PROCESS = "podman-api"
_DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
_CONTAINERS_CONF = """\
# Written by eoschaos (clusters/container_runtime.py); used through CONTAINERS_CONF only.
[containers]
# podman's defaults exceed this machine's hard limits; any --ulimit replaces all defaults.
default_ulimits = ["nofile=8192:8192", "nproc=4096:4096"]

[engine]
# crun fails on this kernel's hybrid (v1 + v2) cgroup hierarchy; runc works.
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
network_backend = "netavark"
"""
NO_RUNTIME_FIX = (
    "no container runtime answers: start a Docker engine, or install podman with "
    "scripts/setup_podman.sh (Debian: apt-get install podman runc)"
)


@dataclass(frozen=True)
class Runtime:
    """A container runtime: its CLI, its Docker-compatible API, and how to run both."""

    name: str  # "docker" or "podman"
    cli: str
    docker_host: str  # unix:///... where the Docker-compatible API answers (or will)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the CLI
    managed_service: bool = False  # True: eoschaos starts the podman API service itself

    def run(
        self, *args: str, timeout: float = 120.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the runtime's CLI; with `check`, a failure raises with its last stderr line."""
        proc = subprocess.run(
            [self.cli, *args],
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{self.name} {' '.join(args[:3])}: {last_line(proc.stderr)}")
        return proc

    def client(self, timeout: float = 60.0) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.docker_host, timeout=timeout)


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def _podman_dir() -> Path:
    return cache_root() / "podman"


def containers_conf() -> Path:
    """eoschaos' private containers.conf, (re)written when its content changed."""
    path = _podman_dir() / "containers.conf"
    if not path.exists() or path.read_text() != _CONTAINERS_CONF:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_CONTAINERS_CONF)
    return path


def _api_answers(docker_host: str) -> dict[str, object] | None:
    """The engine's version info if a Docker-compatible API answers at `docker_host`."""
    try:
        client = docker.DockerClient(base_url=docker_host, timeout=5)
        try:
            return client.version()
        finally:
            client.close()
    except (DockerException, OSError):
        return None


def api_answers(runtime: Runtime) -> bool:
    return _api_answers(runtime.docker_host) is not None


def _is_podman(version: dict[str, object]) -> bool:
    components = version.get("Components") or []
    names = [str(c.get("Name", "")) for c in components if isinstance(c, dict)]
    return any("podman" in name.lower() for name in names)


def _managed_podman() -> Runtime | None:
    podman = shutil.which("podman")
    if podman is None:
        return None
    socket = _podman_dir() / "podman.sock"
    runtime = Runtime(
        name="podman",
        cli=podman,
        docker_host=f"unix://{socket}",
        env={"CONTAINERS_CONF": str(containers_conf())},
        managed_service=True,
    )
    if runtime.run("info", "--format", "{{.Host.OCIRuntime.Name}}", check=False).returncode:
        return None
    return runtime


def detect_runtime() -> Runtime | None:
    """The runtime to use, or None: DOCKER_HOST if it answers, else a Docker engine on its
    default socket, else podman (its API service is started later, by `connect`)."""
    managed = f"unix://{_podman_dir() / 'podman.sock'}"
    wanted = os.environ.get("DOCKER_HOST") or _DEFAULT_DOCKER_HOST
    if wanted != managed:
        version = _api_answers(wanted)
        if version is not None:
            name = "podman" if _is_podman(version) else "docker"
            cli = shutil.which(name) or name
            return Runtime(name=name, cli=cli, docker_host=wanted)
    return _managed_podman()


def require_runtime() -> Runtime:
    runtime = detect_runtime()
    if runtime is None:
        raise EoschaosError(NO_RUNTIME_FIX)
    return runtime


def _ensure_api_service(runtime: Runtime, timeout: float = 30.0) -> None:
    """Start `podman system service` on eoschaos' socket unless it already answers.

    One service per machine, shared by every eoschaos process (like a Docker daemon); a file
    lock keeps two processes from starting two. `stop_api_service` (and cleanup) ends it.
    """
    if _api_answers(runtime.docker_host) is not None:
        return
    directory = _podman_dir()
    with open(directory / "service.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _api_answers(runtime.docker_host) is not None:
            return
        socket = Path(runtime.docker_host.removeprefix("unix://"))
        socket.unlink(missing_ok=True)
        processes.spawn(
            API_PROCESS,
            [runtime.cli, "system", "service", "--time=0", runtime.docker_host],
            directory / "service.log",
            directory / "pids",
            env={**os.environ, **runtime.env},
        )
        deadline = time.monotonic() + timeout
        while _api_answers(runtime.docker_host) is None:
            if time.monotonic() > deadline:
                raise EoschaosError(
                    f"podman's API service did not answer at {runtime.docker_host} within "
                    f"{timeout:.0f}s; see {directory / 'service.log'}"
                )
            time.sleep(0.1)


def stop_api_service() -> bool:
    """Stop the podman API service eoschaos started, if it runs. True if one was stopped."""
    pid_dir = _podman_dir() / "pids"
    stopped = False
    for proc in processes.read_pid_files(pid_dir):
        if proc.name == API_PROCESS:
            stopped = proc.alive()
            processes.terminate(proc, timeout=10)
            processes.remove_pid_file(pid_dir, proc.name)
    return stopped


def connect(runtime: Runtime) -> None:
    """Make the runtime's API answer and point testcontainers at it (process-wide settings).

    `/.dockerenv` exists on our machines, which makes testcontainers believe it runs inside a
    container and look for a gateway; the host override and docker_host connection mode stop
    that. testcontainers reads these at import, so its config object is set as well.
    """
    if runtime.managed_service:
        _ensure_api_service(runtime)
    settings = {
        "DOCKER_HOST": runtime.docker_host,
        "TESTCONTAINERS_RYUK_DISABLED": "true",
        "TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
        "TESTCONTAINERS_CONNECTION_MODE": "docker_host",
    }
    os.environ.update(settings)
    from testcontainers.core.config import ConnectionMode, testcontainers_config

    testcontainers_config.ryuk_disabled = True
    testcontainers_config.tc_host_override = "127.0.0.1"
    testcontainers_config.connection_mode_override = ConnectionMode.docker_host


def setup_podman() -> str:
    """Write eoschaos' containers.conf and prove podman works with it (scripts/setup_podman.sh)."""
    runtime = _managed_podman()
    if runtime is None:
        conf = containers_conf()
        raise EoschaosError(
            f"podman does not work with CONTAINERS_CONF={conf}; run "
            f"`CONTAINERS_CONF={conf} podman info` to see why"
        )
    info = runtime.run("info", "--format", "{{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}}")
    return f"podman ready ({info.stdout.strip()}), CONTAINERS_CONF={runtime.env['CONTAINERS_CONF']}"
