"""The seeder against a real cluster: it holds its input back while told to (the fault schedule
running late), then sends the rest at its pace."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from eoschaos.clusters import kafka_dist
from eoschaos.clusters.process_backend import ProcessCluster
from eoschaos.workloads.harness.seeder import Seeder
from eoschaos.workloads.smoke import create_topic

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.parametrize(
        "session_cluster", [kafka_dist.DEFAULT_KAFKA_VERSION], indirect=True, scope="session"
    ),
]


def _send_times(run_dir: Path, type_: str) -> list[float]:
    lines = (run_dir / "history" / "seeder.jsonl").read_text().splitlines()
    return [e["time"] for e in map(json.loads, lines) if e["type"] == type_]


def test_a_held_seeder_sends_nothing_until_released_then_sends_every_record(
    cluster: ProcessCluster, tmp_path: Path
):
    topic = f"seed-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, partitions=2, replication=3)
    release_at = time.monotonic() + 2.0
    seeder = Seeder(
        cluster.bootstrap, tmp_path, {topic: 2}, 20, 1.0, hold=lambda: time.monotonic() < release_at
    )
    started = time.time()
    seeder.start()
    assert seeder.wait_reported(30)
    seeder.stop()
    sends = _send_times(tmp_path, "invoke")
    assert len(sends) == 20 and len(_send_times(tmp_path, "ok")) == 20
    assert min(sends) >= started + 1.9
    assert 1.9 <= seeder.held_s <= 2.5
