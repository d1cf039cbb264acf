"""The nightly hunt's logic (eoschaos.matrix.hunt): what it draws, how it shrinks a FAIL, where
it resumes, what it reports. Its runs are `eoschaos run`s on a shared cluster, as a matrix's."""

from __future__ import annotations

import json

import pytest

from eoschaos.chaos.catalogue import CATALOGUE, FAULTS
from eoschaos.chaos.schedule import FaultEvent, load_schedule, write_schedule
from eoschaos.clusters.kafka_dist import DEFAULT_KAFKA_VERSION
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.rundir import SCHEDULE_FILE
from eoschaos.matrix.hunt import (
    DEFAULT_WORKLOADS,
    MINIMAL_DIR,
    HuntPlan,
    hunt_summary,
    next_seed,
    run_hunt,
    shrink,
)
from eoschaos.workloads.registry import KINDS


def _events(*faults: str) -> list[FaultEvent]:
    return [FaultEvent(10.0 * n, fault, "broker:1", 6.0) for n, fault in enumerate(faults, 1)]


def test_shrink_leaves_out_every_event_whose_absence_still_fails():
    tried = []

    def still_fails(candidate):
        tried.append([event.fault for event in candidate])
        return "kill" in {event.fault for event in candidate}

    kept = shrink(_events("pause", "kill", "latency", "reset"), still_fails, lambda: True)
    assert [event.fault for event in kept] == ["kill"]
    assert len(tried) == 4  # one run per event, the last first


def test_shrink_keeps_an_event_whose_absence_does_not_bring_the_failure_back():
    kept = shrink(_events("pause", "kill"), lambda candidate: False, lambda: True)
    assert [event.fault for event in kept] == ["pause", "kill"]


def test_shrink_tries_nothing_once_the_time_is_spent():
    def still_fails(candidate):
        raise AssertionError("no run once the hours are spent")

    assert len(shrink(_events("pause", "kill"), still_fails, lambda: False)) == 2


def test_a_hunt_resumes_at_the_seed_after_the_last_draw():
    rows = [{"seed": 1}, {"seed": 2}, {"seed": 7, "shrinking": "hunt-kip447@4.4.0#s2"}]
    assert next_seed(rows) == 3
    assert next_seed([]) == 1


def test_every_default_workload_is_drawn_in_its_correct_mode_under_the_catalogue_it_takes():
    plan = HuntPlan()
    for workload in DEFAULT_WORKLOADS:
        draw = plan.draw(workload, 5)
        config = draw.config("test")
        assert draw.options["mode"] == KINDS[workload].modes[0]
        lanes = KINDS[workload].instance_lanes
        taken = [f for f in FAULTS if lanes or not CATALOGUE[f].needs_lane]
        assert draw.options["faults"].split(",") == taken
        assert config.schedule(), workload
    assert (
        plan.draw("kip447", 5).config("a").schedule()
        != plan.draw("kip447", 6).config("a").schedule()
    )


@pytest.mark.parametrize(
    ("plan", "hours", "message"),
    [
        (HuntPlan(workloads=("nope",)), 1, "unknown workload 'nope'"),
        (HuntPlan(faults=("kill", "nope")), 1, "nope"),
        (HuntPlan(workloads=("byo",)), 1, "--workload byo needs --command"),
        (HuntPlan(), 0, "--hours must be more than 0"),
    ],
)
def test_bad_hunt_input_is_refused_before_anything_starts(plan, hours, message, tmp_path):
    with pytest.raises(EoschaosError, match=message):
        run_hunt(plan, tmp_path / "out", hours)
    assert not (tmp_path / "out").exists()


def test_a_fail_is_reported_with_its_minimal_schedule_and_the_command_that_replays_it(tmp_path):
    """Shrink tries are not draws; a passing draw is counted and not listed."""
    run_dir = tmp_path / "runs" / "hunt-streams-k4.4.0-s3"
    run_dir.mkdir(parents=True)
    write_schedule(run_dir / SCHEDULE_FILE, _events("pause", "kill"))
    (tmp_path / MINIMAL_DIR).mkdir()
    minimal = write_schedule(tmp_path / MINIMAL_DIR / f"{run_dir.name}.json", _events("kill"))
    draw = {"key": "hunt-streams@4.4.0#s3", "workload": "streams", "mode": "eos"}
    draw |= {"kafka_version": "4.4.0", "seed": 3, "run_dir": "runs/hunt-streams-k4.4.0-s3"}
    rows = [
        {**draw, "verdict": "FAIL", "failed": {"delivery.duplicate": {"count": 9}}},
        {**draw, "key": "x", "verdict": "FAIL", "failed": {}, "shrinking": draw["key"]},
        {**draw, "key": "y", "seed": 4, "verdict": "PASS", "failed": {}},
    ]
    summary = hunt_summary(rows, tmp_path)
    assert (summary["draws"], summary["per_workload"], summary["errors"]) == (2, {"streams": 2}, [])
    (failure,) = summary["failures"]
    assert failure["failed"] == ["delivery.duplicate"] and failure["faults_left"] == ["kill"]
    assert failure["shrunk"] is True
    assert failure["replay"].endswith(f"--seed 3 --schedule {minimal}")
    assert [event.fault for event in load_schedule(failure["schedule"])] == ["kill"]
    json.dumps(summary)  # hunt.json holds it as it is


@pytest.mark.chaos  # nightly: a real draw on a cluster of its own
def test_a_short_hunt_draws_judges_and_reports_on_a_real_cluster(eoschaos, tmp_path):
    out = tmp_path / "hunt"
    args = ["--hours", "0.001", "--workloads", "kip447", "--faults", "kill", "--duration", "15"]
    done = eoschaos("hunt", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr  # one draw, and a correct pipeline passes it
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    key = f"hunt-kip447@{DEFAULT_KAFKA_VERSION}#s1"
    assert (row["key"], row["mode"], row["verdict"]) == (key, "eos", "PASS")
    summary = json.loads((out / "hunt.json").read_text())
    assert (summary["draws"], summary["failures"], summary["errors"]) == (1, [], [])
