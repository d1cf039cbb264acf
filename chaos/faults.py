"""The faults of the catalogue, one unit each: apply it now, return how to heal it.

Grouped as broker faults (the node's process), network faults (Toxiproxy between the node and
its clients or peers), instance faults (the workload's processes) and protocol faults (the
Kafka protocol proxy acting on an instance's chosen requests). The nemesis resolves a
fault's target and times its start and heal; a unit only does the harm and knows the cure.
Adding a fault = one catalogue row (chaos/catalogue.py) + one unit registered in UNITS.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from eoschaos.clusters.admin import wait_answers_for_itself
from eoschaos.clusters.base import Cluster
from eoschaos.clusters.kafka_proxy import KafkaProxyAPI, ProtocolRule, error_name
from eoschaos.clusters.ports import Link, lane_link
from eoschaos.contract.history import (
    FAULT_TOOK_EFFECT,
    await_instance_event,
    instance_history_files,
)

HEAL_TIMEOUT_S = 120.0
# How long an aimed fault follows its instance for a produced batch before it gives up and
# strikes anyway (recorded as mid_transaction false). Long enough to outlast a replacement's
# start and first rebalance: a moment missed there is re-aimed at the next incarnation.
ZOMBIE_TRIGGER_WAIT_S = 20.0
# How long a heal waits for a stale EndTxn to land and be answered: far past any late_ms.
STALE_LANDING_WAIT_S = 30.0
# How long a pending commit's heal waits between delivering the held commit and thawing its
# instance: a client thawed at once finds the request past its timeout and retries the commit
# while the held one is still on its way, which is another fault (stale-endtxn).
PENDING_COMMIT_ANSWER_WAIT_S = 1.0

Heal = Callable[[], None]


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


@dataclass
class FaultContext:
    """What the units act on, and what they tell the nemesis back."""

    cluster: Cluster
    workload: Workload
    run_dir: Path
    progress: Callable[[str], None]
    recovering: bool = False  # a broker came back; its replicas may still be catching up


# ----------------------------------------------------------------- broker faults


def _restarted(ctx: FaultContext, node_id: int) -> None:
    ctx.cluster.start_node(node_id)
    wait_answers_for_itself(ctx.cluster.client_address(node_id), node_id, HEAL_TIMEOUT_S)
    ctx.recovering = True


def _was_running(ctx: FaultContext, params: dict[str, Any]) -> None:
    """Record whether the broker ran when the fault struck: one already down takes no harm."""
    params["was_running"] = ctx.cluster.node_alive(params["broker"])
    if not params["was_running"]:
        params[FAULT_TOOK_EFFECT] = False


def kill(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    node_id = params["broker"]
    _was_running(ctx, params)
    ctx.cluster.kill_node(node_id)
    return lambda: _restarted(ctx, node_id)


def bounce(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """Controlled shutdown: leadership moves away before the broker exits."""
    node_id = params["broker"]
    _was_running(ctx, params)
    if not ctx.cluster.stop_node(node_id, timeout=HEAL_TIMEOUT_S):
        raise RuntimeError(f"broker {node_id} ignored SIGTERM for {HEAL_TIMEOUT_S:.0f}s")
    return lambda: _restarted(ctx, node_id)


def rolling_restart(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """An operator's rolling restart: each broker stopped cleanly and started again, the
    next one only once the cluster is healthy. All of it happens when the fault starts."""
    for node_id in ctx.cluster.spec.node_ids:
        ctx.progress(f"rolling restart: broker {node_id}")
        ctx.cluster.stop_node(node_id, timeout=HEAL_TIMEOUT_S)
        _restarted(ctx, node_id)
        ctx.cluster.wait_healthy(timeout=HEAL_TIMEOUT_S)
    ctx.recovering = False
    params["brokers_restarted"] = len(ctx.cluster.spec.node_ids)
    return lambda: None


def pause(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    node_id = params["broker"]
    _was_running(ctx, params)
    ctx.cluster.pause_node(node_id)

    def heal() -> None:
        ctx.cluster.resume_node(node_id)
        ctx.recovering = True

    return heal


# ----------------------------------------------------------------- network faults


def _cut(ctx: FaultContext, links: list[tuple[int, Link]], params: dict[str, Any]) -> Heal:
    """Cut each (node, link). silent: a timeout toxic with timeout 0 in both directions
    (connections stay open, every byte is dropped); fail-fast: the proxy is disabled (its
    listener closes and its connections are dropped at once).

    Healing a silent cut also drops the connections it held: the bytes it swallowed are
    gone for good (unlike packets TCP would resend after a real partition), so those
    streams are broken and would otherwise hang until a request timeout (30 s)."""
    mode = params.get("mode", "silent")
    params["links_cut"] = len(links)
    toxics: list[tuple[int, Link, str]] = []
    for node_id, link in links:
        if mode == "fail-fast":
            ctx.cluster.set_link_enabled(node_id, link, False)
            continue
        for stream in ("upstream", "downstream"):
            name = ctx.cluster.add_toxic(
                node_id, link, "timeout", stream=stream, attributes={"timeout": 0}
            )
            toxics.append((node_id, link, name))

    def heal() -> None:
        for node_id, link, name in toxics:
            ctx.cluster.remove_toxic(node_id, link, name)
        for node_id, link in links:
            if toxics:
                ctx.cluster.set_link_enabled(node_id, link, False)
            ctx.cluster.set_link_enabled(node_id, link, True)
        ctx.recovering = True

    return heal


def _client_links(ctx: FaultContext, node_id: int) -> list[tuple[int, Link]]:
    return [(node_id, link) for link in ctx.cluster.client_links()]


def partition_from_clients(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    return _cut(ctx, _client_links(ctx, params["broker"]), params)


def isolate_from_peers(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """Both ways on the controller links (the node's Raft traffic and broker heartbeats
    stop, so the majority fences it); inbound on the inter-broker link (peers cannot fetch
    from it, while its own fetches from them still flow: every node is reached at one
    inter-broker address, so that direction cannot be told apart)."""
    return _cut(ctx, ctx.cluster.peer_links(params["broker"]), params)


def split(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """The target is the minority side: as if its host left the network, away from the
    majority and from the clients (which run on the majority's side)."""
    node_id = params["broker"]
    return _cut(ctx, _client_links(ctx, node_id) + ctx.cluster.peer_links(node_id), params)


def isolate_instance(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """The instance's host leaves the network: its lane is cut on every broker, while the
    other instances and eoschaos's own clients still reach the whole cluster.

    Aimed like a zombie: at a produced, uncommitted batch. The instance is frozen for the
    few milliseconds the cut takes to install, so its send-offsets and commit cannot slip
    through first; it then sits cut off mid-transaction past its session. Cut between
    batches, it would only lose its partitions and have nothing left to be fenced."""
    instance = params["instance"]
    lane = _own_lane(ctx, instance)
    links = [(node_id, lane) for node_id in ctx.cluster.spec.node_ids]
    _freeze_mid_transaction(ctx, instance, params)
    try:
        return _cut(ctx, links, params)
    finally:
        ctx.workload.resume_instance(instance)


def _own_lane(ctx: FaultContext, instance: int) -> Link:
    """The instance's own client lane, which faults on one instance work on."""
    lane = lane_link(instance)
    if lane not in ctx.cluster.client_links():
        raise LookupError(f"instance {instance} has no lane of its own on this cluster")
    return lane


def _toxic_on_clients(
    ctx: FaultContext, params: dict[str, Any], toxic: str, attributes: dict[str, Any]
) -> Heal:
    """A toxic on broker → client only (every client link): requests arrive intact,
    answers are hurt."""
    node_id = params["broker"]
    names = [
        (link, ctx.cluster.add_toxic(node_id, link, toxic, attributes=attributes))
        for link in ctx.cluster.client_links()
    ]
    params["links_hurt"] = len(names)

    def heal() -> None:
        for link, name in names:
            ctx.cluster.remove_toxic(node_id, link, name)

    return heal


def ack_delay(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    attributes = {"latency": params["latency_ms"], "jitter": params.get("jitter_ms", 0)}
    return _toxic_on_clients(ctx, params, "latency", attributes)


def bandwidth(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    return _toxic_on_clients(ctx, params, "bandwidth", {"rate": params["rate"]})


def reset(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    return _toxic_on_clients(ctx, params, "reset_peer", {"timeout": params["timeout_ms"]})


def slicer(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    attributes = {
        "average_size": params["average_size"],
        "size_variation": params["size_variation"],
        "delay": params["delay_us"],  # Toxiproxy's name; microseconds
    }
    return _toxic_on_clients(ctx, params, "slicer", attributes)


# ----------------------------------------------------------------- instance faults


def crash(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    ctx.workload.kill_instance(params["instance"])
    return lambda: None  # the workload's supervisor starts the replacement


def zombie(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """Freeze the instance in the middle of a transaction — records consumed, output
    produced, nothing committed yet — the moment that makes a zombie dangerous. A pause
    that lands between batches only costs the instance its partitions."""
    instance = params["instance"]
    _freeze_mid_transaction(ctx, instance, params)
    return lambda: ctx.workload.resume_instance(instance)


def twin(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """A second process with the instance's transactional.id: its init_transactions must
    fence the live one, whatever the live one still tries to commit."""
    twin = ctx.workload.start_twin(params["instance"])
    params["twin"] = twin
    return lambda: ctx.workload.stop_twin(twin)


def delay_endtxn(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """Hold what the instance sends its transaction coordinator -- AddOffsetsToTxn and EndTxn:
    its commit -- for hold_ms (a latency toxic on its own lane to that broker, client to broker
    only), past the client's request timeout, so the client times out, retries or moves on
    while the request is still on its way; the heal removes the toxic and releases what it
    still holds. Aimed like a zombie: frozen right after it produced a batch, the instance
    cannot send its commit before the hold is in place.

    What it can reorder (docs/schedules.md): Toxiproxy keeps one connection's bytes in order,
    so a held request is overtaken only by requests on other connections -- produce requests
    to leaders on other brokers, offset commits to a group coordinator on another broker, a
    retry on a new connection once the hold is gone -- never by the same client's later
    requests to the same coordinator over the held connection. Everything else the instance
    sends that broker on its lane (fetches, heartbeats if it is also the group coordinator)
    is held too."""
    instance = params["instance"]
    lane = _own_lane(ctx, instance)
    transactional_id = ctx.workload.transactional_id(instance)
    if transactional_id is None:
        raise LookupError(f"instance {instance} has no transactional.id: no commit to hold")
    coordinator = ctx.cluster.transaction_coordinator(transactional_id)
    params["coordinator"] = coordinator
    _freeze_mid_transaction(ctx, instance, params)
    try:
        name = ctx.cluster.add_toxic(
            coordinator,
            lane,
            "latency",
            stream="upstream",
            attributes={"latency": params["hold_ms"], "jitter": 0},
        )
    finally:
        ctx.workload.resume_instance(instance)
    held_from = time.monotonic()

    def heal() -> None:
        ctx.cluster.remove_toxic(coordinator, lane, name)
        params["held_s"] = round(time.monotonic() - held_from, 3)

    return heal


# ----------------------------------------------------------------- Kafka protocol faults


def _protocol_fault(
    ctx: FaultContext,
    params: dict[str, Any],
    fault: str,
    effect: str,
    **rule: Any,
) -> Heal:
    """A rule on the instance's own lane (`_own_lane_rule`), removed at the heal. What the
    rule did goes into the params; the fault took effect if it did `effect` (an Effects
    count) at least once."""
    proxy, rule_id = _own_lane_rule(ctx, params, fault, **rule)
    return _removing_rule(proxy, rule_id, params, effect)


def _removing_rule(proxy: KafkaProxyAPI, rule_id: str, params: dict[str, Any], effect: str) -> Heal:
    """The heal of a protocol fault: release what its rule holds, record what the rule did
    (the release counted), and remove it; the fault took effect if it did `effect` at least
    once."""

    def heal() -> None:
        proxy.release(rule_id)
        effects = proxy.rule(rule_id)["effects"]
        proxy.remove_rule(rule_id, release=True)
        params["effects"] = {name: count for name, count in effects.items() if count}
        if not effects[effect]:
            params[FAULT_TOOK_EFFECT] = False

    return heal


def lose_endtxn_response(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """The instance's next commit (EndTxn) reaches its coordinator, which decides it, but the
    answer never reaches the instance: the connection's return path breaks from that answer on,
    the request times out and the client retries the commit on a new connection, for a
    transaction already decided. A correct client and coordinator agree that it committed;
    a client that takes the timeout for a failure and aborts or replays, or a coordinator that
    counts the retry as a new transaction, leaves a trace in the history."""
    return _protocol_fault(
        ctx,
        params,
        "lose-endtxn-response",
        "dropped_responses",
        api="EndTxn",
        action="drop-response",
        limit=1,
    )


def coordinator_error(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """The instance's next `limit` requests of `api` are answered with `error` by the proxy;
    the broker never sees them. Retriable errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    CONCURRENT_TRANSACTIONS) must cost a correct client a retry and nothing else; a fatal one
    (INVALID_TXN_STATE, PRODUCER_FENCED) must end its transaction without a trace in the
    output."""
    return _protocol_fault(
        ctx,
        params,
        "coordinator-error",
        "answered",
        api=params["api"],
        action="answer",
        error=params["error"],
        limit=params["limit"],
    )


def duplicate_produce(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """The instance's next `limit` produce requests reach their leaders twice; the instance
    sees the first answer. An idempotent producer's copy is refused by its sequence number;
    any other producer's is written twice."""
    return _protocol_fault(
        ctx,
        params,
        "duplicate-produce",
        "duplicated",
        api="Produce",
        action="duplicate",
        limit=params["limit"],
    )


def late_produce(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """A batch late past its transaction's timeout, the stall KAFKA-19690 reports (docs/findings.md
    says why it misses that bug's window): the protocol proxy holds the instance's next produce
    request (its transaction's records) until the heal, and the requests behind it on
    that connection, as a stalled link would. Held past the transaction timeout, the batch
    reaches its leader after the coordinator aborted the transaction on its own: a client still
    waiting on the request (its request timeout outlasts the hold) gets the leader's answer,
    which must be a fencing error it recovers from, never a fatal one. A client that gave the
    request up retried it on a new connection, and the held copy lands alone, late: its
    sequence number must refuse it. `effects` says which (`released_alone`: the client had
    gone)."""
    return _protocol_fault(
        ctx, params, "late-produce", "held", api="Produce", action="hold", limit=1
    )


def unstable_offset_fetch(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """A rebalance while the group's offsets are not yet stable: the instance is killed (its
    replacement starts as after `crash`), and the next `limit` offset fetches of the
    workload's group that ask for stable offsets -- the survivors' for the partitions they
    take over, the replacement's for its own -- are answered UNSTABLE_OFFSET_COMMIT, as the
    group coordinator answers them while a transactional offset commit of a partition waits
    for its transaction's end. A correct consumer retries until the offsets are stable and
    starts from them; one that takes the answer for "no committed offset" starts where
    auto.offset.reset says and reads again what was already processed (the 99-duplicates lead
    of docs/findings.md). Every lane: the group's members fetch through their own."""
    proxy = ctx.cluster.kafka_proxy
    rule_id = f"unstable-offset-fetch-{params['instance']}-{time.monotonic_ns()}"
    rule = ProtocolRule(
        rule_id,
        api="OffsetFetch",
        action="answer",
        group=ctx.workload.group,
        error="UNSTABLE_OFFSET_COMMIT",
        limit=params["limit"],
    )
    proxy.add_rule(rule)
    ctx.workload.kill_instance(params["instance"])
    return _removing_rule(proxy, rule_id, params, "answered")


def pending_commit(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """The 99-duplicates lead's window (docs/findings.md), made on purpose rather than by
    chance: the protocol proxy holds the instance's next commit (EndTxn), so the offsets its
    transaction sent are written and pending at the group coordinator, and the instance is
    frozen as soon as the commit is held. Its session expires, its partitions move to the other
    members, and their offset fetches meet the pending commit: a correct read_committed member
    is told UNSTABLE_OFFSET_COMMIT and waits; one told "no committed offset" starts where
    auto.offset.reset says and processes again what the held transaction consumed. The heal
    delivers the held commit while the instance is still frozen (the transaction commits unless
    it timed out meanwhile) and thaws it PENDING_COMMIT_ANSWER_WAIT_S later. No commit held
    within ZOMBIE_TRIGGER_WAIT_S: nothing frozen, and the fault took no effect."""
    instance = params["instance"]
    proxy, rule_id, view = _hold_next_commit(ctx, params, "pending-commit")
    if view is None:
        return lambda: None
    ctx.workload.pause_instance(instance)

    def heal() -> None:
        effects = proxy.rule(rule_id)["effects"]
        proxy.remove_rule(rule_id, release=True)
        params["effects"] = {name: count for name, count in effects.items() if count}
        held_ms = time.time() * 1000 - _moments(view)["held"]
        params["pending_s"] = round(held_ms / 1000, 3)  # the commit held, its offsets pending
        time.sleep(PENDING_COMMIT_ANSWER_WAIT_S)
        ctx.workload.resume_instance(instance)

    return heal


def crash_in_commit(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """A crash inside a commit: the protocol proxy holds the instance's next commit (EndTxn),
    the instance is killed (-9) while it is held, and the held request is dropped, so the
    instance dies after all it does before committing and the transaction is aborted (by its
    replacement's InitProducerId, or its timeout). Kafka Streams writes a transaction's updates
    into its state stores before it commits, and whatever of them RocksDB had written to disk
    belongs to a transaction that will be aborted: a restart must wipe the stores (under
    exactly-once) or restore over them, and one that reuses them (KAFKA-20685,
    docs/findings.md) aggregates again on top of them. No
    commit held within ZOMBIE_TRIGGER_WAIT_S: nothing killed, and the fault took no effect."""
    proxy, rule_id, view = _hold_next_commit(ctx, params, "crash-in-commit")
    if view is not None:
        ctx.workload.kill_instance(params["instance"])
        effects = proxy.rule(rule_id)["effects"]
        proxy.remove_rule(rule_id, release=False)  # the commit dies with its instance
        params["effects"] = {name: count for name, count in effects.items() if count}
    return lambda: None  # the workload's supervisor starts the replacement


def _hold_next_commit(
    ctx: FaultContext, params: dict[str, Any], fault: str
) -> tuple[KafkaProxyAPI, str, dict[str, Any] | None]:
    """Hold the instance's next EndTxn on its own lane; the proxy, the rule's id and its view
    once a commit is held. None for the view if none was within ZOMBIE_TRIGGER_WAIT_S: the
    rule is removed then, and the fault took no effect."""
    proxy, rule_id = _own_lane_rule(ctx, params, fault, api="EndTxn", action="hold", limit=1)
    deadline = time.monotonic() + ZOMBIE_TRIGGER_WAIT_S
    view = proxy.rule(rule_id)
    while not view["effects"]["held"] and time.monotonic() < deadline:
        time.sleep(0.02)
        view = proxy.rule(rule_id)
    if view["effects"]["held"]:
        return proxy, rule_id, view
    proxy.remove_rule(rule_id, release=True)
    params[FAULT_TOOK_EFFECT] = False
    return proxy, rule_id, None


def stale_endtxn(ctx: FaultContext, params: dict[str, Any]) -> Heal:
    """KAFKA-17754's reordering (docs/findings.md): the protocol proxy holds the instance's next
    EndTxn (its commit), and the connection behind it, as a stalled TCP stream would. When the
    client's request times out it closes the connection and retries the commit on a new one,
    which passes; `late_ms` after that close the proxy delivers the held EndTxn alone, on a
    connection of its own, into whatever transaction the client has open by then, and notes the
    coordinator's answer. The heal waits until the stale request has landed (at most
    STALE_LANDING_WAIT_S), so that no next fault blurs which transaction it hit; a client that
    never gave the connection up before the heal only saw a delay, and the fault took no effect."""
    proxy, rule_id = _own_lane_rule(
        ctx,
        params,
        "stale-endtxn",
        api="EndTxn",
        action="hold",
        release_after_close_ms=params["late_ms"],
        limit=1,
    )

    def landing(view: dict[str, Any]) -> bool:
        """A stale request is on its way: held after its client closed, or released alone
        and not yet answered (the coordinator's answer says what it made of it)."""
        moments = _moments(view)
        if view["effects"]["released_alone"]:
            return "answer" not in moments
        return bool(view["holding"]) and "client-closed" in moments

    def heal() -> None:
        deadline = time.monotonic() + STALE_LANDING_WAIT_S
        view = proxy.rule(rule_id)
        while landing(view) and time.monotonic() < deadline:
            time.sleep(0.05)
            view = proxy.rule(rule_id)
        proxy.remove_rule(rule_id, release=True)  # a client still waiting sees a delay end
        moments = _moments(view)
        params["effects"] = {name: count for name, count in view["effects"].items() if count}
        if "held" in moments and "client-closed" in moments:
            params["held_s"] = round((moments["client-closed"] - moments["held"]) / 1000, 3)
        if "delivered-alone" in moments:
            landed = moments["delivered-alone"] - moments["client-closed"]
            params["landed_after_close_s"] = round(landed / 1000, 3)
            answer = next((e for e in view["events"] if e["kind"] == "answer"), None)
            if answer is not None and answer.get("error_code") is not None:
                params["late_answer"] = error_name(answer["error_code"])
        else:
            params[FAULT_TOOK_EFFECT] = False  # no commit was held until its client gave up

    return heal


def _own_lane_rule(
    ctx: FaultContext, params: dict[str, Any], fault: str, **rule: Any
) -> tuple[KafkaProxyAPI, str]:
    """Put a rule of the protocol proxy on the instance's own lane to every broker (its lane
    carries its requests alone); the proxy and the rule's id, to read and remove it by."""
    lane = _own_lane(ctx, params["instance"])
    proxy = ctx.cluster.kafka_proxy
    rule_id = f"{fault}-{params['instance']}-{time.monotonic_ns()}"
    lanes = [ctx.cluster.proxy_name(node_id, lane) for node_id in ctx.cluster.spec.node_ids]
    proxy.add_rule(ProtocolRule(rule_id, lanes=lanes, **rule))
    return proxy, rule_id


def _moments(view: dict[str, Any]) -> dict[str, int]:
    """When each kind of a rule's events first happened (ms since the epoch)."""
    moments: dict[str, int] = {}
    for event in view["events"]:
        moments.setdefault(event["kind"], event["at_ms"])
    return moments


def _freeze_mid_transaction(ctx: FaultContext, instance: int, params: dict[str, Any]) -> None:
    """SIGSTOP the instance right after it produced a batch (or after the wait runs out);
    whether it was caught mid-transaction goes into the fault's params, the recorded
    effect that tests and reviewers rest on. A black box (Streams, Spark, a user's
    pipeline) records no transactions to aim at: it is frozen at once, which is the fault's
    effect, and its params say nothing of a transaction they cannot know."""
    if not instance_history_files(ctx.run_dir, instance):
        ctx.workload.pause_instance(instance)
        return
    params["mid_transaction"] = await_instance_event(
        ctx.run_dir, instance, _produced_a_batch, ZOMBIE_TRIGGER_WAIT_S
    )
    if not params["mid_transaction"]:
        # nothing in flight: no transaction for fencing to reject
        params[FAULT_TOOK_EFFECT] = False
    ctx.workload.pause_instance(instance)


def _produced_a_batch(event: dict[str, Any]) -> bool:
    """The instance produced its transaction's records and has not committed yet."""
    return (event["kind"], event["f"], event["type"]) == ("txn", "produce", "ok")


UNITS: dict[str, Callable[[FaultContext, dict[str, Any]], Heal]] = {
    "kill": kill,
    "bounce": bounce,
    "rolling-restart": rolling_restart,
    "pause": pause,
    "partition": partition_from_clients,
    "isolate-peers": isolate_from_peers,
    "split": split,
    "latency": ack_delay,
    "bandwidth": bandwidth,
    "reset": reset,
    "slicer": slicer,
    "crash": crash,
    "zombie": zombie,
    "twin": twin,
    "isolate-instance": isolate_instance,
    "delay-endtxn": delay_endtxn,
    "lose-endtxn-response": lose_endtxn_response,
    "coordinator-error": coordinator_error,
    "duplicate-produce": duplicate_produce,
    "late-produce": late_produce,
    "stale-endtxn": stale_endtxn,
    "unstable-offset-fetch": unstable_offset_fetch,
    "pending-commit": pending_commit,
    "crash-in-commit": crash_in_commit,
}
