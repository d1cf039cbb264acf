"""Fault schedules: reproducible from a seed, resolved targets, no overlaps, inside the run."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chaos.schedule import FAULTS, QUIET_TAIL, parse_faults, random_schedule
from eoschaos.errors import EoschaosError

fault_lists = st.lists(st.sampled_from(FAULTS), min_size=1, max_size=4, unique=True)


@given(faults=fault_lists, seed=st.integers(0, 2**32), duration=st.floats(10, 300))
def test_same_seed_gives_the_same_schedule(faults, seed, duration):
    first = random_schedule(faults, duration, seed, [1, 2, 3], 3)
    assert first == random_schedule(faults, duration, seed, [1, 2, 3], 3)


@given(faults=fault_lists, seed=st.integers(0, 2**32), duration=st.floats(10, 300))
def test_faults_do_not_overlap_and_end_before_the_quiet_tail(faults, seed, duration):
    schedule = random_schedule(faults, duration, seed, [1, 2, 3], 3)
    for earlier, later in itertools.pairwise(schedule):
        assert earlier.at + earlier.duration < later.at
    for event in schedule:
        assert event.at + event.duration <= duration - QUIET_TAIL


@given(faults=fault_lists, seed=st.integers(0, 2**32))
def test_targets_are_resolved_to_existing_brokers_and_instances(faults, seed):
    for event in random_schedule(faults, 120, seed, [1, 2, 3], 2):
        kind, number = event.target.split(":")
        assert event.fault in faults
        if kind == "broker":
            assert int(number) in (1, 2, 3)
        else:
            assert kind == "instance" and int(number) in (0, 1)


def test_every_chosen_fault_appears_in_a_long_enough_run():
    schedule = random_schedule(list(FAULTS), 120, 7, [1, 2, 3], 3)
    assert {event.fault for event in schedule} == set(FAULTS)


def test_different_seeds_give_different_schedules():
    schedules = [random_schedule(["kill", "crash"], 60, seed, [1, 2, 3], 3) for seed in range(5)]
    assert any(schedule != schedules[0] for schedule in schedules[1:])


def test_unknown_fault_name_is_refused_with_the_choices():
    with pytest.raises(EoschaosError, match="unknown fault 'explode'; choose from kill"):
        parse_faults("kill,explode")
