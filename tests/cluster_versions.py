"""The Kafka versions the real-cluster tests run on, and the mark for tests that need only one."""

from __future__ import annotations

import os

import pytest

from eoschaos.clusters import kafka_dist

KAFKA_VERSIONS = os.environ.get(
    "EOSCHAOS_TEST_KAFKA_VERSIONS",
    f"{kafka_dist.DEFAULT_KAFKA_VERSION},{kafka_dist.LATEST_3X_VERSION}",
).split(",")

# For a test of what Kafka's version does not change (Toxiproxy's toxics, the nemesis' own
# bookkeeping): CI runs it on the first version, nightly (`pytest -m chaos`) on the others.
OTHER_VERSIONS_NIGHTLY = pytest.mark.parametrize(
    "session_cluster",
    [KAFKA_VERSIONS[0], *(pytest.param(v, marks=pytest.mark.chaos) for v in KAFKA_VERSIONS[1:])],
    indirect=True,
)
