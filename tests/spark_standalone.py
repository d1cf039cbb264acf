"""A real Spark standalone cluster on loopback, started from the pyspark distribution.

The pip package ships `bin/spark-class` and the jars but no `sbin/start-master.sh`, so the
master and the workers are started as their classes, each in a session of its own (so a stop
takes the executors the worker started with it). Everything binds 127.0.0.1: SPARK_LOCAL_IP
places the web UIs, the REST submission server is off. Used by the standalone tests and by
scripts/bench_checkers.py --standalone-workers.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

LOOPBACK = "127.0.0.1"
SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


@dataclass
class StandaloneSpark:
    """A master and `workers` workers of `cores` cores and `memory` each, logs under `home`."""

    home: Path
    workers: int = 1
    cores: int = 1
    memory: str = "2g"
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    # Workers (and so their executors) see an empty directory here, as a worker on a machine
    # without this filesystem would: a mount namespace of their own with a tmpfs over it.
    hidden_from_workers: Path | None = None
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def start(self) -> StandaloneSpark:
        self.home.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.ui_port)],
            )
            self._await(lambda state: state.get("status") == "ALIVE", "the master to lead")
            for worker in range(self.workers):
                self._spawn(
                    f"worker-{worker}",
                    "org.apache.spark.deploy.worker.Worker",
                    [
                        *("--host", LOOPBACK, "--webui-port", str(free_port())),
                        *("--cores", str(self.cores), "--memory", self.memory),
                        *("--work-dir", str(self.home / f"worker-{worker}"), self.url),
                    ],
                    hide=self.hidden_from_workers,
                )
            self._await(
                lambda state: state.get("aliveworkers") == self.workers,
                f"{self.workers} worker(s) to register",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict:
        """The master's own view (its web UI's JSON): status, workers, applications."""
        url = f"http://{LOOPBACK}:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    def _spawn(
        self, name: str, main_class: str, arguments: list[str], hide: Path | None = None
    ) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_LOG_DIR": str(self.home),
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        }
        command = [str(SPARK_HOME / "bin" / "spark-class"), main_class, *arguments]
        if hide is not None:
            mount = f'mount -t tmpfs eoschaos-hidden {shlex.quote(str(hide))} && exec "$@"'
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh"]
            command += [str(SPARK_HOME / "bin" / "spark-class"), main_class, *arguments]
        with (self.home / f"{name}.log").open("wb") as log:
            self.processes.append(
                subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )

    def _await(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in self.processes):
                raise RuntimeError(f"a Spark standalone process exited; see {self.home}/*.log")
            try:
                if ready(self.state()):
                    return
            except OSError:
                pass  # the UI is not up yet
            time.sleep(0.3)
        raise RuntimeError(f"timed out after {START_TIMEOUT_S:.0f} s waiting for {what}")
