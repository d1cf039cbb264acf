"""The harness's group queries where the cluster is slow to answer."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import KafkaError

from eoschaos.workloads.harness.offsets import admin_for, members_with_partitions, not_yet


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_group_describe_that_times_out_counts_as_no_members_yet():
    """wait_running polls this until its own deadline: a timeout is "not yet", not a crash."""
    admin = admin_for(f"127.0.0.1:{_unused_port()}")
    assert members_with_partitions(admin, "any-group", timeout=1.0) == 0


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    ],
)
def test_a_group_coordinator_moving_means_ask_again(code):
    """Seen in CI: a describe right after a broker restart failed the run with NOT_COORDINATOR,
    which librdkafka does not flag as retriable."""
    assert not KafkaError(code).retriable()
    assert not_yet(KafkaError(code))


def test_a_group_that_does_not_exist_is_not_a_reason_to_wait():
    assert not not_yet(KafkaError(KafkaError.GROUP_ID_NOT_FOUND))
