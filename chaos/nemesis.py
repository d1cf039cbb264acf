"""The nemesis: applies a schedule of faults to a cluster and a workload, and heals them.

Every fault is recorded in the history (writer `nemesis`): `invoke` when it starts, `ok` once
healed (a killed broker: once it runs and answers again), `fail` with the error if it could not
be applied. Before the next *broker* fault the nemesis waits until no partition is
under-replicated, so a broker fault never lands on a cluster still recovering from the last;
instance faults need not wait for that.
`heal_all()` is safe to call at any time, from the run's `finally`, and heals what is active.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from chaos.schedule import BROKER_FAULTS, FaultEvent
from clusters.admin import wait_answers_for_itself
from clusters.process_backend import ProcessCluster
from eoschaos.history import HistoryWriter

HEAL_TIMEOUT_S = 120.0
ZOMBIE_TRIGGER_WAIT_S = 5.0


class Instances(Protocol):
    """What the nemesis needs from a workload to hurt its instances."""

    def kill_instance(self, instance: int) -> None: ...
    def pause_instance(self, instance: int) -> None: ...
    def resume_instance(self, instance: int) -> None: ...


def _target_number(target: str) -> int:
    return int(target.split(":", 1)[1])


class Nemesis:
    def __init__(
        self,
        cluster: ProcessCluster,
        instances: Instances,
        run_dir: Path,
        progress: Callable[[str], None],
    ) -> None:
        self.cluster = cluster
        self.instances = instances
        self.progress = progress
        self.history = HistoryWriter(run_dir, "nemesis")
        self._active: list[tuple[FaultEvent, Callable[[], None]]] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._recovering = False  # a broker came back; its replicas may still be catching up

    def run(self, schedule: list[FaultEvent], t0: float, stop: threading.Event) -> None:
        """Apply each fault at its time (monotonic `t0` + at); none starts once `stop` is set.

        A fault that started holds for its full duration even if `stop` comes meanwhile (a
        zombie cut short would not outlast the session timeout); only `close()` cuts it short.
        """
        for event in schedule:
            if stop.wait(max(0.0, t0 + event.at - time.monotonic())):
                return
            if not self._apply(event):
                continue
            self._closing.wait(event.duration)
            self._heal_latest()

    def heal_all(self) -> None:
        while self._active:
            self._heal_latest()

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

    def _apply(self, event: FaultEvent) -> bool:
        if self._closing.is_set():
            return False
        if event.fault in BROKER_FAULTS and self._recovering:
            self.progress("waiting for under-replicated partitions to clear before the next fault")
            self.cluster.wait_healthy(timeout=HEAL_TIMEOUT_S)
            self._recovering = False
        self.progress(f"fault: {event.fault} {event.target} for {event.duration:g}s")
        self._record("invoke", event)
        try:
            heal = self._start(event)
        except Exception as exc:  # a fault that cannot be applied is news, not a crash
            self._record("fail", event, error=f"{type(exc).__name__}: {exc}")
            self.progress(f"fault {event.fault} {event.target} could not be applied: {exc}")
            return False
        with self._lock:
            self._active.append((event, heal))
        return True

    def _heal_latest(self) -> None:
        with self._lock:
            if not self._active:
                return
            event, heal = self._active.pop()
        try:
            heal()
        except Exception as exc:
            self._record("fail", event, error=f"heal failed: {type(exc).__name__}: {exc}")
            raise
        self._record("ok", event)
        self.progress(f"healed: {event.fault} {event.target}")

    def _start(self, event: FaultEvent) -> Callable[[], None]:
        number = _target_number(event.target)
        starters: dict[str, Callable[[int, dict[str, Any]], Callable[[], None]]] = {
            "kill": self._kill_broker,
            "latency": self._ack_delay,
            "crash": self._crash_instance,
            "zombie": self._zombie_instance,
        }
        return starters[event.fault](number, event.params)

    def _kill_broker(self, node_id: int, _params: dict[str, Any]) -> Callable[[], None]:
        self.cluster.kill_node(node_id)

        def heal() -> None:
            self.cluster.start_node(node_id)
            wait_answers_for_itself(self.cluster.client_address(node_id), node_id, HEAL_TIMEOUT_S)
            self._recovering = True

        return heal

    def _ack_delay(self, node_id: int, params: dict[str, Any]) -> Callable[[], None]:
        """Latency on broker → client only: requests arrive on time, acknowledgements late."""
        attributes = {"latency": params["latency_ms"], "jitter": params.get("jitter_ms", 0)}
        name = self.cluster.add_toxic(node_id, "client", "latency", attributes=attributes)
        return lambda: self.cluster.remove_toxic(node_id, "client", name)

    def _crash_instance(self, instance: int, _params: dict[str, Any]) -> Callable[[], None]:
        self.instances.kill_instance(instance)
        return lambda: None  # the workload's supervisor starts the replacement

    def _zombie_instance(self, instance: int, params: dict[str, Any]) -> Callable[[], None]:
        """Freeze the instance in the middle of a transaction — records consumed, output
        produced, nothing committed yet — the moment that makes a zombie dangerous. A pause
        that lands between batches only costs the instance its partitions."""
        params["mid_transaction"] = self._await_transaction(instance, ZOMBIE_TRIGGER_WAIT_S)
        self.instances.pause_instance(instance)
        return lambda: self.instances.resume_instance(instance)

    def _await_transaction(self, instance: int, timeout: float) -> bool:
        """Follow the instance's live history until it produces a batch (True), or timeout."""
        files = sorted(
            (self.history.path.parent).glob(f"processor-{instance}.*.jsonl"),
            key=lambda path: path.stat().st_mtime,
        )
        if not files:
            return False
        deadline = time.monotonic() + timeout
        with files[-1].open() as live:
            live.seek(0, 2)
            while time.monotonic() < deadline:
                line = live.readline()
                if not line:
                    time.sleep(0.002)
                elif '"f":"produce"' in line and '"type":"ok"' in line:
                    return True
        return False
