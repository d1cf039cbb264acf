"""Fault schedules: which fault hits which target when, reproducible from a seed.

A schedule is a plain list of FaultEvent, fully resolved (no "random" targets left), so the
same seed gives the same schedule and a schedule written to run.json replays exactly.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from eoschaos.errors import EoschaosError

BROKER_FAULTS = ("kill", "latency")
INSTANCE_FAULTS = ("crash", "zombie")
FAULTS = BROKER_FAULTS + INSTANCE_FAULTS

# How long each fault holds, in seconds (a crash is instantaneous: the supervisor heals it).
# A zombie must outlast the processors' session timeout (6 s, expired by 7.5 s at the latest)
# so the group rebalances, and come back before its open transaction and queued records time
# out (20 s / 15 s in kip447) so it still tries to finish them: the attempt fencing must reject.
DEFAULT_DURATION = {"kill": 6.0, "latency": 6.0, "crash": 0.0, "zombie": 8.5}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {"latency": {"latency_ms": 500, "jitter_ms": 100}}
FIRST_FAULT_AT = 3.0  # let the pipeline get going before the first fault
QUIET_TAIL = 5.0  # and leave it a little undisturbed time at the end
GAP = (2.0, 4.0)  # pause between faults: time for the pipeline to make progress


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


def parse_faults(text: str) -> list[str]:
    """`kill,crash` → ["kill", "crash"]; unknown names are bad input."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise EoschaosError(
            f"unknown fault {unknown[0]!r}; choose from {', '.join(FAULTS)} (comma-separated)"
        )
    return names


def random_schedule(
    faults: list[str], duration: float, seed: int, brokers: list[int], instances: int
) -> list[FaultEvent]:
    """Faults one after another, cycling through `faults` in a seeded order, with seeded
    targets and gaps, all ending before the workload's quiet tail."""
    if not faults:
        return []
    rng = random.Random(seed)
    events: list[FaultEvent] = []
    at = FIRST_FAULT_AT
    order: list[str] = []
    while True:
        if not order:
            order = list(faults)
            rng.shuffle(order)
        fault = order.pop()
        hold = DEFAULT_DURATION[fault]
        if at + hold > duration - QUIET_TAIL:
            break
        if fault in BROKER_FAULTS:
            target = f"broker:{rng.choice(brokers)}"
        else:
            target = f"instance:{rng.randrange(instances)}"
        params = dict(DEFAULT_PARAMS.get(fault, {}))
        events.append(FaultEvent(round(at, 2), fault, target, hold, params))
        at += hold + rng.uniform(*GAP)
    return events
