"""Hypothesis strategies for fault schedules, so that a failing schedule shrinks to a minimal one.

Every schedule drawn passes `validate_schedule`, by construction rather than by rejection: each
draft event fits in the run on its own, and drafts that would conflict with an earlier kept one
are dropped. The drawn parts are ordered so that Hypothesis shrinks each toward the simplest
fault: fewer events (list shrinking), `at` toward 0 on a half-second grid, the fault's default
duration and params (the first branch of each `one_of`), and fixed targets — the first broker,
instance 0 — before the dynamic ones (coordinator, group coordinator, controller, leaders).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from eoschaos.chaos.catalogue import CATALOGUE, DYNAMIC_BROKER_TARGETS, FAULTS, PARTITION_MODES
from eoschaos.chaos.schedule import PARAMS_MAY_BE_ZERO, FaultEvent, conflict, expected_hold

GRID_S = 0.5  # `at` and durations are multiples of this: readable, and they shrink to round numbers
DURATION_SPREAD = 2  # a drawn duration lies between 0 and this many times the default
PARAM_SPREAD = 10  # a drawn numeric param lies up to this many times its default


def _targets(fault: str, brokers: Sequence[int], instances: int, partitions: int) -> list[str]:
    scope = CATALOGUE[fault].scope
    if scope == "cluster":
        return ["all"]
    if scope == "instance":
        return [f"instance:{number}" for number in range(instances)]
    leaders = [f"leader:input/{partition}" for partition in range(partitions)]
    return [f"broker:{node_id}" for node_id in brokers] + list(DYNAMIC_BROKER_TARGETS) + leaders


def _durations(fault: str, duration: float) -> SearchStrategy[float]:
    default = CATALOGUE[fault].duration
    if default == 0:
        return st.just(0.0)  # instantaneous or "as long as it takes": nothing to vary
    longest = int(min(default * DURATION_SPREAD, duration) / GRID_S)
    return st.one_of(st.just(default), st.integers(0, longest).map(lambda n: n * GRID_S))


@st.composite
def _varied_params(draw: st.DrawFn, fault: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, default in CATALOGUE[fault].params.items():
        if name == "mode":
            params[name] = draw(st.sampled_from(PARTITION_MODES))
            continue
        if name in CATALOGUE[fault].choices:
            params[name] = draw(st.sampled_from(CATALOGUE[fault].choices[name]))
            continue
        least = 0 if name in PARAMS_MAY_BE_ZERO else 1
        most = default * PARAM_SPREAD
        if name == "size_variation":  # Toxiproxy's slicer needs it below the average size
            most = min(most, params["average_size"] - 1)
        params[name] = draw(st.integers(least, max(least, most)))
    return params


def _params(fault: str) -> SearchStrategy[dict[str, Any]]:
    defaults = CATALOGUE[fault].params
    if not defaults:
        return st.builds(dict)
    return st.one_of(st.builds(dict, st.just(defaults)), _varied_params(fault))


@st.composite
def _draft_events(
    draw: st.DrawFn,
    faults: Sequence[str],
    duration: float,
    brokers: Sequence[int],
    instances: int,
    partitions: int,
) -> FaultEvent:
    """One event that fits in the run on its own (it may still clash with others)."""
    fault = draw(st.sampled_from(faults))
    event = FaultEvent(
        0.0,
        fault,
        draw(st.sampled_from(_targets(fault, brokers, instances, partitions))),
        draw(_durations(fault, duration)),
        draw(_params(fault)),
    )
    latest_step = int((duration - expected_hold(event)) / GRID_S)
    return replace(event, at=draw(st.integers(0, latest_step)) * GRID_S)


def _without_conflicts(drafts: list[FaultEvent]) -> list[FaultEvent]:
    """In order of `at`, keep each draft that can be combined with every one kept before it."""
    kept: list[FaultEvent] = []
    for event in sorted(drafts, key=lambda draft: draft.at):
        if all(conflict(earlier, event) is None for earlier in kept):
            kept.append(event)
    return kept


def schedules(
    *,
    faults: Sequence[str] = FAULTS,
    duration: float = 60.0,
    brokers: Sequence[int] = (1, 2, 3),
    instances: int = 3,
    partitions: int = 6,
    max_events: int = 6,
) -> SearchStrategy[list[FaultEvent]]:
    """Schedules over `faults` for a run of `duration` s on `brokers` and `instances`, valid
    for `validate_schedule` and sorted by `at`. Faults too long for the run are left out."""
    fitting = [
        fault
        for fault in faults
        if expected_hold(FaultEvent(0.0, fault, "", CATALOGUE[fault].duration)) <= duration
    ]
    if not fitting:
        return st.just([])
    drafts = _draft_events(fitting, duration, brokers, instances, partitions)
    return st.lists(drafts, max_size=max_events).map(_without_conflicts)
