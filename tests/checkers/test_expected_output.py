"""aggregate.expected-output: an aggregating pipeline's last value per output key against what
its user's --expect function computed from the committed input (rows the harness recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eoschaos.checkers.verdict import check_run
from eoschaos.contract.checks import Evidence, needing
from eoschaos.contract.history import END_EXPECTED, HistoryWriter
from eoschaos.testing import RunShape, generate

CHECK = "aggregate.expected-output"
COUNTS = {"partition-0": '{"count":256}', "partition-1": '{"count":256}'}


def aggregating_run(spark, run_dir: Path, expected: dict, results: dict) -> Path:
    """A synthetic run whose manifest names an --expect function, with its recorded rows."""
    run = generate(spark, run_dir, RunShape(), parquet=False)
    manifest = json.loads((run.run_dir / "run.json").read_text())
    del manifest["capabilities"]  # judged as a byo run declares, not as the generator's copy
    manifest.update(workload="byo", expect="counts.py:per_partition")
    (run.run_dir / "run.json").write_text(json.dumps(manifest))
    with HistoryWriter(run.run_dir, END_EXPECTED) as history:
        for f, rows in (("expected", expected), ("result", results)):
            for key, value in rows.items():
                params = json.dumps({"key": key, "value": value})
                at = run.shape.start  # within the synthetic run, as a real end row would be
                history.record("end", "ok", f, topic="t", params=params, time=at)
    return run.run_dir


def test_results_equal_to_the_expected_output_pass(spark, tmp_path):
    verdict = check_run(spark, aggregating_run(spark, tmp_path, COUNTS, COUNTS), lineage=False)
    assert (verdict["checks"][CHECK]["verdict"], verdict["verdict"]) == ("PASS", "PASS")


def test_a_result_that_differs_from_the_expected_one_fails_naming_the_key(spark, tmp_path):
    doubled = {**COUNTS, "partition-1": '{"count":311}'}
    verdict = check_run(spark, aggregating_run(spark, tmp_path, COUNTS, doubled), lineage=False)
    check = verdict["checks"][CHECK]
    assert (check["verdict"], check["count"]) == ("FAIL", 1)
    assert check["examples"] == [
        {"key": "partition-1", "expected": '{"count":256}', "actual": '{"count":311}'}
    ]


@pytest.mark.parametrize("side", ["expected", "result"])
def test_a_key_on_one_side_only_fails(spark, tmp_path, side):
    extra = {**COUNTS, "partition-9": '{"count":1}'}
    expected, results = (extra, COUNTS) if side == "expected" else (COUNTS, extra)
    check = check_run(spark, aggregating_run(spark, tmp_path, expected, results), lineage=False)[
        "checks"
    ][CHECK]
    assert (check["verdict"], check["count"]) == ("FAIL", 1)
    assert check["examples"][0]["key"] == "partition-9"


def test_an_aggregating_run_does_not_follow_input_ids_into_its_output(spark, tmp_path):
    verdict = check_run(spark, aggregating_run(spark, tmp_path, COUNTS, COUNTS), lineage=False)
    assert set(needing(Evidence.OUTPUT_COPIES)) <= set(verdict["not_applicable"])
    assert "delivery.duplicate-input" in verdict["checks"]
