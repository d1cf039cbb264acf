"""Fault schedules: which fault hits which target when, reproducible from a seed.

A schedule is a list of FaultEvent in order of `at` (seconds from the workload's start). It
comes from one of three places: `random_schedule` (`--faults` and `--seed`), `load_schedule`
(an explicit `--schedule FILE`) or `eoschaos.chaos.strategies.schedules` (Hypothesis). Before a run,
`resolve_random` fixes `broker:random` / `instance:random` from the seed and `validate_schedule`
checks it against the cluster and the run's duration, so that bad input is one line naming the
entry before anything starts; `write_schedule` leaves the replayable file in the run dir.
Dynamic targets (a partition's leader, a coordinator, the controller) stay as they are: the
nemesis resolves them when the fault starts, because who leads changes during a run.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from eoschaos.chaos.catalogue import (
    CATALOGUE,
    DYNAMIC_BROKER_TARGETS,
    FAULTS,
    PARTITION_MODES,
    check_target,
    default_target,
    fixed_number,
    leader_of,
)
from eoschaos.contract.errors import EoschaosError

FIRST_FAULT_AT = 3.0  # let the pipeline get going before the first random fault
QUIET_TAIL = 5.0  # and leave it a little undisturbed time at the end
# Seconds between one random fault's end and the next one's start: time for the pipeline to
# make progress (and, after a broker fault, for its replicas to catch up) before the next hit.
INTENSITIES: dict[str, tuple[float, float]] = {
    "low": (6.0, 12.0),
    "normal": (2.0, 4.0),
    "high": (0.5, 1.5),
}
# Faults with duration 0 that still take time: a rolling restart lasts as long as three clean
# restarts and their catching up take (about 10 s each here); a crash is over at once.
RESERVED_HOLD_S = {"rolling-restart": 30.0}
# Broker faults aim at a fixed broker three times in seven, otherwise at a role the nemesis
# resolves when the fault starts. An ack delay aims at the transaction coordinator one time in
# three: a late response to EndTxn or AddOffsetsToTxn is the interesting case (KAFKA-17754).
BROKER_TARGET_KINDS = ("fixed", "fixed", "fixed", *DYNAMIC_BROKER_TARGETS, "leader")
ACK_DELAY_TARGET_KINDS = (*BROKER_TARGET_KINDS, "coordinator", "coordinator")
RANDOM_TARGETS = ("broker:random", "instance:random")
ENTRY_KEYS = ("at", "fault", "target", "duration", "params")
ENTRY_EXAMPLE = '{"at": 5, "fault": "kill", "target": "broker:2", "duration": 6}'
# Zero means something for these (no jitter, reset at once, even slices, no delay); a zero
# latency, rate or slice size would be no fault at all or a stall.
PARAMS_MAY_BE_ZERO = frozenset({"jitter_ms", "timeout_ms", "size_variation", "delay_us", "late_ms"})


@dataclass(frozen=True)
class FaultEvent:
    """One fault: start `at` seconds after the workload started, hold for `duration`."""

    at: float
    fault: str
    target: str
    duration: float
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def expected_hold(event: FaultEvent) -> float:
    """Seconds the fault occupies its target: its duration, or the time reserved for a fault
    that has no duration but takes time (a rolling restart)."""
    return max(event.duration, RESERVED_HOLD_S.get(event.fault, 0.0))


def conflict(first: FaultEvent, second: FaultEvent) -> str | None:
    """Why two faults cannot hold at the same time, or None if they do not overlap or can.

    Each fault holds [at, at + expected_hold); an instantaneous fault (a crash, a kill with no
    duration) holds its instant, so it overlaps a fault it lands inside of, that fault's first
    instant included, and another instantaneous fault at the same instant: both are applied
    then, one after the other (a second kill of a broker the first has just taken down would
    restart it at once).
    """
    if not _overlap(first, second):
        return None
    if CATALOGUE[first.fault].takes_broker_out and CATALOGUE[second.fault].takes_broker_out:
        return (
            "only one broker may be out at a time (the controller quorum and "
            "min.insync.replicas=2 need two of three)"
        )
    if first.target == second.target and first.target.startswith("instance:"):
        return f"both hit {first.target}"
    if first.target == second.target and first.fault == second.fault:
        return f"the same fault twice on {first.target}"
    return None


def _overlap(first: FaultEvent, second: FaultEvent) -> bool:
    first_hold, second_hold = expected_hold(first), expected_hold(second)
    if first_hold == 0 and second_hold == 0:
        return first.at == second.at
    if first_hold == 0:
        return second.at <= first.at < second.at + second_hold
    if second_hold == 0:
        return first.at <= second.at < first.at + first_hold
    return first.at < second.at + second_hold and second.at < first.at + first_hold


def _unknown_fault(name: str) -> EoschaosError:
    return EoschaosError(f"unknown fault {name!r}; choose from {', '.join(FAULTS)}")


def parse_faults(text: str) -> list[str]:
    """`kill,crash` → ["kill", "crash"]; unknown names are bad input."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in CATALOGUE:
            raise EoschaosError(f"{_unknown_fault(name)} (comma-separated)")
    return names


def _random_target(
    rng: random.Random,
    fault: str,
    brokers: list[int],
    instances: int,
    partitions: int,
    transactions: bool,
) -> str:
    scope = CATALOGUE[fault].scope
    if scope == "cluster":
        return "all"
    if scope == "instance":
        return f"instance:{rng.randrange(instances)}"
    kind = rng.choice(ACK_DELAY_TARGET_KINDS if fault == "latency" else BROKER_TARGET_KINDS)
    if kind == "fixed":
        return f"broker:{rng.choice(brokers)}"
    if kind == "leader":
        return f"leader:input/{rng.randrange(partitions)}"
    if kind == "coordinator" and not transactions:
        return "group-coordinator"  # no transactional.id to find a coordinator by
    return kind


def random_schedule(
    faults: list[str],
    duration: float,
    seed: int,
    brokers: list[int],
    instances: int,
    *,
    intensity: str = "normal",
    partitions: int = 6,
    transactions: bool = True,
) -> list[FaultEvent]:
    """Faults one after another, cycling through `faults` in a seeded order, with seeded
    targets and gaps (by `intensity`), all ending before the workload's quiet tail.

    `transactions`: whether the workload has a transactional.id the nemesis can find the
    transaction coordinator by; without one, `coordinator` is drawn as `group-coordinator`.

    A fault too long for the time left is dropped from the cycle (it would not fit later
    either), so the others still get their turns.
    """
    if intensity not in INTENSITIES:
        raise EoschaosError(
            f"unknown intensity {intensity!r}; choose from {', '.join(INTENSITIES)}"
        )
    rng = random.Random(seed)
    pool = list(dict.fromkeys(faults))
    order: list[str] = []
    events: list[FaultEvent] = []
    at = FIRST_FAULT_AT
    while pool:
        if not order:
            order = list(pool)
            rng.shuffle(order)
        fault = order.pop()
        spec = CATALOGUE[fault]
        event = FaultEvent(
            at,
            fault,
            _random_target(rng, fault, brokers, instances, partitions, transactions),
            spec.duration,
            dict(spec.params),
        )
        if at + expected_hold(event) > duration - QUIET_TAIL:
            pool.remove(fault)
            continue
        events.append(event)
        at = round(at + expected_hold(event) + rng.uniform(*INTENSITIES[intensity]), 2)
    return events


def resolve_random(
    events: list[FaultEvent], seed: int, brokers: list[int], instances: int
) -> list[FaultEvent]:
    """`broker:random` / `instance:random` → a seeded fixed target; the rest as they are.

    A random target avoids what it would conflict with (two overlapping zombies on
    `instance:random` get different instances) when it can; when it cannot,
    validate_schedule reports the clash.
    """
    rng = random.Random(seed)
    resolved: list[FaultEvent] = []
    for index, event in enumerate(events):
        if event.target in RANDOM_TARGETS:
            if event.target == "broker:random":
                choices = [f"broker:{node_id}" for node_id in brokers]
            else:
                choices = [f"instance:{number}" for number in range(instances)]
            others = resolved + [e for e in events[index + 1 :] if e.target not in RANDOM_TARGETS]
            free = [
                target
                for target in choices
                if all(conflict(replace(event, target=target), other) is None for other in others)
            ]
            event = replace(event, target=rng.choice(free or choices))
        resolved.append(event)
    return resolved


def _describe(number: int, event: FaultEvent) -> str:
    return f"schedule entry {number} ({event.fault} {event.target} at {event.at:g}s)"


def validate_schedule(
    events: list[FaultEvent],
    *,
    brokers: list[int],
    instances: int,
    duration: float,
    partitions: int | None = None,
) -> None:
    """Bad input if an entry names a broker, instance or workload partition (`leader:input/p`,
    checked when `partitions` is given) that does not exist, ends after the run, or overlaps
    another entry it cannot be combined with (see `conflict`).

    Entries are numbered from 1 in list order. Call it after resolve_random: targets are
    compared as written.
    """
    for number, event in enumerate(events, 1):
        where = _describe(number, event)
        if event.fault not in CATALOGUE:
            raise EoschaosError(f"{where}: {_unknown_fault(event.fault)}")
        try:
            check_target(event.fault, event.target)
        except EoschaosError as exc:
            raise EoschaosError(f"{where}: {exc}") from None
        fixed = fixed_number(event.target)
        if fixed is not None and event.target.startswith("broker:") and fixed not in brokers:
            existing = ", ".join(str(node_id) for node_id in brokers)
            raise EoschaosError(f"{where}: there is no broker {fixed}; the brokers are {existing}")
        if fixed is not None and event.target.startswith("instance:") and fixed >= instances:
            raise EoschaosError(
                f"{where}: there is no instance {fixed}; the instances are 0 to {instances - 1}"
            )
        leader = leader_of(event.target)
        workload_topic = leader is not None and leader[0] in ("input", "output")
        if partitions is not None and workload_topic and leader[1] >= partitions:
            raise EoschaosError(
                f"{where}: the {leader[0]} topic has partitions 0 to {partitions - 1}"
            )
        end = event.at + expected_hold(event)
        if end > duration:
            raise EoschaosError(
                f"{where}: ends at {end:g}s, after the run's {duration:g}s; "
                f"start it earlier, shorten it, or run for {math.ceil(end):d}s or more"
            )
    numbered = sorted(enumerate(events, 1), key=lambda pair: pair[1].at)
    for (first_number, first), (second_number, second) in itertools.combinations(numbered, 2):
        reason = conflict(first, second)
        if reason:
            raise EoschaosError(
                f"{_describe(second_number, second)} overlaps "
                f"{_describe(first_number, first)}: {reason}; start it at "
                f"{first.at + expected_hold(first):g}s or later"
            )


def _json_kind(value: Any) -> str:
    """'a string', 'an object', ... for messages about a value of the wrong type."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    kinds = {dict: "an object", list: "a list", str: "a string", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _seconds(entry: dict[str, Any], key: str, default: float | None = None) -> float:
    if key not in entry:
        if default is None:
            raise EoschaosError(f"missing {key!r} (seconds from the workload's start)")
        return default
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EoschaosError(f"{key!r} must be a number of seconds, got {_json_kind(value)}")
    if not math.isfinite(value) or value < 0:
        raise EoschaosError(f"{key!r} must be a number of seconds >= 0, got {value}")
    return float(value)


def _check_param(fault: str, name: str, value: Any) -> None:
    defaults = CATALOGUE[fault].params
    if name not in defaults:
        known = f"its params are {', '.join(defaults)}" if defaults else "it takes no params"
        raise EoschaosError(f"fault {fault!r} has no param {name!r}; {known}")
    if name == "mode":
        if value not in PARTITION_MODES:
            modes = " or ".join(PARTITION_MODES)
            raise EoschaosError(f"param 'mode' must be {modes}, got {json.dumps(value)}")
        return
    choices = CATALOGUE[fault].choices.get(name)
    if choices is not None:
        if value not in choices:
            raise EoschaosError(
                f"param {name!r} must be one of {', '.join(choices)}, got {json.dumps(value)}"
            )
        return
    least = 0 if name in PARAMS_MAY_BE_ZERO else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise EoschaosError(
            f"param {name!r} must be a whole number >= {least}, got {json.dumps(value)}"
        )


def _event_from_entry(entry: Any) -> FaultEvent:
    if not isinstance(entry, dict):
        raise EoschaosError(f"must be an object like {ENTRY_EXAMPLE}, got {_json_kind(entry)}")
    unknown = [key for key in entry if key not in ENTRY_KEYS]
    if unknown:
        raise EoschaosError(
            f"unknown key {unknown[0]!r}; an entry has at and fault, "
            "and optionally target, duration and params"
        )
    if "fault" not in entry:
        raise EoschaosError(f"missing 'fault'; choose from {', '.join(FAULTS)}")
    fault = entry["fault"]
    if not isinstance(fault, str):
        raise EoschaosError(f"'fault' must be a string naming a fault, got {_json_kind(fault)}")
    if fault not in CATALOGUE:
        raise _unknown_fault(fault)
    spec = CATALOGUE[fault]
    at = _seconds(entry, "at")
    duration = _seconds(entry, "duration", spec.duration)
    target = entry.get("target", default_target(fault))
    if not isinstance(target, str):
        raise EoschaosError(f"'target' must be a string, got {_json_kind(target)}")
    check_target(fault, target)
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise EoschaosError(f"'params' must be an object, got {_json_kind(params)}")
    for name, value in params.items():
        _check_param(fault, name, value)
    merged = {**spec.params, **params}
    if fault == "slicer" and merged["size_variation"] >= merged["average_size"]:
        raise EoschaosError(
            f"param 'size_variation' ({merged['size_variation']}) must be smaller than "
            f"'average_size' ({merged['average_size']}), or Toxiproxy's slicer cuts out of range"
        )
    return FaultEvent(at, fault, target, duration, merged)


def load_schedule(path: Path | str) -> list[FaultEvent]:
    """Read an explicit schedule: a JSON list of {at, fault, target?, duration?, params?}.

    JSON is also YAML, and the one form we read (there is no YAML library to depend on).
    Omitted target, duration and params take the fault's defaults; entries must come in order
    of `at`, so that entry numbers in every message match the file.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise EoschaosError(f"{path}: no such schedule file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EoschaosError(f"{path}: cannot read the schedule file: {exc}") from None
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        if path.suffix in (".yaml", ".yml"):
            raise EoschaosError(
                f"{path}: not in JSON form ({where}); eoschaos reads YAML schedules in their "
                f"JSON form only: write a list like [{ENTRY_EXAMPLE}]"
            ) from None
        raise EoschaosError(f"{path}: invalid JSON at {where}: {exc.msg}") from None
    except RecursionError:  # nested deeper than Python's JSON parser goes
        raise EoschaosError(
            f"{path}: nested too deeply; a schedule is a flat list like [{ENTRY_EXAMPLE}]"
        ) from None
    if not isinstance(entries, list):
        raise EoschaosError(
            f"{path}: a schedule is a list like [{ENTRY_EXAMPLE}], got {_json_kind(entries)}"
        )
    events: list[FaultEvent] = []
    for number, entry in enumerate(entries, 1):
        try:
            event = _event_from_entry(entry)
            if events and event.at < events[-1].at:
                raise EoschaosError(
                    f"at {event.at:g} comes before entry {number - 1}'s {events[-1].at:g}; "
                    "list the entries in order of at"
                )
        except EoschaosError as exc:
            raise EoschaosError(f"{path}: entry {number}: {exc}") from None
        events.append(event)
    return events


def write_schedule(path: Path | str, events: list[FaultEvent]) -> Path:
    """Write `events` as a schedule file `load_schedule` reads back equal: one entry a line."""
    path = Path(path)
    lines = ",\n".join(f"  {json.dumps(event.to_json())}" for event in events)
    path.write_text(f"[\n{lines}\n]\n" if events else "[]\n")
    return path
