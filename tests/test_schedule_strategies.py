"""Hypothesis schedules: always valid, sorted, replayable, and shrinking to a minimal schedule."""

from __future__ import annotations

from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from eoschaos.chaos.catalogue import CATALOGUE, FAULTS
from eoschaos.chaos.schedule import FaultEvent, load_schedule, validate_schedule, write_schedule
from eoschaos.chaos.strategies import schedules

modest = settings(max_examples=60, deadline=None)
# The shrink tests name the minimal schedule Hypothesis reaches. Its shrinker finds a local
# minimum, which depends on the random first example: about 1 start in 150 ends elsewhere
# (e.g. a kill and a latency on broker 1 at 0 s). Derandomized, the start is fixed.
no_database = settings(database=None, max_examples=200, derandomize=True)


@modest
@given(schedule=schedules())
def test_drawn_schedules_pass_validation_and_are_sorted_by_at(schedule):
    validate_schedule(schedule, brokers=[1, 2, 3], instances=3, duration=60.0)
    assert [event.at for event in schedule] == sorted(event.at for event in schedule)


@modest
@given(
    data=st.data(),
    faults=st.lists(st.sampled_from(FAULTS), min_size=1, max_size=5, unique=True),
    duration=st.sampled_from([5.0, 20.0, 45.5]),
    brokers=st.sampled_from([(1,), (1, 2, 3), (2, 4, 6, 8, 10)]),
    instances=st.integers(1, 4),
)
def test_drawn_schedules_fit_any_cluster_and_run_length(data, faults, duration, brokers, instances):
    schedule = data.draw(
        schedules(faults=faults, duration=duration, brokers=brokers, instances=instances)
    )
    validate_schedule(schedule, brokers=list(brokers), instances=instances, duration=duration)
    assert {event.fault for event in schedule} <= set(faults)


def test_faults_too_long_for_the_run_are_left_out():
    assert find(schedules(faults=("rolling-restart",), duration=20), lambda _: True) == []


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(schedule=schedules())
def test_a_drawn_schedule_written_to_a_file_loads_back_equal(schedule, tmp_path):
    assert load_schedule(write_schedule(tmp_path / "schedule.json", schedule)) == schedule


def test_a_schedule_containing_a_zombie_shrinks_to_one_zombie_at_zero_with_defaults():
    minimal = find(
        schedules(),
        lambda schedule: any(e.fault == "zombie" for e in schedule),
        settings=no_database,
    )
    assert minimal == [FaultEvent(0.0, "zombie", "instance:0", 8.5, {})]


def test_a_schedule_with_two_broker_faults_shrinks_to_two_back_to_back_kills_on_broker_1():
    def two_broker_faults(schedule: list[FaultEvent]) -> bool:
        return sum(CATALOGUE[event.fault].scope == "broker" for event in schedule) >= 2

    minimal = find(schedules(), two_broker_faults, settings=no_database)
    assert minimal == [
        FaultEvent(0.0, "kill", "broker:1", 6.0),
        FaultEvent(6.0, "kill", "broker:1", 6.0),
    ]


def test_a_schedule_needing_a_coordinator_shrinks_to_the_first_broker_fault_on_it():
    minimal = find(
        schedules(),
        lambda schedule: any(e.target == "coordinator" for e in schedule),
        settings=no_database,
    )
    assert minimal == [FaultEvent(0.0, "kill", "coordinator", 6.0)]


def test_a_schedule_needing_non_default_params_shrinks_to_the_smallest_change():
    minimal = find(
        schedules(faults=("latency",)),
        lambda schedule: any(e.params["latency_ms"] > 1000 for e in schedule),
        settings=no_database,
    )
    assert minimal == [
        FaultEvent(0.0, "latency", "broker:1", 6.0, {"latency_ms": 1001, "jitter_ms": 0})
    ]
