"""One Spark session for every checker test: starting Spark costs seconds, checking milliseconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from eoschaos.checkers.spark import QUICK_JIT, spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session(app="eoschaos-tests", java_options=QUICK_JIT)
    yield session
    session.stop()
