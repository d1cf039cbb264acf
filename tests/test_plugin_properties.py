"""`eoschaos_run` attaches its verdict to the pytest report, so `--junitxml` carries it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.cluster


def test_a_run_s_checks_and_report_are_recorded_as_test_properties(eoschaos_run, request):
    verdict = eoschaos_run(mode="eos", duration=8, records=1000, seed=2)
    properties = dict(request.node.user_properties)
    run = next(key.removesuffix(".verdict") for key in properties if key.endswith(".verdict"))
    assert properties[f"{run}.verdict"] == verdict["verdict"]
    assert properties[f"{run}.report"] == verdict["report"]
    for name, check in verdict["checks"].items():
        assert properties[f"{run}.{name}"] == f"{check['verdict']} ({check['count']})"
