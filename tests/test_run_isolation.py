"""No run can be entered by another run's clients. A client of run A -- an orphan, or a user's
process still pointing at the old address -- stays alive while run B runs on the same cluster
(the same ports): B's verdict is unaffected and A's client touches none of B's topics, because
every run names its topics, group and transactional ids with a token of its own."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoschaos.clusters import admin
from eoschaos.config import RunConfig
from eoschaos.run import record_on_cluster

STALE_CLIENT = Path(__file__).parent / "stale_client.py"
STALE_RECORDS = 20


def _copied(count_file: Path) -> int:
    text = count_file.read_text().strip() if count_file.exists() else ""
    return int(text) if text else -1


@pytest.mark.cluster
def test_a_stale_client_of_an_earlier_run_cannot_enter_a_later_one(
    eoschaos_cluster, eoschaos_judge, tmp_path
):
    options = {"workload": "kip447", "duration": 6, "records": 1000, "seed": 3}
    earlier, later = RunConfig.from_options(**options), RunConfig.from_options(**options)
    bootstrap = eoschaos_cluster.bootstrap
    # run A's topics, with records in its input: its client is shown working first
    a = earlier.pipeline
    client = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(t, num_partitions=a.partitions, replication_factor=3)
        for t in (a.input_topic, a.output_topic)
    ]
    admin.create_topics(client, topics, 30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(STALE_RECORDS):
        producer.produce(a.input_topic, f"value-{i}", str(i))
    producer.flush(30)
    count_file = tmp_path / "stale-copied"
    stale = subprocess.Popen(
        [
            sys.executable,
            str(STALE_CLIENT),
            bootstrap,
            a.input_topic,
            a.output_topic,
            a.group,
            str(count_file),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while _copied(count_file) < STALE_RECORDS:
            assert stale.poll() is None, "the stale client died"
            assert time.monotonic() < deadline, "the stale client never copied its run's input"
            time.sleep(0.2)
        run_dir = tmp_path / "later"
        run_dir.mkdir()
        record_on_cluster(later, run_dir, eoschaos_cluster.run_dir)
        assert stale.poll() is None, "the stale client must live through the later run"
        verdict = eoschaos_judge.judge(run_dir)[0]
    finally:
        stale.kill()
        stale.wait()
    assert _copied(count_file) == STALE_RECORDS, "the stale client copied something of run B"
    failed = {name: c["count"] for name, c in verdict["checks"].items() if c["verdict"] == "FAIL"}
    assert verdict["verdict"] == "PASS", failed
