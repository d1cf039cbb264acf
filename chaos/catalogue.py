"""The fault catalogue and the target grammar: every name `--faults` and schedule files accept.

A fault hits either a broker (its process or its network links), every broker in turn, or a
workload instance. Broker targets may be *dynamic* — the leader of a partition, a coordinator,
the active controller — and are then resolved by the nemesis at the moment the fault starts,
because who leads or coordinates changes during a run; `broker:random` and `instance:random`
are resolved from the seed when the schedule is made, so a schedule replays exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from eoschaos.clusters.kafka_proxy import API_KEYS, ERROR_CODES
from eoschaos.contract.errors import EoschaosError

Scope = Literal["broker", "cluster", "instance"]


@dataclass(frozen=True)
class FaultSpec:
    name: str
    scope: Scope
    duration: float  # default hold in seconds; 0 = instantaneous or "as long as it takes"
    summary: str
    takes_broker_out: bool = False  # a broker stops serving peers or clients while it holds
    params: dict[str, Any] = field(default_factory=dict)
    needs_lane: bool = False  # works on the instance's own client lane (a proxy per broker)
    # acts on chosen Kafka requests: the cluster has the protocol proxy on its client links
    needs_protocol_proxy: bool = False
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a string param's values


# Broker faults hold 6 s: past the brokers' session timeout and the clients' default request
# timeouts scaled down in kip447, short enough for several faults in a one-minute run.
# A zombie must outlast the processors' session timeout (6 s, expired by 7.5 s at the latest)
# so the group rebalances, and come back before its open transaction and queued records time
# out (20 s / 15 s in kip447) so it still tries to finish them: the attempt fencing must reject.
CATALOGUE: dict[str, FaultSpec] = {
    spec.name: spec
    for spec in (
        FaultSpec("kill", "broker", 6.0, "kill -9 the broker, restart it on its data", True),
        FaultSpec("bounce", "broker", 6.0, "SIGTERM (controlled shutdown), then restart", True),
        FaultSpec(
            "rolling-restart", "cluster", 0.0, "clean restart of every broker, one by one", True
        ),
        FaultSpec("pause", "broker", 6.0, "SIGSTOP the broker, SIGCONT at heal", True),
        FaultSpec(
            "partition",
            "broker",
            6.0,
            "cut the broker off from clients (its peers still reach it)",
            True,
            {"mode": "silent"},
        ),
        FaultSpec(
            "isolate-peers",
            "broker",
            6.0,
            "cut the broker off from its peers: controller links both ways, inter-broker "
            "inbound (clients still reach it)",
            True,
            {"mode": "silent"},
        ),
        FaultSpec(
            "split",
            "broker",
            6.0,
            "minority (the target) away from the majority and from clients",
            True,
            {"mode": "silent"},
        ),
        FaultSpec(
            "latency",
            "broker",
            6.0,
            "ack delay: latency on broker → client only",
            params={"latency_ms": 500, "jitter_ms": 100},
        ),
        FaultSpec(
            "bandwidth", "broker", 6.0, "broker → client limited to rate KB/s", params={"rate": 16}
        ),
        FaultSpec(
            "reset",
            "broker",
            4.0,
            "client connections reset (TCP RST) after timeout ms",
            params={"timeout_ms": 100},
        ),
        FaultSpec(
            "slicer",
            "broker",
            6.0,
            "broker → client data sliced into small delayed packets",
            params={"average_size": 64, "size_variation": 32, "delay_us": 200},
        ),
        FaultSpec("crash", "instance", 0.0, "kill -9 an instance; its supervisor replaces it"),
        FaultSpec(
            "zombie", "instance", 8.5, "SIGSTOP an instance mid-transaction past its session"
        ),
        FaultSpec(
            "twin",
            "instance",
            8.0,
            "start a second instance with a live instance's transactional.id",
        ),
        # As long as a zombie: the instance's session expires, its partitions move, and it
        # comes back still holding a transaction that fencing must reject.
        FaultSpec(
            "isolate-instance",
            "instance",
            8.5,
            "cut an instance off from every broker (its own client lane), heal after duration",
            params={"mode": "silent"},
            needs_lane=True,
        ),
        # Each request held past the kip447 processors' 10 s call timeout, and on for long
        # enough to hold a commit's two requests to the coordinator one after the other:
        # AddOffsetsToTxn (send-offsets), then EndTxn (commit).
        FaultSpec(
            "delay-endtxn",
            "instance",
            25.0,
            "hold an instance's requests to its transaction coordinator (its commit) for "
            "hold_ms, then release them",
            params={"hold_ms": 11000},
            needs_lane=True,
        ),
        # Through the Kafka protocol proxy on the instance's own lane (no root needed): each
        # acts on the instance's next requests of one API and holds for long enough to catch
        # one of its commits (kip447 commits every ~1 s, Streams every 100 ms).
        FaultSpec(
            "lose-endtxn-response",
            "instance",
            10.0,
            "lose the answer to an instance's next commit (EndTxn): the commit happened, the "
            "client does not know it and retries",
            needs_lane=True,
            needs_protocol_proxy=True,
        ),
        FaultSpec(
            "coordinator-error",
            "instance",
            10.0,
            "answer an instance's next `limit` requests of `api` with `error`, in place of the "
            "broker",
            params={"api": "EndTxn", "error": "NOT_COORDINATOR", "limit": 3},
            needs_lane=True,
            needs_protocol_proxy=True,
            choices={"api": tuple(API_KEYS), "error": tuple(ERROR_CODES)},
        ),
        # KAFKA-17754's reordering. late_ms: when the stale commit lands after the client gave
        # the held connection up, as a stalled TCP stream's next retransmission lands it
        # (docs/schedules.md). The client lets go after its request timeout: kip447 after 10 s,
        # the Streams app after 5 s; one with Java's default (30 s) needs a longer duration.
        FaultSpec(
            "stale-endtxn",
            "instance",
            15.0,
            "hold an instance's next EndTxn (its commit) in the protocol proxy; once the "
            "client retried on a new connection and moved on, let the stale commit land",
            params={"late_ms": 2500},
            needs_lane=True,
            needs_protocol_proxy=True,
        ),
        # A rebalance made by killing the instance; 10 answers outlast a client's first
        # retries of each member's fetch (librdkafka and Java retry it after a backoff).
        FaultSpec(
            "unstable-offset-fetch",
            "instance",
            15.0,
            "kill an instance and answer the group's next `limit` stable offset fetches "
            "UNSTABLE_OFFSET_COMMIT, as while a transactional offset commit is pending",
            params={"limit": 10},
            needs_protocol_proxy=True,
        ),
        # The 99-duplicates lead's window (docs/findings.md) made on purpose: held until the
        # instance's session (6 s in kip447) has expired and its partitions moved, and healed
        # before kip447's 20 s transaction timeout, so the held commit still commits, as the
        # lead's did.
        FaultSpec(
            "pending-commit",
            "instance",
            14.0,
            "hold an instance's next commit (EndTxn) in the protocol proxy and freeze the "
            "instance: its partitions move while their transactional offset commit is "
            "pending; heal: deliver the commit, then thaw the instance",
            needs_lane=True,
            needs_protocol_proxy=True,
        ),
        # A crash landing in the window of a commit: after what a client does before it
        # commits (Kafka Streams writes the transaction's updates into its stores) and before
        # the commit, a window of milliseconds that a plain crash almost never hits (KAFKA-20685).
        FaultSpec(
            "crash-in-commit",
            "instance",
            0.0,
            "hold an instance's next commit (EndTxn) in the protocol proxy and kill -9 the "
            "instance while it is held; the commit never arrives, its supervisor replaces it",
            needs_lane=True,
            needs_protocol_proxy=True,
        ),
        FaultSpec(
            "duplicate-produce",
            "instance",
            10.0,
            "deliver an instance's next `limit` produce requests twice (it sees one answer)",
            params={"limit": 5},
            needs_lane=True,
            needs_protocol_proxy=True,
        ),
        # KAFKA-19690's stall: past a transaction timeout (10 s in the Streams app, 20 s in
        # kip447) and the coordinator's sweep for timed-out transactions that follows it.
        FaultSpec(
            "late-produce",
            "instance",
            25.0,
            "hold an instance's next produce request in the protocol proxy until the heal, "
            "then deliver it: its batch lands after its transaction timed out",
            needs_lane=True,
            needs_protocol_proxy=True,
        ),
    )
}
FAULTS = tuple(CATALOGUE)
PARTITION_MODES = ("silent", "fail-fast")  # timeout toxic (data dropped) vs proxy disabled

DYNAMIC_BROKER_TARGETS = ("coordinator", "group-coordinator", "controller")
_BROKER = re.compile(r"broker:(\d+|random)")
_INSTANCE = re.compile(r"instance:(\d+|random)")
_LEADER = re.compile(r"leader:([^/\s]+)/(\d+)")
TARGET_HELP = (
    "broker:<id>, broker:random, leader:<topic>/<partition> (topic may be input or output), "
    "coordinator, group-coordinator, controller, instance:<n>, instance:random"
)


def needs_protocol_proxy(faults: Iterable[str]) -> bool:
    """Whether any of `faults` acts on chosen requests (the cluster needs the protocol proxy)."""
    return any(CATALOGUE[fault].needs_protocol_proxy for fault in faults)


def default_target(fault: str) -> str:
    scope = CATALOGUE[fault].scope
    return {"broker": "broker:random", "cluster": "all", "instance": "instance:random"}[scope]


def check_target(fault: str, target: str) -> None:
    """Bad input if `target` is not in the grammar or does not fit the fault's scope."""
    scope = CATALOGUE[fault].scope
    if scope == "cluster":
        ok = target == "all"
    elif scope == "instance":
        ok = _INSTANCE.fullmatch(target) is not None
    else:
        ok = (
            _BROKER.fullmatch(target) is not None
            or _LEADER.fullmatch(target) is not None
            or target in DYNAMIC_BROKER_TARGETS
        )
    if not ok:
        expected = {
            "cluster": "all (it restarts every broker)",
            "instance": "instance:<n> or instance:random",
            "broker": TARGET_HELP.split(", instance")[0],
        }[scope]
        raise EoschaosError(f"fault {fault!r} cannot target {target!r}; use {expected}")


def fixed_number(target: str) -> int | None:
    """The id in `broker:<id>` / `instance:<n>`; None for random, dynamic and `all` targets."""
    match = _BROKER.fullmatch(target) or _INSTANCE.fullmatch(target)
    if match and match.group(1) != "random":
        return int(match.group(1))
    return None


def leader_of(target: str) -> tuple[str, int] | None:
    """(topic, partition) of a `leader:<topic>/<partition>` target, else None."""
    match = _LEADER.fullmatch(target)
    return (match.group(1), int(match.group(2))) if match else None


def is_dynamic(target: str) -> bool:
    """Resolved by the nemesis when the fault starts, not when the schedule is made."""
    return target in DYNAMIC_BROKER_TARGETS or _LEADER.fullmatch(target) is not None
