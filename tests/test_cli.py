"""`eoschaos cluster up/down`, `cleanup` and Ctrl-C, driven from outside as a user would."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eoschaos.clusters import kafka_dist, processes

pytestmark = pytest.mark.cluster


def started(run_dir: Path) -> list[processes.ManagedProcess]:
    return processes.read_history(run_dir / "pids")


def test_cluster_up_prints_its_json_and_leaves_it_running_until_cluster_down(run_dir, eoschaos):
    up = eoschaos("cluster", "up", "--run-dir", str(run_dir))
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    assert info["run_dir"] == str(run_dir.resolve())
    assert info["kafka_version"] == kafka_dist.DEFAULT_KAFKA_VERSION
    assert len(info["bootstrap_servers"].split(",")) == 3
    assert info["broker_ids"] == [1, 2, 3]
    assert {"toxiproxy_api", "metadata_version", "transaction_version"} <= info.keys()
    assert all(p.alive() for p in started(run_dir))

    down = eoschaos("cluster", "down", str(run_dir))
    assert down.returncode == 0, down.stderr
    assert len(started(run_dir)) == 4
    assert not any(p.alive() for p in started(run_dir))
    assert (run_dir / "nodes" / "1" / "logs" / "server.log").exists()


def test_ctrl_c_while_starting_stops_everything_already_started(run_dir):
    proc = subprocess.Popen(
        [sys.executable, "-m", "eoschaos.cli", "cluster", "up", "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "started 3 brokers" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err.splitlines()[-1]
    assert len(started(run_dir)) == 4
    assert not any(p.alive() for p in started(run_dir))


def test_cleanup_without_arguments_stops_runs_that_were_never_stopped(
    run_dir, private_cache, eoschaos
):
    env = private_cache("kafka", "toxiproxy")  # a private run registry: only this run is in it
    assert eoschaos("cluster", "up", "--run-dir", str(run_dir), env=env).returncode == 0
    # `cluster up` has exited: from here on the cluster is what a crashed harness leaves behind
    cleanup = eoschaos("cleanup", env=env)
    assert cleanup.returncode == 0, cleanup.stderr
    assert "4 processes stopped in 1 run dirs" in cleanup.stdout
    assert not any(p.alive() for p in started(run_dir))
