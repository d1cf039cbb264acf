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
    HUNT_FILE,
    MINIMAL_DIR,
    HuntPlan,
    hunt_summary,
    next_seed,
    run_hunt,
    shrink,
)
from eoschaos.matrix.triage import KNOWN, TriageRule, load_rules
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


def test_the_workloads_take_turns_a_seed_each_so_that_no_two_draws_share_a_schedule():
    plan = HuntPlan(workloads=("kip447", "streams", "copier"))
    assert [plan.workload_of(seed) for seed in range(1, 8)] == [
        *("kip447", "streams", "copier") * 2,
        "kip447",
    ]


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
        (HuntPlan(), -1, "--hours must be 0"),
        (HuntPlan(), 0, "it has none; pass the --out of a hunt"),
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


def _fail_draw(out, seed: int, workload: str, faults: tuple[str, ...], failed: tuple[str, ...]):
    """A FAIL draw's row, its run dir holding the schedule of `faults`."""
    run_dir = f"runs/hunt-{workload}-k4.4.0-s{seed}"
    (out / run_dir).mkdir(parents=True)
    targets = {"broker": "broker:1", "instance": "instance:0", "cluster": "all"}
    events = [
        FaultEvent(10.0 * n, fault, targets[CATALOGUE[fault].scope], 6.0)
        for n, fault in enumerate(faults, 1)
    ]
    write_schedule(out / run_dir / SCHEDULE_FILE, events)
    return {
        "key": f"hunt-{workload}@4.4.0#s{seed}",
        "workload": workload,
        "mode": "eos",
        "kafka_version": "4.4.0",
        "seed": seed,
        "run_dir": run_dir,
        "verdict": "FAIL",
        "failed": {check: {"count": 1} for check in failed},
    }


def test_a_known_stale_endtxn_fail_of_kip447_is_expected_and_anything_beside_it_untriaged(
    tmp_path,
):
    rows = [
        _fail_draw(tmp_path, 1, "kip447", ("pause", "stale-endtxn"), ("fencing.stale-commit",)),
        # a check KAFKA-17754 does not explain, failed in the same schedule
        _fail_draw(tmp_path, 2, "kip447", ("stale-endtxn",), ("liveness.unseen",)),
        # the same check, without the fault that explains it
        _fail_draw(tmp_path, 3, "kip447", ("pause",), ("fencing.stale-commit",)),
        # Java's client on transaction version 2 has no excuse
        _fail_draw(tmp_path, 4, "streams", ("stale-endtxn",), ("delivery.duplicate",)),
    ]
    for row in rows:
        row["seconds"] = {"cluster": 10.0, "record": 70.0, "check": 10.0}
    summary = hunt_summary(rows, tmp_path)
    assert summary["hours"] == round(4 * 90 / 3600, 2)
    assert [f["triage"] for f in summary["failures"]] == ["expected", *["untriaged"] * 3]
    assert "KAFKA-17754" in summary["failures"][0]["why"]
    assert summary["triage"] == {"expected": 1, "untriaged": 3}


def test_a_reviewers_rules_triage_draws_by_key_before_the_known_rules(tmp_path):
    rules_file = tmp_path / "triage.toml"
    rules_file.write_text(
        '[[rule]]\ntriage = "harness bug"\nwhy = "our seeder, docs/findings.md"\n'
        'draws = ["hunt-kip447@4.4.0#s1", "hunt-streams@4.4.0#s4"]\n'
    )
    rules = load_rules(rules_file)
    assert rules[1:] == KNOWN
    rows = [
        _fail_draw(tmp_path, 1, "kip447", ("stale-endtxn",), ("delivery.lost",)),
        _fail_draw(tmp_path, 4, "streams", ("kill",), ("delivery.duplicate",)),
    ]
    summary = hunt_summary(rows, tmp_path, rules)
    assert summary["triage"] == {"harness bug": 2}
    assert {f["why"] for f in summary["failures"]} == {"our seeder, docs/findings.md"}


def test_the_summary_counts_each_fault_drawn_and_how_often_it_took_effect(tmp_path):
    rows = [_fail_draw(tmp_path, seed, "kip447", ("crash",), ("delivery.lost",)) for seed in (1, 2)]
    effects = [
        [("crash", {"took_effect": True}), ("crash-in-commit", {"took_effect": False})],
        [("crash-in-commit", {"instance": 0, "took_effect": True}), ("kill", {})],
    ]
    for row, faults in zip(rows, effects, strict=True):
        timeline = {"faults": [{"f": f, "params": json.dumps(p)} for f, p in faults]}
        (tmp_path / row["run_dir"] / "verdict.json").write_text(json.dumps({"timeline": timeline}))
    assert hunt_summary(rows, tmp_path)["faults"] == {
        "crash": {"drawn": 1, "took_effect": 1},
        "crash-in-commit": {"drawn": 2, "took_effect": 1},
        "kill": {"drawn": 1, "took_effect": 1},  # no word of its effect: it took effect
    }


def test_a_rule_by_faults_and_checks_matches_only_when_both_hold():
    rule = TriageRule("client bug", "x", faults=("kill", "pause"), checks=("delivery.lost",))
    assert rule.matches("k", "copier", {"kill", "pause", "reset"}, {"delivery.lost"})
    assert not rule.matches("k", "copier", {"kill"}, {"delivery.lost"})
    assert not rule.matches("k", "copier", {"kill", "pause"}, {"delivery.lost", "x.y"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[rule]\n", "cannot read it as TOML"),
        ('[[rule]]\ntriage = "bad"\nwhy = "w"\ndraws = ["d"]\n', "write one of"),
        ('[[rule]]\ntriage = "expected"\ndraws = ["d"]\n', 'write why = "..."'),
        ('[[rule]]\ntriage = "expected"\nwhy = "w"\n', "it would match every FAIL"),
        ('[[rule]]\ntriage = "expected"\nwhy = "w"\nfaults = ["nope"]\n', "unknown fault"),
        ('[[rule]]\ntriage = "expected"\nwhy = "w"\nchecks = ["nope"]\n', "unknown check"),
        ('[[rule]]\ntriage = "expected"\nwhy = "w"\nfault = ["kill"]\n', "unknown key"),
        ('[[rule]]\ntriage = "expected"\nwhy = "w"\ndraws = "d"\n', "list of strings"),
    ],
)
def test_a_triage_file_with_a_mistake_is_refused_naming_its_rule(text, message, tmp_path):
    path = tmp_path / "triage.toml"
    path.write_text(text)
    with pytest.raises(EoschaosError, match=message):
        load_rules(path)


def test_hours_0_rewrites_hunt_json_with_the_triage_and_exits_1_only_for_an_untriaged_fail(
    eoschaos, tmp_path
):
    out = tmp_path / "night"
    rows = [_fail_draw(out, 1, "kip447", ("stale-endtxn",), ("fencing.stale-commit",))]
    rows.append(_fail_draw(out, 2, "copier", ("kill",), ("delivery.duplicate",)))
    (out / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    before = eoschaos("hunt", "--hours", "0", "--out", str(out))
    assert before.returncode == 1, before.stderr
    assert "2 FAIL (1 expected, 1 untriaged)" in before.stderr
    rules = tmp_path / "triage.toml"
    rules.write_text(
        '[[rule]]\ntriage = "broker bug"\nwhy = "read"\ndraws = ["hunt-copier@4.4.0#s2"]\n'
    )
    after = eoschaos("hunt", "--hours", "0", "--out", str(out), "--triage", str(rules))
    assert after.returncode == 0, after.stderr
    summary = json.loads((out / HUNT_FILE).read_text())
    assert summary["triage"] == {"expected": 1, "broker bug": 1}
    assert not (out / "clusters").exists()  # nothing was started


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
