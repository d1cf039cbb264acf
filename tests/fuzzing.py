"""One Hypothesis test, twice: a few examples in CI and many nightly (`pytest -m chaos`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings


def in_ci_and_nightly(
    body: Callable[..., None], ci: int, nightly: int, **strategies: Any
) -> tuple[Any, Any]:
    """`body` given `strategies`, bounded to `ci` examples, and a chaos-marked twin of `nightly`."""

    def bounded(examples: int) -> Any:
        return settings(
            max_examples=examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )(given(**strategies)(body))

    return bounded(ci), pytest.mark.chaos(bounded(nightly))
