"""Tonight against earlier nights: regressions, rates and version changes (no cluster)."""

from __future__ import annotations

import json

from eoschaos.contract.rundir import write_manifest
from eoschaos.matrix.index import render_index
from eoschaos.matrix.nights import previous_nights, trends, version_changes
from eoschaos.matrix.runner import RUNS_DIR, run_dirs, versions_in_play


def row(cell: str, met: bool, seed: int = 1, **extra) -> dict:
    return {
        "key": f"{cell}@4.3.1#s{seed}",
        "name": cell,
        "kafka_version": "4.3.1",
        "seed": seed,
        "expected": "PASS",
        "verdict": "PASS" if met else "FAIL",
        "met_expectation": met,
        **extra,
    }


def test_a_cell_that_met_last_night_and_not_tonight_is_newly_unmet():
    trend = trends([row("a", False)], [[row("a", True)]])[("a", "4.3.1")]
    assert trend.change == "newly unmet"


def test_a_cell_that_recovers_is_newly_met():
    assert trends([row("a", True)], [[row("a", False)]])[("a", "4.3.1")].change == "newly met"


def test_one_unmet_seed_makes_the_cell_unmet_that_night():
    tonight = [row("a", True, seed=1), row("a", False, seed=2)]
    assert trends(tonight, [[row("a", True)]])[("a", "4.3.1")].change == "newly unmet"


def test_the_rate_counts_every_night_that_ran_the_cell():
    earlier = [[row("a", True)], [row("b", True)], [row("a", False)]]
    trend = trends([row("a", True)], earlier)[("a", "4.3.1")]
    assert (trend.nights_met, trend.nights_run) == (2, 3)
    assert trend.change == "newly met"  # against the latest night that ran it


def test_a_directory_of_nights_is_read_in_name_order(tmp_path):
    for night, met in (("2026-11-02", False), ("2026-11-01", True)):
        (tmp_path / night).mkdir()
        (tmp_path / night / "results.jsonl").write_text(json.dumps(row("a", met)) + "\n")
    nights = previous_nights([tmp_path])
    assert [n[0]["met_expectation"] for n in nights] == [True, False]


def test_a_version_that_changed_since_the_latest_night_is_listed():
    tonight = [row("a", True, versions={"librdkafka": "2.16.0", "spark": "4.1.0"})]
    earlier = [[row("a", True, versions={"librdkafka": "2.15.0", "spark": "4.1.0"})]]
    assert version_changes(tonight, earlier) == ["librdkafka 2.15.0 → 2.16.0"]


def test_the_index_marks_the_regression_and_lists_what_was_not_run():
    tonight = [row("a", False, report="runs/a/report.html")]
    page = render_index(tonight, trends(tonight, [[row("a", True)]]), [], ["b@4.3.1#s1"])
    assert "<li class='regression'>a on Kafka 4.3.1: newly unmet" in page
    assert "b@4.3.1#s1" in page[page.index("id='not-run'") :]
    assert "href='runs/a/report.html'" in page


def test_a_streams_cell_run_names_its_java_client_among_the_versions_compared(tmp_path):
    manifest = {"kafka_version": "4.3.1", "client_version": "3.9.2", "versions": {"spark": "4"}}
    write_manifest(tmp_path, manifest)
    versions = versions_in_play(tmp_path)
    assert versions["kafka_client"] == "3.9.2" and versions["kafka"] == "4.3.1"
    tonight = [row("s", True, versions=versions)]
    earlier = [[row("s", True, versions={**versions, "kafka_client": "4.3.1"})]]
    assert version_changes(tonight, earlier) == ["kafka_client 4.3.1 → 3.9.2"]


def test_a_cell_run_without_a_java_client_names_none(tmp_path):
    write_manifest(tmp_path, {"kafka_version": "4.3.1", "versions": {"librdkafka": "2.12.1"}})
    assert "kafka_client" not in versions_in_play(tmp_path)


def test_run_dirs_are_a_run_dir_itself_and_a_matrix_outputs_cell_runs(tmp_path):
    out, run = tmp_path / "night", tmp_path / "one-run"
    for cell in ("b-s2", "a-s1"):
        (out / RUNS_DIR / cell).mkdir(parents=True)
    run.mkdir()
    assert run_dirs([out, run]) == [out / RUNS_DIR / "a-s1", out / RUNS_DIR / "b-s2", run]
