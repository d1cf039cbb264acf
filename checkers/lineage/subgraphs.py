"""Anomaly neighbourhoods: for each reported example, the few records and transactions around
it, fetched with small filters and drawn as a networkx graph with the anomalous nodes marked."""

from __future__ import annotations

import functools
import operator
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

import networkx as nx
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.lineage.from_logs import (
    Around,
    LogTransactions,
    LogTxn,
    PlainLog,
    add_log_transactions,
    explain,
    explain_plain,
    txn_node,
)
from eoschaos.checkers.lineage.keys import TXN_KEY_FIELDS, txn_key, txn_of
from eoschaos.contract.checks import CATALOGUE, DUPLICATE, PHANTOM, CheckResult
from eoschaos.contract.history import FINAL_COMMITTED

if TYPE_CHECKING:
    from eoschaos.checkers.history_io import History

MAX_NODES_PER_TYPE = 8  # per drawing; a 200-record transaction is summarised, not drawn whole
# At most this many transactions are asked for in a scan's filter, beyond it by a semi-join:
# in the filter they cost no second scan of the reads, and a filter of thousands plans slowly
TXNS_IN_FILTER = 16


def anomaly_subgraphs(
    history: History,
    checks: dict[str, CheckResult],
    input_topics: tuple[str, ...],
    output_topics: tuple[str, ...],
    max_anomalies: int,
    log_txns: DataFrame | None = None,
    plain_log: PlainLog | None = None,
) -> list[dict[str, Any]]:
    """One small lineage graph per example of a failing check, anomalous nodes marked.

    The neighbourhood of an example is every read of a record that *is* the example (same id,
    same transaction, or same topic/partition/offset), every read of another record derived
    from the same inputs, those inputs' sends and the events of every transaction involved.
    Fetched with one query per table for all examples together. Examples that name no record
    or transaction (liveness: a partition's end offsets, an open transactional.id) have no
    lineage and are not drawn.

    With the logs' transaction table (`log_txns`), each example also says in words which of
    its transactions consumed and wrote its records, per the brokers' logs; a graph with no
    transaction from a client history shows the logs' transactions instead, and an example
    naming a transaction of the table (a torn or hanging one) is drawn with its ranges.
    Without the table, the logs of a pipeline without transactions (`plain_log`) say when its
    group committed past each input record and when each output record was written.
    """
    with_logs = log_txns is not None
    examples = drawable_examples(checks, input_topics[0], output_topics[0], with_logs)
    examples = examples[:max_anomalies]
    if not examples:
        return []
    keys = [key for _, _, key in examples]
    reads = history.kind("read")
    direct = _rows_of(
        reads,
        ids={key.id for key in keys},
        txns={key.txn for key in keys},
        positions={key.position for key in keys},
    )
    related_ids = {row["id"] for row in direct} - {key.id for key in keys}
    read_rows = _dedupe(direct + _rows_of(reads, ids=related_ids))
    all_ids = {row["id"] for row in read_rows} | {key.id for key in keys}
    all_txns = {txn_of(row) for row in read_rows} | {key.txn for key in keys}
    send_rows = _rows_of(history.kind("send"), ids=all_ids)
    txn_rows = _rows_of(history.kind("txn"), txns=all_txns)

    graphs = []
    for _, _, key in examples:
        own = [row for row in read_rows if key.matches(row)]
        ids = {row["id"] for row in own} | {key.id}
        rows = [row for row in read_rows if row["id"] in ids or key.matches(row)]
        txns = {txn_of(row) for row in rows} | {key.txn}
        graphs.append(
            lineage_graph(
                rows,
                [row for row in send_rows if row["id"] in ids],
                [row for row in txn_rows if txn_of(row) in txns],
                input_topics,
                output_topics,
            )
        )
    found = (
        LogTransactions.around(
            log_txns,
            [_around(graph, key) for graph, (_, _, key) in zip(graphs, examples, strict=True)],
        )
        if with_logs
        else LogTransactions()
    )
    arounds = [_around(graph, key) for graph, (_, _, key) in zip(graphs, examples, strict=True)]
    plain = plain_log.around(arounds) if plain_log is not None and not with_logs else None
    anomalies = []
    for graph, (name, index, key) in zip(graphs, examples, strict=True):
        if not any(data["type"] == "txn" for _, data in graph.nodes(data=True)):
            add_log_transactions(graph, found, key.log_txn)
        marked = anomalous_nodes(name, key, graph, output_topics)
        nx.set_node_attributes(graph, {node: node in marked for node in graph}, "anomalous")
        drawing = serialize(graph, marked)
        anomaly = {"check": name, "example": index, "title": f"{name}: {key.describe()}"}
        shown = [node["id"] for node in drawing["nodes"]]
        if with_logs:
            anomaly["from_logs"] = explain(graph, shown, found, key.log_txn)
        elif plain is not None:
            anomaly["from_logs"] = explain_plain(graph, shown, plain)
        anomalies.append(anomaly | drawing)
    return anomalies


def _around(graph: nx.DiGraph, key: ExampleKeys) -> Around:
    """The records and transaction an example's graph asks the logs about."""
    nodes = graph.nodes(data=True)
    return Around(
        inputs=frozenset(
            tuple(place)
            for _, data in nodes
            if data["type"] == "input"
            for place in data["positions"]
        ),
        outputs=frozenset(data["position"] for _, data in nodes if data["type"] == "output"),
        txns=frozenset([key.log_txn] if key.log_txn is not None else []),
    )


def drawable_examples(
    checks: dict[str, CheckResult], input_topic: str, output_topic: str, with_logs: bool = False
) -> list[tuple[str, int, ExampleKeys]]:
    """(check, example index, keys) of failing checks' examples that name a record or
    transaction (one of the logs' only `with_logs`), round-robin over the checks: every
    failing check is drawn once before any is drawn twice."""
    queues = []
    for name, check in checks.items():
        if not check.failed:
            continue
        on_input = name in CATALOGUE and CATALOGUE[name].examples_on_input
        topic = input_topic if on_input else output_topic
        keyed = [
            (name, index, ExampleKeys.of(example, topic))
            for index, example in enumerate(check.examples)
        ]
        queues.append(
            [
                entry
                for entry in keyed
                if entry[2].names_a_record or (with_logs and entry[2].log_txn is not None)
            ]
        )
    rounds = zip_longest(*queues)
    return [entry for round_ in rounds for entry in round_ if entry is not None]


@dataclass(frozen=True)
class ExampleKeys:
    """What identifies an example row: its record id, its transaction, its position, reader."""

    id: int | None
    txn: tuple[int, int, int] | None  # instance, incarnation, txn_seq
    position: tuple[str, int, int] | None
    process: str | None
    log_txn: LogTxn | None = None  # a transaction of the logs' table: producer id, number

    @classmethod
    def of(cls, example: dict, default_topic: str) -> ExampleKeys:
        """Keys of a checker's example row; a position without a topic is in default_topic."""
        id_ = _as_int(example.get("id"))
        partition, offset = _as_int(example.get("partition")), _as_int(example.get("offset"))
        topic = example.get("topic") if isinstance(example.get("topic"), str) else default_topic
        known = partition is not None and offset is not None
        position = (topic, partition, offset) if known else None
        parts = tuple(_as_int(example.get(name)) for name in TXN_KEY_FIELDS)
        txn = None if None in parts else parts
        reader = example.get("process") or example.get("reader")
        producer, seq = _as_int(example.get("producer_id")), _as_int(example.get("log_txn_seq"))
        log_txn = None if producer is None or seq is None else (producer, seq)
        return cls(id_, txn, position, reader if isinstance(reader, str) else None, log_txn)

    @property
    def txn_name(self) -> str | None:
        return None if self.txn is None else ".".join(map(str, self.txn))

    @property
    def names_a_record(self) -> bool:
        return self.id is not None or self.txn is not None or self.position is not None

    def matches(self, row: dict) -> bool:
        return (
            (self.id is not None and row["id"] == self.id)
            or (self.txn is not None and txn_of(row) == self.txn)
            or (self.position is not None and _position(row) == self.position)
        )

    def describe(self) -> str:
        parts = []
        if self.id is not None:
            parts.append(f"id {self.id}")
        if self.txn_name is not None:
            parts.append(f"transaction {self.txn_name}")
        if self.position is not None:
            topic, partition, offset = self.position
            parts.append(f"{topic} p{partition}@{offset}")
        if self.log_txn is not None:
            parts.append(f"transaction #{self.log_txn[1]} of producer {self.log_txn[0]}")
        if self.process is not None:
            parts.append(f"by {self.process}")
        return ", ".join(parts) or "no record fields in the example"


def _as_int(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _position(row: dict) -> tuple[str, int, int]:
    return (row["topic"], row["partition"], row["offset"])


def _rows_of(
    frame: DataFrame,
    *,
    ids: Iterable[int | None] = (),
    txns: Iterable[tuple[int, int, int] | None] = (),
    positions: Iterable[tuple[str, int, int] | None] = (),
) -> list[dict]:
    """Rows with one of the ids, transactions or (topic, partition, offset): one Spark job.

    Ids are a small ``isin``. Up to TXNS_IN_FILTER transactions (the examples' own) join the
    same filter, so the table is scanned once; more (every transaction around the examples)
    are a broadcast semi-join on their three integers, which scans it a second time. Neither
    builds a per-row key over a history of millions of rows.
    """
    id_list = sorted(id_ for id_ in ids if id_ is not None)
    txn_list = sorted(txn for txn in txns if txn is not None)
    places = sorted(position for position in positions if position is not None)
    if not (id_list or txn_list or places):
        return []
    condition = F.col("id").isin(id_list) if id_list else F.lit(False)
    for topic, partition, offset in places:
        place = (F.col("topic") == topic) & (F.col("partition") == partition)
        condition = condition | (place & (F.col("offset") == offset))
    few_txns = len(txn_list) <= TXNS_IN_FILTER
    if few_txns:
        for txn in txn_list:
            condition = condition | functools.reduce(
                operator.and_,
                (F.col(name) == value for name, value in zip(TXN_KEY_FIELDS, txn, strict=True)),
            )
    rows = frame.where(condition)
    if not few_txns:
        wanted = frame.sparkSession.createDataFrame(
            txn_list, "instance INT, incarnation INT, txn_seq LONG"
        )
        rows = rows.unionByName(frame.join(F.broadcast(wanted), list(TXN_KEY_FIELDS), "left_semi"))
    return _collect(rows)


def _collect(frame: DataFrame) -> list[dict]:
    return [row.asDict(recursive=True) for row in frame.collect()]


def _dedupe(rows: list[dict]) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for row in rows:
        seen.setdefault(tuple((name, repr(value)) for name, value in sorted(row.items())), row)
    return list(seen.values())


def lineage_graph(
    read_rows: list[dict],
    send_rows: list[dict],
    txn_rows: list[dict],
    input_topics: tuple[str, ...],
    output_topics: tuple[str, ...],
) -> nx.DiGraph:
    """input → txn (consumed-by) → output (produced) → read (read-by); txn → offsets."""
    graph = nx.DiGraph()
    _add_inputs(graph, read_rows, send_rows, input_topics)
    _add_transactions(graph, txn_rows)
    for row in sorted(read_rows, key=lambda row: row.get("time") or 0.0):
        if row["topic"] not in output_topics:
            continue
        output = output_node(row["topic"], row["partition"], row["offset"], output_topics)
        if output not in graph:
            graph.add_node(
                output,
                type="output",
                position=(row["partition"], row["offset"]),
                **_output_attributes(row),
            )
        reader, repeat = f"read:{row['process']}:{row['partition']}:{row['offset']}", 1
        while reader in graph:  # the same reader read the record again: its own node
            repeat += 1
            reader = f"read:{row['process']}:{row['partition']}:{row['offset']}#{repeat}"
        graph.add_node(
            reader,
            type="read",
            label=str(row["process"]) + (f" (read {repeat})" if repeat > 1 else ""),
            detail=f"{row['process']} ({row.get('isolation') or '?'}) read id {row['id']} "
            f"at {row.get('time')}",
            process=row["process"],
            position=(row["partition"], row["offset"]),
        )
        graph.add_edge(output, reader, type="read-by")
        source = f"in:{row['id']}" if f"in:{row['id']}" in graph else None
        txn = txn_key(row)
        if txn is None:  # no transactions (alos): the input produced the output directly
            if source:
                graph.add_edge(source, output, type="produced")
            continue
        if f"txn:{txn}" not in graph:
            graph.add_node(f"txn:{txn}", type="txn", **_txn_attributes(txn, []))
        graph.add_edge(f"txn:{txn}", output, type="produced")
        if source:
            graph.add_edge(source, f"txn:{txn}", type="consumed-by")
    return graph


def output_node(topic: str, partition: int, offset: int, output_topics: tuple[str, ...]) -> str:
    """An output record's node: `out:PARTITION:OFFSET` on the first output topic, with its
    topic in front on any other (a run with several output topics)."""
    if topic == output_topics[0]:
        return f"out:{partition}:{offset}"
    return f"out:{topic}:{partition}:{offset}"


def _add_inputs(
    graph: nx.DiGraph, read_rows: list[dict], send_rows: list[dict], input_topics: tuple[str, ...]
) -> None:
    """An input node per id that exists: sent (any outcome) or present in the input topic."""
    places: dict[int, set[tuple[int, int]]] = {}
    outcomes: dict[int, set[str]] = {}
    for row in send_rows:
        outcomes.setdefault(row["id"], set()).add(row["type"])
        if row["type"] == "ok":
            places.setdefault(row["id"], set()).add((row["partition"], row["offset"]))
    for row in read_rows:
        if row["topic"] in input_topics:
            places.setdefault(row["id"], set()).add((row["partition"], row["offset"]))
            outcomes.setdefault(row["id"], set())
    for id_ in sorted(outcomes):
        positions = sorted(places.get(id_, ()))
        where = ", ".join(f"p{p}@{o}" for p, o in positions) or _send_outcome(outcomes[id_])
        graph.add_node(
            f"in:{id_}",
            type="input",
            label=f"id {id_} {where}",
            detail=f"input id {id_}: {where}; send events: {', '.join(sorted(outcomes[id_]))}",
            id=id_,
            positions=positions,
        )


def _send_outcome(types: set[str]) -> str:
    if "fail" in types:
        return "send failed"
    return "not acked" if types else "not sent"


def _add_transactions(graph: nx.DiGraph, txn_rows: list[dict]) -> None:
    by_txn: dict[str, list[dict]] = {}
    for row in txn_rows:
        by_txn.setdefault(txn_key(row), []).append(row)
    for txn, events in sorted(by_txn.items()):
        graph.add_node(f"txn:{txn}", type="txn", **_txn_attributes(txn, events))
        for event in events:
            if event["f"] in ("send-offsets", "commit-offsets") and event["type"] == "ok":
                for entry in event.get("offsets") or []:
                    node = f"offsets:{txn}:{entry['partition']}"
                    graph.add_node(
                        node,
                        type="offsets",
                        label=f"p{entry['partition']} → {entry['offset']}",
                        detail=f"{event['f']} of {txn}: input p{entry['partition']} "
                        f"next offset {entry['offset']}",
                    )
                    graph.add_edge(f"txn:{txn}", node, type="committed-offsets")


def _txn_attributes(txn: str, events: list[dict]) -> dict[str, Any]:
    outcome = txn_outcome(events)
    fates = {event["fate"] for event in events if event.get("fate")}
    txn_ids = {event["txn_id"] for event in events if event.get("txn_id")}
    generations = {event["generation"] for event in events if event.get("generation") is not None}
    detail = (
        f"transaction {txn} (instance.incarnation.seq): {outcome}; intended fate "
        f"{'/'.join(sorted(fates)) or '?'}; txn_id {'/'.join(sorted(txn_ids)) or '?'}; "
        f"generation {'/'.join(map(str, sorted(generations))) or '?'}"
    )
    return {"label": f"txn {txn} {outcome}", "detail": detail}


def txn_outcome(events: list[dict]) -> str:
    """What the history says happened to a transaction (no events: only seen in headers)."""
    if not events:
        return "no events"
    seen = {(event["f"], event["type"]) for event in events}
    if ("commit", "ok") in seen:
        return "committed"
    if any(f == "abort" for f, _ in seen):
        return "aborted"
    if ("commit", "fail") in seen:
        return "commit failed"
    if ("commit", "info") in seen:
        return "commit unknown"
    if any(f == "fenced" for f, _ in seen):
        return "fenced"
    if ("commit-offsets", "ok") in seen:
        return "offsets committed"
    return "open"


def _output_attributes(row: dict) -> dict[str, Any]:
    place = f"p{row['partition']}@{row['offset']}"
    source = f"src p{row.get('src_partition')}@{row.get('src_offset')}"
    return {
        "label": f"{place} id {row['id']}",
        "detail": f"output {place}: id {row['id']}, {source}, fate {row.get('fate') or '?'}, "
        f"txn_id {row.get('txn_id') or '?'}, generation {row.get('generation')}",
        "id": row["id"],
    }


def anomalous_nodes(
    check: str, key: ExampleKeys, graph: nx.DiGraph, output_topics: tuple[str, ...]
) -> set:
    """The nodes the example is about, so the drawing shows where the anomaly sits.

    Isolation checks mark the read (a reader saw what it should not; a whole transaction for
    a fractured read), delivery checks the records (a duplicate every committed output of its
    input, a phantom every output of its id), fencing checks the transaction. Any other check
    marks the record or transaction its example names.
    """
    family = check.split(".", 1)[0]
    txn = f"txn:{key.txn_name}" if key.txn_name is not None else None
    if txn is None and key.log_txn is not None:
        txn = txn_node(key.log_txn)
    inputs = {f"in:{key.id}"} if key.id is not None and check != PHANTOM.name else set()
    output, readers = None, set()
    if key.position is not None and key.position[0] in output_topics:
        output = output_node(*key.position, output_topics)
        readers = {
            node
            for node, data in graph.nodes(data=True)
            if data["type"] == "read"
            and data["process"] == key.process
            and data["position"] == key.position[1:]
        }
    elif key.position is not None:
        inputs |= {
            node
            for node, data in graph.nodes(data=True)
            if data["type"] == "input" and key.position[1:] in data["positions"]
        }
    if family == "isolation":
        first = next((node for node in (output, txn) if node in graph), None)
        marked = readers or ({first} if first else inputs)
    elif family == "fencing":
        marked = {txn}
    elif family == "delivery":
        # a check of a whole transaction (torn) names no record: the transaction
        marked = inputs | {output} if inputs or output else {txn}
        if check in (DUPLICATE.name, PHANTOM.name):
            marked |= {
                node
                for node, data in graph.nodes(data=True)
                if data["type"] == "output"
                and data.get("id") == key.id
                and (check == PHANTOM.name or _read_by(graph, node, FINAL_COMMITTED))
            }
    else:
        marked = {output or txn} | inputs
    return {node for node in marked if node in graph}


def _read_by(graph: nx.DiGraph, output: str, process: str) -> bool:
    return any(graph.nodes[reader].get("process") == process for reader in graph.successors(output))


def serialize(graph: nx.DiGraph, marked: set[str]) -> dict[str, Any]:
    """Nodes and edges as JSON, at most MAX_NODES_PER_TYPE of each type, nearest the anomaly."""
    kept = _nearest(graph, marked)
    omitted: dict[str, int] = {}
    for node, data in graph.nodes(data=True):
        if node not in kept:
            omitted[data["type"]] = omitted.get(data["type"], 0) + 1
    return {
        "nodes": [
            {
                "id": node,
                "type": graph.nodes[node]["type"],
                "label": graph.nodes[node]["label"],
                "detail": graph.nodes[node].get("detail", ""),
                "anomalous": node in marked,
            }
            for node in kept
        ],
        "edges": [
            {"source": source, "target": target, "type": data["type"]}
            for source, target, data in graph.edges(data=True)
            if source in kept and target in kept
        ],
        "omitted": omitted,
    }


def _nearest(graph: nx.DiGraph, marked: set[str]) -> list[str]:
    """Breadth-first from the anomalous nodes, keeping each type until it is full."""
    undirected = graph.to_undirected(as_view=True)
    seeds = sorted(marked) or sorted(graph)
    kept: list[str] = []
    per_type: dict[str, int] = {}
    queue, seen = deque(seeds), set(seeds)
    while queue:
        node = queue.popleft()
        node_type = graph.nodes[node]["type"]
        if per_type.get(node_type, 0) >= MAX_NODES_PER_TYPE:
            continue
        per_type[node_type] = per_type.get(node_type, 0) + 1
        kept.append(node)
        for neighbour in sorted(undirected.neighbors(node)):
            if neighbour not in seen:
                seen.add(neighbour)
                queue.append(neighbour)
    return kept
