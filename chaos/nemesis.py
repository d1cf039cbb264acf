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
from typing import Any, Protocol

from eoschaos.chaos.catalogue import CATALOGUE, fixed_number, leader_of
from eoschaos.chaos.schedule import FaultEvent
from eoschaos.clusters.admin import wait_answers_for_itself
from eoschaos.clusters.base import Cluster
from eoschaos.clusters.ports import Link, lane_link
from eoschaos.contract.history import NEMESIS, HistoryWriter, await_instance_event

HEAL_TIMEOUT_S = 120.0
# How long an aimed fault follows its instance for a produced batch before it gives up and
# strikes anyway (recorded as mid_transaction false). Long enough to outlast a replacement's
# start and first rebalance: a moment missed there is re-aimed at the next incarnation.
ZOMBIE_TRIGGER_WAIT_S = 20.0
TOPIC_ALIASES = ("input", "output")


class Workload(Protocol):
    """What the nemesis needs from a workload to hurt its instances and aim at its topics."""

    input_topic: str
    output_topic: str
    group: str
    instance_count: int

    def kill_instance(self, instance: int) -> None: ...
    def pause_instance(self, instance: int) -> None: ...
    def resume_instance(self, instance: int) -> None: ...
    def start_twin(self, instance: int) -> str: ...
    def stop_twin(self, twin: str) -> None: ...
    def transactional_id(self, instance: int) -> str | None: ...


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
        self.run_dir = run_dir
        self.history = HistoryWriter(run_dir, NEMESIS)
        self._rng = random.Random(seed)  # only for targets a schedule left random
        self._active: dict[int, tuple[FaultEvent, Callable[[], None]]] = {}
        self._started = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._recovering = False  # a broker came back; its replicas may still be catching up
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
        if not (self.wait_for_recovery and self._recovering):
            return
        with self._lock:
            busy = any(CATALOGUE[e.fault].scope != "instance" for e, _ in self._active.values())
        if busy:
            return  # another broker fault holds: "healthy" cannot happen until it heals
        self.progress("waiting for under-replicated partitions to clear before the next fault")
        self.cluster.wait_healthy(timeout=HEAL_TIMEOUT_S)
        self._recovering = False

    def heal(self, *, active: int) -> None:
        """Heal the active fault numbered `active` (no-op if already healed)."""
        with self._lock:
            if active not in self._active:
                return
            event, heal = self._active.pop(active)
        try:
            heal()
        except Exception as exc:
            self._record("fail", event, error=f"heal failed: {type(exc).__name__}: {exc}")
            raise
        self._record("ok", event)
        self.progress(f"healed: {event.fault} {event.target}")

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
        starters: dict[str, Callable[[dict[str, Any]], Callable[[], None]]] = {
            "kill": self._kill,
            "bounce": self._bounce,
            "rolling-restart": self._rolling_restart,
            "pause": self._pause,
            "partition": self._partition_from_clients,
            "isolate-peers": self._isolate_from_peers,
            "split": self._split,
            "latency": self._ack_delay,
            "bandwidth": self._bandwidth,
            "reset": self._reset,
            "slicer": self._slicer,
            "crash": self._crash,
            "zombie": self._zombie,
            "twin": self._twin,
            "isolate-instance": self._isolate_instance,
        }
        return starters[event.fault](event.params)

    def _restarted(self, node_id: int) -> None:
        self.cluster.start_node(node_id)
        wait_answers_for_itself(self.cluster.client_address(node_id), node_id, HEAL_TIMEOUT_S)
        self._recovering = True

    def _kill(self, params: dict[str, Any]) -> Callable[[], None]:
        node_id = params["broker"]
        self.cluster.kill_node(node_id)
        return lambda: self._restarted(node_id)

    def _bounce(self, params: dict[str, Any]) -> Callable[[], None]:
        """Controlled shutdown: leadership moves away before the broker exits."""
        node_id = params["broker"]
        if not self.cluster.stop_node(node_id, timeout=HEAL_TIMEOUT_S):
            raise RuntimeError(f"broker {node_id} ignored SIGTERM for {HEAL_TIMEOUT_S:.0f}s")
        return lambda: self._restarted(node_id)

    def _rolling_restart(self, _params: dict[str, Any]) -> Callable[[], None]:
        """An operator's rolling restart: each broker stopped cleanly and started again, the
        next one only once the cluster is healthy. All of it happens when the fault starts."""
        for node_id in self.cluster.spec.node_ids:
            self.progress(f"rolling restart: broker {node_id}")
            self.cluster.stop_node(node_id, timeout=HEAL_TIMEOUT_S)
            self._restarted(node_id)
            self.cluster.wait_healthy(timeout=HEAL_TIMEOUT_S)
        self._recovering = False
        return lambda: None

    def _pause(self, params: dict[str, Any]) -> Callable[[], None]:
        node_id = params["broker"]
        self.cluster.pause_node(node_id)

        def heal() -> None:
            self.cluster.resume_node(node_id)
            self._recovering = True

        return heal

    def _cut(self, links: list[tuple[int, Link]], mode: str) -> Callable[[], None]:
        """Cut each (node, link). silent: a timeout toxic with timeout 0 in both directions
        (connections stay open, every byte is dropped); fail-fast: the proxy is disabled (its
        listener closes and its connections are dropped at once).

        Healing a silent cut also drops the connections it held: the bytes it swallowed are
        gone for good (unlike packets TCP would resend after a real partition), so those
        streams are broken and would otherwise hang until a request timeout (30 s)."""
        toxics: list[tuple[int, Link, str]] = []
        for node_id, link in links:
            if mode == "fail-fast":
                self.cluster.set_link_enabled(node_id, link, False)
                continue
            for stream in ("upstream", "downstream"):
                name = self.cluster.add_toxic(
                    node_id, link, "timeout", stream=stream, attributes={"timeout": 0}
                )
                toxics.append((node_id, link, name))

        def heal() -> None:
            for node_id, link, name in toxics:
                self.cluster.remove_toxic(node_id, link, name)
            for node_id, link in links:
                if toxics:
                    self.cluster.set_link_enabled(node_id, link, False)
                self.cluster.set_link_enabled(node_id, link, True)
            self._recovering = True

        return heal

    def _client_links(self, node_id: int) -> list[tuple[int, Link]]:
        return [(node_id, link) for link in self.cluster.client_links()]

    def _partition_from_clients(self, params: dict[str, Any]) -> Callable[[], None]:
        return self._cut(self._client_links(params["broker"]), params.get("mode", "silent"))

    def _isolate_from_peers(self, params: dict[str, Any]) -> Callable[[], None]:
        """Both ways on the controller links (the node's Raft traffic and broker heartbeats
        stop, so the majority fences it); inbound on the inter-broker link (peers cannot fetch
        from it, while its own fetches from them still flow: every node is reached at one
        inter-broker address, so that direction cannot be told apart)."""
        links = self.cluster.peer_links(params["broker"])
        return self._cut(links, params.get("mode", "silent"))

    def _split(self, params: dict[str, Any]) -> Callable[[], None]:
        """The target is the minority side: as if its host left the network, away from the
        majority and from the clients (which run on the majority's side)."""
        node_id = params["broker"]
        links = self._client_links(node_id) + self.cluster.peer_links(node_id)
        return self._cut(links, params.get("mode", "silent"))

    def _isolate_instance(self, params: dict[str, Any]) -> Callable[[], None]:
        """The instance's host leaves the network: its lane is cut on every broker, while the
        other instances and eoschaos's own clients still reach the whole cluster.

        Aimed like a zombie: at a produced, uncommitted batch. The instance is frozen for the
        few milliseconds the cut takes to install, so its send-offsets and commit cannot slip
        through first; it then sits cut off mid-transaction past its session. Cut between
        batches, it would only lose its partitions and have nothing left to be fenced."""
        instance = params["instance"]
        lane = lane_link(instance)
        if lane not in self.cluster.client_links():
            raise LookupError(f"instance {instance} has no lane of its own on this cluster")
        links = [(node_id, lane) for node_id in self.cluster.spec.node_ids]
        self._freeze_mid_transaction(instance, params)
        try:
            return self._cut(links, params.get("mode", "silent"))
        finally:
            self.workload.resume_instance(instance)

    def _toxic(self, node_id: int, toxic: str, attributes: dict[str, Any]) -> Callable[[], None]:
        """A toxic on broker → client only (every client link): requests arrive intact,
        answers are hurt."""
        names = [
            (link, self.cluster.add_toxic(node_id, link, toxic, attributes=attributes))
            for link in self.cluster.client_links()
        ]

        def heal() -> None:
            for link, name in names:
                self.cluster.remove_toxic(node_id, link, name)

        return heal

    def _ack_delay(self, params: dict[str, Any]) -> Callable[[], None]:
        attributes = {"latency": params["latency_ms"], "jitter": params.get("jitter_ms", 0)}
        return self._toxic(params["broker"], "latency", attributes)

    def _bandwidth(self, params: dict[str, Any]) -> Callable[[], None]:
        return self._toxic(params["broker"], "bandwidth", {"rate": params["rate"]})

    def _reset(self, params: dict[str, Any]) -> Callable[[], None]:
        return self._toxic(params["broker"], "reset_peer", {"timeout": params["timeout_ms"]})

    def _slicer(self, params: dict[str, Any]) -> Callable[[], None]:
        attributes = {
            "average_size": params["average_size"],
            "size_variation": params["size_variation"],
            "delay": params["delay_us"],  # Toxiproxy's name; microseconds
        }
        return self._toxic(params["broker"], "slicer", attributes)

    def _crash(self, params: dict[str, Any]) -> Callable[[], None]:
        self.workload.kill_instance(params["instance"])
        return lambda: None  # the workload's supervisor starts the replacement

    def _zombie(self, params: dict[str, Any]) -> Callable[[], None]:
        """Freeze the instance in the middle of a transaction — records consumed, output
        produced, nothing committed yet — the moment that makes a zombie dangerous. A pause
        that lands between batches only costs the instance its partitions."""
        instance = params["instance"]
        self._freeze_mid_transaction(instance, params)
        return lambda: self.workload.resume_instance(instance)

    def _twin(self, params: dict[str, Any]) -> Callable[[], None]:
        """A second process with the instance's transactional.id: its init_transactions must
        fence the live one, whatever the live one still tries to commit."""
        twin = self.workload.start_twin(params["instance"])
        params["twin"] = twin
        return lambda: self.workload.stop_twin(twin)

    def _freeze_mid_transaction(self, instance: int, params: dict[str, Any]) -> None:
        """SIGSTOP the instance right after it produced a batch (or after the wait runs out);
        whether it was caught mid-transaction goes into the fault's params, the recorded
        effect that tests and reviewers rest on."""
        params["mid_transaction"] = await_instance_event(
            self.run_dir, instance, _produced_a_batch, ZOMBIE_TRIGGER_WAIT_S
        )
        self.workload.pause_instance(instance)


def _produced_a_batch(event: dict[str, Any]) -> bool:
    """The instance produced its transaction's records and has not committed yet."""
    return (event["kind"], event["f"], event["type"]) == ("txn", "produce", "ok")
