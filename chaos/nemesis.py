"""The nemesis: applies a schedule of faults to a cluster and a workload, and heals them.

Every fault is recorded in the history (writer `nemesis`): `invoke` when it starts (params
include the broker a dynamic target resolved to), `ok` once healed (a restarted broker: once it
runs and answers again), `fail` with the error if it could not be applied or healed.

Faults may overlap (an explicit schedule can put latency on one broker while another is
killed): starts and heals form one timeline, applied in time order by one thread, so two
actions never race on the same proxy or process. Each fault holds for its full duration from
the moment it really started. Before a fault that takes a broker out, the nemesis waits until
no partition is under-replicated after an earlier broker came back (unless told not to), so a
broker fault never lands on a cluster still recovering from the last.
`heal_all()` is safe to call at any time, from the run's `finally`, and heals what is active.
"""

from __future__ import annotations

import heapq
import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from eoschaos.chaos.catalogue import CATALOGUE, fixed_number, leader_of
from eoschaos.chaos.faults import HEAL_TIMEOUT_S, UNITS, FaultContext, Workload
from eoschaos.chaos.schedule import FaultEvent
from eoschaos.clusters.base import Cluster
from eoschaos.contract.history import FAULT_TOOK_EFFECT, NEMESIS, HistoryWriter

TOPIC_ALIASES = ("input", "output")


def _role_of(target: str) -> str | None:
    """The role a dynamic broker target names (for `<role>_during` in the fault's params);
    None for a fixed or random broker."""
    if target in ("controller", "coordinator"):
        return target
    if target == "group-coordinator":
        return "group_coordinator"
    return "leader" if leader_of(target) is not None else None


def _first_start(timeline: list[tuple[float, int, int]]) -> float | None:
    """When the earliest start still on the timeline is due."""
    return min((due for due, is_start, _ in timeline if is_start), default=None)


class Nemesis:
    def __init__(
        self,
        cluster: Cluster,
        workload: Workload,
        run_dir: Path,
        progress: Callable[[str], None],
        *,
        wait_for_recovery: bool = True,
        seed: int = 0,
    ) -> None:
        self.cluster = cluster
        self.workload = workload
        self.progress = progress
        self.wait_for_recovery = wait_for_recovery
        self._faults = FaultContext(cluster, workload, run_dir, progress)
        self.history = HistoryWriter(run_dir, NEMESIS)
        self._rng = random.Random(seed)  # only for targets a schedule left random
        self._active: dict[int, tuple[FaultEvent, Callable[[], None]]] = {}
        self._started = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._next_start_due: float | None = None  # monotonic; None: no start pending

    def run(self, schedule: list[FaultEvent], t0: float, stop: threading.Event) -> None:
        """Start each fault at its time (monotonic `t0` + at) and heal it `duration` seconds
        after it really started; no fault starts once `stop` is set.

        A fault that started holds for its full duration even if `stop` comes meanwhile (a
        zombie cut short would not outlast the session timeout); only `close()` cuts it short.
        """
        # (due, heal before start at the same instant, schedule position or active fault):
        # one queue of starts and heals
        timeline: list[tuple[float, int, int]] = [
            (t0 + event.at, 1, position) for position, event in enumerate(schedule)
        ]
        heapq.heapify(timeline)
        try:
            while timeline:
                due, is_start, number = heapq.heappop(timeline)
                self._next_start_due = due if is_start else _first_start(timeline)
                wait = max(0.0, due - time.monotonic())
                if is_start:
                    if stop.wait(wait) or self._closing.is_set():
                        timeline = [entry for entry in timeline if not entry[1]]
                        heapq.heapify(timeline)
                        continue
                    event = schedule[number]
                    self._heal_faults_planned_to_end_by(event.at, timeline)
                    if stop.is_set():
                        continue
                    active = self.start(event)
                    if active is not None:
                        heapq.heappush(timeline, (time.monotonic() + event.duration, 0, active))
                else:
                    self._closing.wait(wait)
                    self.heal(active=number)
        finally:
            self._next_start_due = None

    def _heal_faults_planned_to_end_by(
        self, at: float, timeline: list[tuple[float, int, int]]
    ) -> None:
        """Heal, each at its time, the active faults the schedule ends before `at`.

        A start running late (a slow fault before it, a broker's replicas still catching up)
        would otherwise overtake heals the schedule put before it, and faults validated as
        apart would overlap: a second kill of the coordinator resolved to the broker the first
        kill had just taken down, and its heal found that broker already restarted."""
        with self._lock:
            ending = {n for n, (e, _) in self._active.items() if e.at + e.duration <= at}
        for entry in sorted(entry for entry in timeline if not entry[1] and entry[2] in ending):
            timeline.remove(entry)
            self._closing.wait(max(0.0, entry[0] - time.monotonic()))
            self.heal(active=entry[2])
        heapq.heapify(timeline)

    def overdue(self) -> bool:
        """True while a fault is past its start time and not yet being applied: a heal before
        it (a broker restart) or the wait for the last broker's replicas is taking longer than
        the schedule planned. The seeder holds its input meanwhile, so a late fault still meets
        input in flight instead of a pipeline that has already processed everything."""
        due = self._next_start_due
        return due is not None and time.monotonic() > due

    def heal_all(self) -> None:
        while self._active:
            self.heal(active=max(self._active))

    def close(self) -> None:
        """Cut any fault short, heal everything, close the history (safe in `finally`)."""
        self._closing.set()
        self.heal_all()
        self.history.close()

    def _record(self, type_: str, event: FaultEvent, error: str | None = None) -> None:
        self.history.record(
            "fault",
            type_,
            event.fault,
            target=event.target,
            params=json.dumps(event.params, sort_keys=True),
            error=error,
        )
        self.history.flush()

    def start(self, event: FaultEvent) -> int | None:
        """Apply `event` now (its `at` is not looked at); returns its number among the active
        faults, for heal(), or None if it could not be applied (recorded as `fail`)."""
        if self._closing.is_set():
            return None
        spec = CATALOGUE[event.fault]
        if spec.takes_broker_out:
            self._settle_before_broker_fault()
        self._next_start_due = None  # applying it now: the input may flow again
        try:
            params = dict(event.params)
            if spec.scope == "broker":
                params["broker"] = self._resolve_broker(event.target)
            elif spec.scope == "instance":
                params["instance"] = self._resolve_instance(event.target)
            event = FaultEvent(event.at, event.fault, event.target, event.duration, params)
        except Exception as exc:  # e.g. a coordinator lookup during a leader election
            self._record("invoke", event)
            self._record("fail", event, error=f"target not found: {type(exc).__name__}: {exc}")
            self.progress(f"fault {event.fault} {event.target}: target not found: {exc}")
            return None
        self.progress(f"fault: {event.fault} {event.target} for {event.duration:g}s")
        self._record("invoke", event)
        try:
            heal = self._start(event)
        except Exception as exc:  # a fault that cannot be applied is news, not a crash
            self._record("fail", event, error=f"{type(exc).__name__}: {exc}")
            self.progress(f"fault {event.fault} {event.target} could not be applied: {exc}")
            return None
        with self._lock:
            self._started += 1
            self._active[self._started] = (event, heal)
            return self._started

    def _settle_before_broker_fault(self) -> None:
        if not (self.wait_for_recovery and self._faults.recovering):
            return
        with self._lock:
            busy = any(CATALOGUE[e.fault].scope != "instance" for e, _ in self._active.values())
        if busy:
            return  # another broker fault holds: "healthy" cannot happen until it heals
        self.progress("waiting for under-replicated partitions to clear before the next fault")
        self.cluster.wait_healthy(timeout=HEAL_TIMEOUT_S)
        self._faults.recovering = False

    def heal(self, *, active: int) -> None:
        """Heal the active fault numbered `active` (no-op if already healed)."""
        with self._lock:
            if active not in self._active:
                return
            event, heal = self._active.pop(active)
        self._observe_target_during(event)
        event.params.setdefault(FAULT_TOOK_EFFECT, True)
        try:
            heal()
        except Exception as exc:
            self._record("fail", event, error=f"heal failed: {type(exc).__name__}: {exc}")
            raise
        self._record("ok", event)
        self.progress(f"healed: {event.fault} {event.target}")

    def _observe_target_during(self, event: FaultEvent) -> None:
        """A fault aimed at a role (the controller, a coordinator, a partition's leader) also
        records, just before its heal, who holds that role now and whether it moved: what the
        fault changed, or that it changed nothing (a role that stayed put under a kill or cut,
        or moved under a fault that should only slow it)."""
        role = _role_of(event.target)
        if CATALOGUE[event.fault].scope != "broker" or role is None:
            return
        struck = event.params["broker"]
        try:
            holder = (
                self._controller_seen_by_the_rest(struck)
                if event.target == "controller"
                else self._resolve_broker(event.target)
            )
        except Exception as exc:  # mid-election: say so rather than guess
            event.params[f"{role}_during"] = f"unknown ({type(exc).__name__})"
            return
        event.params[f"{role}_during"] = holder
        event.params["moved"] = holder != struck

    def _controller_seen_by_the_rest(self, struck: int) -> int:
        """The Raft leader most voters other than `struck` follow, from their own quorum
        state (asking through the cluster could wait on a node the fault cut off)."""
        views = [
            self.cluster.quorum_leader_seen_by(v)
            for v in self.cluster.spec.voter_ids
            if v != struck
        ]
        known = [v for v in views if v >= 0]
        if not known:
            raise LookupError("no voter follows a leader")
        return max(set(known), key=known.count)

    # ----------------------------------------------------------------- targets

    def _resolve_broker(self, target: str) -> int:
        number = fixed_number(target)
        if number is not None:
            return number
        if target == "broker:random":
            return self._rng.choice(self.cluster.spec.node_ids)
        if target == "controller":
            return self.cluster.active_controller()
        if target == "group-coordinator":
            return self.cluster.group_coordinator(self.workload.group)
        if target == "coordinator":
            txn_id = self.workload.transactional_id(0)
            if txn_id is None:
                raise LookupError("this mode runs no transactions, so there is no coordinator")
            return self.cluster.transaction_coordinator(txn_id)
        leader = leader_of(target)
        if leader is None:
            raise ValueError(f"not a broker target: {target!r}")
        topic, partition = leader
        if topic in TOPIC_ALIASES:
            topic = self.workload.input_topic if topic == "input" else self.workload.output_topic
        return self.cluster.partition_leader(topic, partition)

    def _resolve_instance(self, target: str) -> int:
        number = fixed_number(target)
        if number is not None:
            return number
        return self._rng.randrange(self.workload.instance_count)

    # ----------------------------------------------------------------- faults

    def _start(self, event: FaultEvent) -> Callable[[], None]:
        return UNITS[event.fault](self._faults, event.params)
