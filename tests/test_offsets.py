"""The harness's group queries where the cluster is slow to answer."""

from __future__ import annotations

import socket
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from eoschaos.workloads.harness.offsets import (
    admin_for,
    end_offsets,
    members_with_partitions,
    not_yet,
)


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


class _AdminWithLeaderMoving:
    """Answers like AdminClient for one partition, whose first offsets answer is `code`."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.asked = 0

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        described = SimpleNamespace(error=None, partitions={0: None})
        return SimpleNamespace(topics={topic: described})

    def list_offsets(self, request: dict, **_options) -> dict:
        self.asked += 1
        answer: Future = Future()
        if self.asked == 1:
            answer.set_exception(KafkaException(KafkaError(self.code)))
        else:
            answer.set_result(SimpleNamespace(offset=42))
        return {tp: answer for tp in request}


def test_an_end_offsets_query_asks_again_while_a_partitions_leader_moves():
    """A CI run failed at the observer's last end-offsets query, ~4 s after a broker restart."""
    admin = _AdminWithLeaderMoving(KafkaError.NOT_LEADER_FOR_PARTITION)
    assert end_offsets(admin, "output", committed=True) == {0: 42}
    assert admin.asked == 2


def test_an_end_offsets_error_that_is_not_transient_is_raised_at_once():
    admin = _AdminWithLeaderMoving(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        end_offsets(admin, "output", committed=True)
    assert admin.asked == 1
