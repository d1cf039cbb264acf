"""The harness's group queries where the cluster is slow to answer."""

from __future__ import annotations

import socket

from eoschaos.workloads.harness.offsets import admin_for, members_with_partitions


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_group_describe_that_times_out_counts_as_no_members_yet():
    """wait_running polls this until its own deadline: a timeout is "not yet", not a crash."""
    admin = admin_for(f"127.0.0.1:{_unused_port()}")
    assert members_with_partitions(admin, "any-group", timeout=1.0) == 0
