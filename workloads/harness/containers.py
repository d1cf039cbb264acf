"""A pipeline instance as a container of the user's image (`--pipeline-image`).

The runtime's CLI runs each container in the foreground (`podman run` or `docker run`, no API
client in between), so the supervisor keeps one process per instance as it does for a command:
its log is the container's output, its exit status the container's. Signals go through the
runtime, because the CLI's own would not reach a container it is only attached to: SIGKILL is
`kill`, SIGSTOP `pause` (the cgroup freezer: a zombie), SIGCONT `unpause`, SIGTERM `kill
--signal TERM` (queued while it is paused, as for a process).

Networking is the host's: every lane an instance connects through (Toxiproxy's, on either
backend) listens on 127.0.0.1, as an instance process sees it, and a container on a network of
its own could not reach loopback. The container binds nothing for eoschaos.

What outlives it is found as a process's is: the container carries the run's label (`eoschaos
cleanup RUN_DIR` removes it) and the owner variable in its environment (its processes are
strays of the workload dir on the host, stopped with the run).
"""

from __future__ import annotations

import shlex
import signal
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.instance_env import OWNER_DIR
from eoschaos.workloads.harness.supervisor import Launch

if TYPE_CHECKING:  # the runtime's modules load the Docker SDK: only runs with an image pay it
    from eoschaos.clusters.container_runtime import Runtime

CONTRACT_PREFIX = "EOSCHAOS_"  # the variables of docs/byo.md, passed into every container
SIGNAL_TIMEOUT_S = 30.0
# The runtime's subcommand that delivers each signal the supervisor and the nemesis send
_SIGNAL_ARGS = {
    signal.SIGKILL: ("kill", "--signal", "KILL"),
    signal.SIGTERM: ("kill", "--signal", "TERM"),
    signal.SIGSTOP: ("pause",),
    signal.SIGCONT: ("unpause",),
}


@dataclass(frozen=True)
class ContainerSignaller:
    """Signals one named container through the runtime (supervisor.Signaller)."""

    runtime: Runtime
    name: str

    def send(self, sig: signal.Signals) -> bool:
        args = _SIGNAL_ARGS[sig]
        done = self.runtime.run(*args, self.name, check=False, timeout=SIGNAL_TIMEOUT_S)
        return done.returncode == 0


def require_image(image: str) -> Runtime:
    """The runtime that has `image`; EoschaosError (one line) when no runtime answers or it has
    no such image: bad input, found before anything starts."""
    from eoschaos.clusters.container_runtime import require_runtime

    runtime = require_runtime()
    if runtime.run("image", "inspect", image, check=False).returncode != 0:
        raise EoschaosError(
            f"--pipeline-image {image!r}: {runtime.name} has no such image; build or pull it "
            f"first (`{runtime.name} images` lists what it has)"
        )
    return runtime


def container_arguments(command: str, env: dict[str, str]) -> list[str]:
    """--command as the container's arguments: split as a shell would, with $NAME and ${NAME}
    of the contract's variables put in, since an image need not have a shell to do it."""
    contract = {name: value for name, value in env.items() if name.startswith(CONTRACT_PREFIX)}
    return [Template(word).safe_substitute(contract) for word in shlex.split(command)]


def container_launch(
    runtime: Runtime,
    image: str,
    command: str,
    name: str,
    workload_dir: Path,
    env: dict[str, str],
    extra_env: dict[str, str],
) -> Launch:
    """The foreground `run` of one instance's container, named `name` (unique in the run).

    The contract's variables, the run's extra ones and the owner marker are passed by name
    (`--env NAME`), their values taken from the CLI's environment rather than its command
    line. The workload dir is mounted at its own path, so EOSCHAOS_STATE_DIR and
    EOSCHAOS_LOG_DIR mean inside what they mean outside."""
    from eoschaos.clusters.containers_backend import RUN_LABEL

    passed = sorted(
        {n for n in env if n.startswith(CONTRACT_PREFIX)} | set(extra_env) | {OWNER_DIR}
    )
    owner = str(workload_dir.resolve())
    argv = [
        runtime.cli,
        "run",
        "--rm",
        "--name",
        name,
        "--network",
        "host",
        "--label",
        f"{RUN_LABEL}={owner}",
        "--volume",
        f"{owner}:{owner}",
        *[arg for variable in passed for arg in ("--env", variable)],
        image,
        *container_arguments(command, env),
    ]
    # the owner marker itself is set on the CLI's environment by the supervisor's spawn
    return Launch(argv, {**env, **runtime.env}, ContainerSignaller(runtime, name))


def container_name(workload_dir: Path, process: str) -> str:
    """A container name no other run's instance has: the run's digest, as its cluster's
    containers have, then the instance's process name (processor-<instance>.<incarnation>)."""
    from eoschaos.clusters.containers_backend import run_digest

    return f"eoschaos-{run_digest(workload_dir)}-{process}"
