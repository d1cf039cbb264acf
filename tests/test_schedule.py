"""Fault schedules: random ones from a seed, explicit files, random targets, validation."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoschaos.chaos.catalogue import CATALOGUE, FAULTS, check_target, fixed_number, is_dynamic
from eoschaos.chaos.faults import UNITS
from eoschaos.chaos.schedule import (
    FIRST_FAULT_AT,
    INTENSITIES,
    QUIET_TAIL,
    RESERVED_HOLD_S,
    FaultEvent,
    expected_hold,
    load_schedule,
    parse_faults,
    random_schedule,
    resolve_random,
    validate_schedule,
    write_schedule,
)
from eoschaos.contract.errors import EoschaosError

BROKERS = [1, 2, 3]
fault_lists = st.lists(st.sampled_from(FAULTS), min_size=1, max_size=4, unique=True)
modest = settings(max_examples=40, deadline=None)


def validate(events: list[FaultEvent], duration: float = 60.0) -> None:
    validate_schedule(events, brokers=BROKERS, instances=3, duration=duration)


def kill(at: float, target: str = "broker:1", duration: float = 6.0) -> FaultEvent:
    return FaultEvent(at, "kill", target, duration)


def event(at: float, fault: str, target: str, duration: float | None = None) -> FaultEvent:
    spec = CATALOGUE[fault]
    return FaultEvent(at, fault, target, spec.duration if duration is None else duration)


# --- random schedules -------------------------------------------------------------------------


@modest
@given(faults=fault_lists, seed=st.integers(0, 2**32), duration=st.floats(10, 300))
def test_same_seed_gives_the_same_schedule(faults, seed, duration):
    first = random_schedule(faults, duration, seed, BROKERS, 3)
    assert first == random_schedule(faults, duration, seed, BROKERS, 3)


def test_different_seeds_give_different_schedules():
    schedules = [random_schedule(["kill", "crash"], 60, seed, BROKERS, 3) for seed in range(5)]
    assert any(schedule != schedules[0] for schedule in schedules[1:])


@modest
@given(faults=fault_lists, seed=st.integers(0, 2**32), duration=st.floats(10, 300))
def test_random_faults_do_not_overlap_and_end_before_the_quiet_tail(faults, seed, duration):
    schedule = random_schedule(faults, duration, seed, BROKERS, 3)
    for earlier, later in itertools.pairwise(schedule):
        assert earlier.at + expected_hold(earlier) < later.at
    for scheduled in schedule:
        assert scheduled.at >= FIRST_FAULT_AT
        assert scheduled.at + expected_hold(scheduled) <= duration - QUIET_TAIL


@modest
@given(faults=fault_lists, seed=st.integers(0, 2**32), instances=st.integers(1, 4))
def test_random_targets_are_catalogue_targets_on_existing_brokers_and_instances(
    faults, seed, instances
):
    for scheduled in random_schedule(faults, 300, seed, BROKERS, instances, partitions=4):
        assert scheduled.fault in faults
        check_target(scheduled.fault, scheduled.target)
        number = fixed_number(scheduled.target)
        if scheduled.target.startswith("broker:"):
            assert number in BROKERS
        elif scheduled.target.startswith("instance:"):
            assert number in range(instances)
        elif scheduled.target.startswith("leader:"):
            assert re.fullmatch(r"leader:input/[0-3]", scheduled.target)
        else:
            assert scheduled.target == "all" or is_dynamic(scheduled.target)


@modest
@given(faults=fault_lists, seed=st.integers(0, 2**32), intensity=st.sampled_from(list(INTENSITIES)))
def test_random_schedules_pass_validation(faults, seed, intensity):
    schedule = random_schedule(faults, 120, seed, BROKERS, 3, intensity=intensity)
    validate(schedule, duration=120)  # asserts by raising


def test_every_chosen_fault_appears_in_a_long_enough_run():
    schedule = random_schedule(list(FAULTS), 400, 7, BROKERS, 3)  # a cycle of 24 faults
    assert {scheduled.fault for scheduled in schedule} == set(FAULTS)


def test_random_broker_faults_hit_fixed_brokers_and_every_dynamic_target():
    targets = {
        scheduled.target.split("/")[0]
        for seed in range(20)
        for scheduled in random_schedule(["kill", "pause"], 120, seed, BROKERS, 3)
    }
    assert targets == {
        "broker:1",
        "broker:2",
        "broker:3",
        "coordinator",
        "group-coordinator",
        "controller",
        "leader:input",
    }


def test_ack_delays_hit_the_transaction_coordinator_more_often_than_other_faults():
    def coordinator_share(fault: str) -> float:
        targets = [
            e.target for seed in range(60) for e in random_schedule([fault], 60, seed, BROKERS, 3)
        ]
        return targets.count("coordinator") / len(targets)

    assert coordinator_share("latency") > 0.25 > coordinator_share("bandwidth")


def test_rolling_restart_targets_all_brokers_and_reserves_its_time():
    schedule = random_schedule(["rolling-restart", "crash"], 120, 3, BROKERS, 3)
    restarts = [i for i, scheduled in enumerate(schedule) if scheduled.fault == "rolling-restart"]
    assert restarts
    for index in restarts:
        assert schedule[index].target == "all"
        if index + 1 < len(schedule):
            assert schedule[index + 1].at >= schedule[index].at + RESERVED_HOLD_S["rolling-restart"]


def test_a_fault_too_long_for_the_run_is_skipped_and_the_others_still_run():
    schedule = random_schedule(["rolling-restart", "kill"], 30, 0, BROKERS, 3)
    assert schedule and {scheduled.fault for scheduled in schedule} == {"kill"}


@pytest.mark.parametrize("intensity", list(INTENSITIES))
def test_intensity_sets_the_gap_between_faults(intensity):
    low, high = INTENSITIES[intensity]
    schedule = random_schedule(
        ["kill", "crash", "latency"], 600, 11, BROKERS, 3, intensity=intensity
    )
    for earlier, later in itertools.pairwise(schedule):
        gap = later.at - (earlier.at + expected_hold(earlier))
        assert low - 0.01 <= gap <= high + 0.01


def test_higher_intensity_packs_more_faults_into_the_same_run():
    counts = [
        len(random_schedule(["kill", "crash"], 120, 5, BROKERS, 3, intensity=intensity))
        for intensity in ("low", "normal", "high")
    ]
    assert counts[0] < counts[1] < counts[2]


def test_unknown_intensity_is_refused_with_the_choices():
    with pytest.raises(EoschaosError, match="unknown intensity 'wild'; choose from low, normal"):
        random_schedule(["kill"], 60, 0, BROKERS, 3, intensity="wild")


# --- names ------------------------------------------------------------------------------------


def test_every_catalogue_fault_name_is_accepted():
    assert parse_faults(",".join(FAULTS)) == list(FAULTS)


def test_unknown_fault_name_is_refused_with_the_choices():
    with pytest.raises(EoschaosError, match="unknown fault 'explode'; choose from kill"):
        parse_faults("kill,explode")


@pytest.mark.parametrize(
    ("fault", "duration", "hold"),
    [("kill", 6.0, 6.0), ("crash", 0.0, 0.0), ("rolling-restart", 0.0, 30.0), ("zombie", 3, 3)],
)
def test_expected_hold_is_the_duration_or_the_time_reserved_for_the_fault(fault, duration, hold):
    assert expected_hold(FaultEvent(0, fault, "x", duration)) == hold


# --- schedule files ---------------------------------------------------------------------------


def write_entries(path: Path, entries: object) -> Path:
    path.write_text(json.dumps(entries))
    return path


def test_a_written_schedule_loads_back_equal(tmp_path):
    events = [
        FaultEvent(3.0, "kill", "broker:2", 6.0),
        FaultEvent(4.5, "latency", "coordinator", 6.0, {"latency_ms": 2000, "jitter_ms": 0}),
        FaultEvent(9.0, "zombie", "instance:1", 8.5),
        FaultEvent(20.0, "split", "leader:input/3", 5.0, {"mode": "fail-fast"}),
        FaultEvent(30.0, "rolling-restart", "all", 0.0),
    ]
    assert load_schedule(write_schedule(tmp_path / "schedule.json", events)) == events


def test_an_empty_schedule_loads_back_empty(tmp_path):
    assert load_schedule(write_schedule(tmp_path / "schedule.json", [])) == []


def test_omitted_target_duration_and_params_take_the_fault_defaults(tmp_path):
    path = write_entries(
        tmp_path / "s.json",
        [{"at": 1, "fault": "latency", "params": {"latency_ms": 3000}}, {"at": 9, "fault": "twin"}],
    )
    assert load_schedule(path) == [
        FaultEvent(1.0, "latency", "broker:random", 6.0, {"latency_ms": 3000, "jitter_ms": 100}),
        FaultEvent(9.0, "twin", "instance:random", 8.0),
    ]


def test_a_yaml_file_in_json_form_is_read(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text('[{"at": 2, "fault": "kill"}]\n')
    assert load_schedule(path) == [FaultEvent(2.0, "kill", "broker:random", 6.0)]


def assert_one_line_error(path: Path, *phrases: str) -> None:
    with pytest.raises(EoschaosError) as caught:
        load_schedule(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    for phrase in phrases:
        assert phrase in message, message


def test_a_missing_schedule_file_is_refused(tmp_path):
    assert_one_line_error(tmp_path / "nope.json", "no such schedule file")


def test_invalid_json_is_refused_with_its_line_and_column(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('[\n  {"at": 1, "fault": "kill"},\n  {"at": 2 "fault": "kill"}\n]\n')
    assert_one_line_error(path, "invalid JSON at line 3, column 12: Expecting ',' delimiter")


def test_a_yaml_file_not_in_json_form_is_told_to_use_json_form(tmp_path):
    path = tmp_path / "s.yml"
    path.write_text("- at: 5\n  fault: kill\n")
    assert_one_line_error(path, "not in JSON form (line 1, column 1)", "write a list like [{")


def test_a_schedule_that_is_not_a_list_is_refused(tmp_path):
    path = write_entries(tmp_path / "s.json", {"at": 1, "fault": "kill"})
    assert_one_line_error(path, "a schedule is a list like [", "got an object")


BAD_ENTRIES = {
    "not an object": (["kill"], "entry 1: must be an object like", "got a string"),
    "unknown key": ({"at": 1, "fault": "kill", "when": 2}, "entry 1: unknown key 'when'"),
    "missing at": ({"fault": "kill"}, "entry 1: missing 'at'"),
    "missing fault": ({"at": 1}, "entry 1: missing 'fault'; choose from kill"),
    "at not a number": ({"at": "5", "fault": "kill"}, "'at' must be a number", "got a string"),
    "at a boolean": ({"at": True, "fault": "kill"}, "'at' must be a number", "got a boolean"),
    "negative at": ({"at": -1, "fault": "kill"}, "'at' must be a number of seconds >= 0"),
    "negative duration": ({"at": 1, "fault": "kill", "duration": -2}, "'duration' must be"),
    "null duration": ({"at": 1, "fault": "kill", "duration": None}, "got null"),
    "fault not a string": ({"at": 1, "fault": 3}, "'fault' must be a string naming a fault"),
    "unknown fault": ({"at": 1, "fault": "explode"}, "entry 1: unknown fault 'explode'; choose"),
    "target not a string": ({"at": 1, "fault": "kill", "target": 2}, "'target' must be a string"),
    "bad target": ({"at": 1, "fault": "kill", "target": "node:1"}, "cannot target 'node:1'"),
    "instance target for a broker fault": (
        {"at": 1, "fault": "pause", "target": "instance:0"},
        "fault 'pause' cannot target 'instance:0'",
    ),
    "broker target for an instance fault": (
        {"at": 1, "fault": "zombie", "target": "broker:1"},
        "use instance:<n> or instance:random",
    ),
    "params not an object": (
        {"at": 1, "fault": "latency", "params": [500]},
        "'params' must be an object",
    ),
    "unknown param": (
        {"at": 1, "fault": "latency", "params": {"delay": 5}},
        "fault 'latency' has no param 'delay'; its params are latency_ms, jitter_ms",
    ),
    "param on a fault without params": (
        {"at": 1, "fault": "kill", "params": {"signal": 9}},
        "fault 'kill' has no param 'signal'; it takes no params",
    ),
    "unknown partition mode": (
        {"at": 1, "fault": "partition", "params": {"mode": "loud"}},
        "param 'mode' must be silent or fail-fast",
    ),
    "zero latency": (
        {"at": 1, "fault": "latency", "params": {"latency_ms": 0}},
        "param 'latency_ms' must be a whole number >= 1",
    ),
    "negative jitter": (
        {"at": 1, "fault": "latency", "params": {"jitter_ms": -1}},
        "param 'jitter_ms' must be a whole number >= 0",
    ),
    "fractional rate": (
        {"at": 1, "fault": "bandwidth", "params": {"rate": 1.5}},
        "param 'rate' must be a whole number",
    ),
    "slices varying more than their size": (
        {"at": 1, "fault": "slicer", "params": {"size_variation": 64}},
        "'size_variation' (64) must be smaller than 'average_size' (64)",
    ),
}


@pytest.mark.parametrize("case", list(BAD_ENTRIES))
def test_a_bad_entry_is_refused_naming_the_file_and_the_entry(case, tmp_path):
    entry, *phrases = BAD_ENTRIES[case]
    entries = entry if isinstance(entry, list) else [entry]
    assert_one_line_error(write_entries(tmp_path / "s.json", entries), "entry 1: ", *phrases)


def test_the_entry_number_counts_from_one_in_file_order(tmp_path):
    path = write_entries(
        tmp_path / "s.json", [{"at": 1, "fault": "kill"}, {"at": 2, "fault": "kil"}]
    )
    assert_one_line_error(path, "entry 2: unknown fault 'kil'")


def test_entries_out_of_order_are_refused(tmp_path):
    path = write_entries(
        tmp_path / "s.json", [{"at": 9, "fault": "kill"}, {"at": 2, "fault": "crash"}]
    )
    assert_one_line_error(path, "entry 2: at 2 comes before entry 1's 9", "in order of at")


# --- random targets ---------------------------------------------------------------------------


def test_random_targets_resolve_to_existing_brokers_and_instances_from_the_seed():
    events = [kill(1, "broker:random"), event(10, "zombie", "instance:random")]
    resolved = resolve_random(events, 4, BROKERS, 2)
    assert resolved == resolve_random(events, 4, BROKERS, 2)
    assert fixed_number(resolved[0].target) in BROKERS
    assert resolved[0].target.startswith("broker:")
    assert resolved[1].target in ("instance:0", "instance:1")


def test_random_targets_depend_on_the_seed():
    events = [kill(at, "broker:random", 1.0) for at in range(0, 20, 2)]
    assert resolve_random(events, 1, BROKERS, 3) != resolve_random(events, 2, BROKERS, 3)


def test_fixed_and_dynamic_targets_are_left_as_they_are():
    events = [
        kill(1, "broker:2"),
        event(10, "latency", "coordinator"),
        event(20, "crash", "instance:1"),
    ]
    assert resolve_random(events, 0, BROKERS, 3) == events


@pytest.mark.parametrize("seed", range(10))
def test_overlapping_random_instance_faults_resolve_to_different_instances(seed):
    events = [event(1, "zombie", "instance:random"), event(2, "twin", "instance:random")]
    first, second = resolve_random(events, seed, BROKERS, 2)
    assert first.target != second.target


# --- validation -------------------------------------------------------------------------------


def assert_refused(events: list[FaultEvent], *phrases: str, duration: float = 60.0) -> None:
    with pytest.raises(EoschaosError) as caught:
        validate(events, duration)
    message = str(caught.value)
    assert "\n" not in message
    for phrase in phrases:
        assert phrase in message, message


def test_a_broker_that_does_not_exist_is_refused_naming_the_ones_that_do():
    assert_refused(
        [kill(1), kill(10, "broker:7")],
        "schedule entry 2 (kill broker:7 at 10s): there is no broker 7; the brokers are 1, 2, 3",
    )


def test_an_instance_that_does_not_exist_is_refused():
    assert_refused(
        [event(5, "crash", "instance:3")],
        "schedule entry 1 (crash instance:3 at 5s): there is no instance 3",
        "0 to 2",
    )


def test_a_fault_ending_after_the_run_is_refused():
    assert_refused(
        [event(55, "zombie", "instance:0")],
        "schedule entry 1 (zombie instance:0 at 55s): ends at 63.5s, after the run's 60s",
    )


def test_a_rolling_restart_needs_its_reserved_time_inside_the_run():
    assert_refused([event(40, "rolling-restart", "all")], "ends at 70s, after the run's 60s")


def test_an_unknown_fault_in_a_built_schedule_is_refused():
    assert_refused([FaultEvent(1, "explode", "broker:1", 1)], "entry 1", "unknown fault 'explode'")


@pytest.mark.parametrize(
    ("first", "second", "reason"),
    [
        (kill(10, "broker:1"), event(12, "partition", "broker:2"), "only one broker may be out"),
        (kill(10, "broker:1"), kill(15, "broker:1"), "only one broker may be out"),
        (event(10, "pause", "controller"), event(11, "split", "coordinator"), "one broker"),
        (event(10, "rolling-restart", "all"), kill(35, "broker:2"), "one broker may be out"),
        (
            event(10, "zombie", "instance:0"),
            event(14, "crash", "instance:0"),
            "both hit instance:0",
        ),
        (event(10, "zombie", "instance:1"), event(12, "twin", "instance:1"), "both hit instance:1"),
        (
            event(10, "latency", "broker:1"),
            event(12, "latency", "broker:1"),
            "the same fault twice",
        ),
        (
            event(1, "reset", "coordinator"),
            event(2, "reset", "coordinator"),
            "the same fault twice",
        ),
        # an instantaneous fault at another's first instant: both are applied then, and a
        # second kill would restart the broker the first has just taken down
        (kill(10, "broker:1"), kill(10, "broker:1", duration=0.0), "only one broker may be out"),
        (
            event(10, "crash", "instance:0"),
            event(10, "crash", "instance:0"),
            "both hit instance:0",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else f"{value.fault}-{value.target}",
)
def test_overlapping_faults_that_cannot_be_combined_are_refused(first, second, reason):
    later = f"schedule entry 2 ({second.fault} {second.target} at {second.at:g}s) overlaps"
    assert_refused([first, second], later, "schedule entry 1", reason, "or later")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (event(10, "latency", "broker:1"), kill(12, "broker:2")),
        (kill(10, "broker:1"), event(11, "zombie", "instance:0")),
        (event(10, "zombie", "instance:0"), event(12, "crash", "instance:1")),
        (kill(10, "broker:1"), event(12, "latency", "coordinator")),
        (event(10, "latency", "broker:1"), event(12, "bandwidth", "broker:1")),
        (event(10, "latency", "broker:1"), event(12, "latency", "broker:2")),
        (event(10, "rolling-restart", "all"), event(20, "zombie", "instance:2")),
        (kill(10, "broker:1"), kill(16, "broker:2")),
        (kill(10, "broker:1", duration=0.0), kill(10.5, "broker:1", duration=0.0)),
        (event(10, "crash", "instance:0"), event(10, "crash", "instance:1")),
    ],
    ids=lambda value: f"{value.fault}-{value.target}",
)
def test_overlapping_faults_that_can_be_combined_are_accepted(first, second):
    validate([first, second])  # asserts by raising


def test_a_crash_inside_another_instance_fault_on_the_same_instance_is_refused_in_any_order():
    assert_refused(
        [event(14, "crash", "instance:0"), event(10, "zombie", "instance:0")],
        "schedule entry 1 (crash instance:0 at 14s) overlaps schedule entry 2",
    )


def test_the_docs_table_lists_every_fault_with_its_default_duration():
    docs = (Path(__file__).parents[1] / "docs" / "schedules.md").read_text()
    for spec in CATALOGUE.values():
        assert f"| `{spec.name}` | {spec.scope} | {spec.duration:g} s |" in docs, spec.name


def test_a_workload_without_transactions_gets_no_coordinator_target():
    brokers = [1, 2, 3]
    for seed in range(40):
        events = random_schedule(["latency"], 120, seed, brokers, 3, transactions=False)
        assert all(event.target != "coordinator" for event in events)


def test_a_transactional_workload_gets_coordinator_targets_for_ack_delays():
    targets = {
        event.target
        for seed in range(40)
        for event in random_schedule(["latency"], 120, seed, [1, 2, 3], 3)
    }
    assert "coordinator" in targets


def test_every_catalogue_fault_is_one_unit_and_every_unit_a_catalogue_fault():
    assert set(UNITS) == set(CATALOGUE)
