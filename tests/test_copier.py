"""Kafka's copier as a workload: how each mode starts its copiers (no cluster; the scenarios and
the nightly matrix run them)."""

from __future__ import annotations

from pathlib import Path

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract import instance_env
from eoschaos.workloads.copier import GROUP_MODE, CopierPipeline
from eoschaos.workloads.registry import KINDS


def _argv(mode: str, instance: int = 4) -> list[str]:
    pipeline = CopierPipeline(KafkaDistribution("4.4.0", Path("/libs")), mode, 3, "txn")
    env = {
        instance_env.BOOTSTRAP_SERVERS: "127.0.0.1:9092",
        instance_env.INPUT_TOPIC: "in",
        instance_env.OUTPUT_TOPIC: "out",
        instance_env.GROUP_ID: "group",
        instance_env.TRANSACTIONAL_ID: "txn-1",
        instance_env.LOG_DIR: "/logs",
    }
    return pipeline.launch(instance, 0, env).argv


def test_an_eos_copier_is_assigned_its_partition_by_hand_outside_the_group():
    argv = _argv("eos")
    assert argv[argv.index("--input-partition") + 1] == "1"
    assert "--group-mode" not in argv and "--use-group-metadata" not in argv
    assert not CopierPipeline(KafkaDistribution("4.4.0", Path("/l")), "eos", 3, "t").joins_group


def test_a_group_mode_copier_subscribes_and_sends_offsets_with_the_groups_metadata():
    argv = _argv(GROUP_MODE)
    assert {"--group-mode", "--use-group-metadata"} <= set(argv)
    assert argv[argv.index("--consumer-group") + 1] == "group"
    assert CopierPipeline(KafkaDistribution("4.4.0", Path("/l")), GROUP_MODE, 3, "t").joins_group


def test_the_group_mode_is_a_correct_mode_and_no_fencing_a_known_bad_one():
    assert KINDS["copier"].correct_modes == ("eos", GROUP_MODE)
    assert "no-fencing" not in KINDS["copier"].correct_modes
