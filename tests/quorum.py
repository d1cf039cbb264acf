"""Waiting on the KRaft quorum as the nodes themselves see it (Cluster.quorum_leader_seen_by)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from confluent_kafka import KafkaException

from eoschaos.clusters.admin import ClusterNotReady
from eoschaos.clusters.base import Cluster

T = TypeVar("T")


def new_leader_of(cluster: Cluster, nodes: Iterable[int], old: int) -> int | None:
    """The leader all of `nodes` follow, if they agree on one other than `old`."""
    seen = {cluster.quorum_leader_seen_by(n) for n in nodes}
    leader = seen.pop() if len(seen) == 1 else -1
    return leader if leader not in (-1, old) else None


def until(probe: Callable[[], T], timeout: float) -> T | None:
    """Poll `probe` every 0.5 s until it returns something truthy or `timeout` passes. A probe
    that fails the way a cluster mid-election or a file mid-rewrite fails is asked again; any
    other error (a bug in the probe) is raised, not taken for "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except (OSError, ValueError, KafkaException, ClusterNotReady):
            value = None
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.5)
