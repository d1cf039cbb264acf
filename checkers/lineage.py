"""Offset lineage: which input became which transaction, output record and read.

A check's verdict is a claim about records; the lineage graph is the evidence a reviewer can
follow: input record → the transactions that consumed it → the output records they produced →
the readers that saw them, plus the offsets each transaction committed for the group. A history
can hold ten million records, so whole-history numbers are Spark aggregates, and only the
neighbourhood of each reported example is fetched (small filters, one job per table) and built
as a networkx graph.

The transaction dependency graph (Elle's ww and wr edges between committed transactions) is
information, never a verdict: Kafka does not promise serializable transactions across
partitions, so concurrent transactions interleaving on several partitions form ww cycles in a
correct run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise, zip_longest
from typing import TYPE_CHECKING, Any

import networkx as nx
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from eoschaos.contract.history import FINAL_COMMITTED

if TYPE_CHECKING:
    from eoschaos.checkers.history_io import History

TXN_KEY_FIELDS = ("instance", "incarnation", "txn_seq")  # txn_seq restarts per incarnation
# The checks whose examples carry an input record's partition/offset (the others: output's).
INPUT_POSITION_CHECKS = ("delivery.lost", "delivery.duplicate-input")
MAX_NODES_PER_TYPE = 8  # per drawing; a 200-record transaction is summarised, not drawn whole
MAX_CYCLE_EXAMPLES = 3
# The committed-transaction graph has ~records/100 nodes and a few edges per node; past this
# many edges it is not collected into Python (cycles are then reported as not computed).
DEPENDENCY_EDGE_LIMIT = 2_000_000
CYCLE_NOTE = (
    "Information only, not part of the verdict: Kafka does not promise serializable "
    "transactions across partitions, so concurrent transactions interleaving on several "
    "partitions form ww cycles (G0) in a correct run."
)


def lineage_section(history: History, checks: dict, *, max_anomalies: int = 12) -> dict:
    """The verdict's "lineage": whole-history graph stats, anomaly subgraphs, G0/G1c cycles."""
    input_topic, output_topic = history.input_topic, history.output_topic
    return {
        "stats": graph_stats(history, input_topic, output_topic),
        "anomalies": anomaly_subgraphs(history, checks, input_topic, output_topic, max_anomalies),
        "cycles": dependency_cycles(history, input_topic, output_topic),
    }


def _txn_known() -> Column:
    instance, incarnation, seq = (F.col(name).isNotNull() for name in TXN_KEY_FIELDS)
    return instance & incarnation & seq


def _txn_column() -> Column:
    """An event's transaction as a struct of its three integers, null unless all are known.

    Whole-history plans compare and count these structs; the "i.n.s" text is built only for
    the few rows that reach Python.
    """
    return F.when(_txn_known(), F.struct(*TXN_KEY_FIELDS))


def _txn_text(prefix: str = "") -> Column:
    return F.concat_ws(".", *(F.col(f"{prefix}{name}") for name in TXN_KEY_FIELDS))


def _txn_of(row: dict) -> tuple[int, int, int] | None:
    values = tuple(row.get(name) for name in TXN_KEY_FIELDS)
    return None if None in values else values


def txn_key(row: dict) -> str | None:
    """A transaction's node name: "instance.incarnation.txn_seq"."""
    txn = _txn_of(row)
    return None if txn is None else ".".join(map(str, txn))


# --- whole-history statistics -------------------------------------------------------------


def graph_stats(history: History, input_topic: str, output_topic: str) -> dict[str, Any]:
    """Node and edge counts of the whole-history lineage graph, as DataFrame aggregates.

    Nodes: inputs (acked sends or records of the input scan, by id), transactions, output
    records (by partition/offset), reads (one per read event of an output record), committed
    offsets (one per transaction and input partition). The out-degree of an input counts the
    transactions that consumed it; its committed outputs are its records in the
    final-committed scan. Two Spark jobs (three shuffles); nothing per record reaches Python.
    """
    per_input = _per_input_stats(history, input_topic, output_topic)
    distinct = _distinct_counts(history, output_topic)
    return {
        "nodes": {
            "input": per_input["inputs"],
            "txn": distinct["txn"],
            "output": per_input["outputs"],
            "read": per_input["reads"],
            "offsets": distinct["offsets"],
        },
        "edges": {
            "consumed-by": per_input["consumed_by"],
            "produced": per_input["produced"],
            "read-by": per_input["reads"],
            "committed-offsets": distinct["offsets"],
        },
        "input_out_degree_max": per_input["out_degree_max"],
        "inputs_without_consumer": per_input["without_consumer"],
        "committed_outputs_per_input_max": per_input["committed_max"],
        "inputs_without_committed_output": per_input["without_committed"],
        "inputs_with_several_committed_outputs": per_input["several_committed"],
        "committed_transactions": distinct["committed"],
        "transactions_per_input_partition": distinct["per_input_partition"],
    }


def _per_input_stats(history: History, input_topic: str, output_topic: str) -> dict[str, int]:
    """Output reads grouped into output records, those grouped by record id with the sends and
    input-scan records, then summed over the ids: one job, two shuffles.

    An id with no acked send and no input-scan record is not an input (a phantom's id): its
    outputs and reads count, its degrees do not. A position two readers saw with different ids
    (an inconsistent-offsets anomaly) counts once, under one of them.
    """
    reads = history.kind("read")
    outputs = (
        reads.where(F.col("topic") == output_topic)
        .groupBy("partition", "offset")
        .agg(
            F.first("id", ignorenulls=True).alias("id"),
            F.first(_txn_column(), ignorenulls=True).alias("txn"),
            F.max((F.col("process") == FINAL_COMMITTED).cast("int")).alias("committed"),
            F.count("*").alias("reads"),
        )
        .select("id", F.lit(False), "txn", "committed", "reads", F.lit(1))
    )
    none = F.lit(None)
    inputs = (
        history.kind("send")
        .where(F.col("type") == "ok")
        .select("id")
        .union(reads.where(F.col("topic") == input_topic).select("id"))
        .select("id", F.lit(True), none, none, none, none)
    )
    per_id = (
        inputs.union(outputs)
        .toDF("id", "is_input", "txn", "committed", "reads", "output")
        .groupBy("id")
        .agg(
            F.max("is_input").alias("is_input"),
            F.size(F.collect_set("txn")).alias("consumers"),
            F.sum("committed").alias("committed"),
            F.sum("reads").alias("reads"),
            F.sum("output").alias("outputs"),
            F.count("txn").alias("produced"),
        )
    )
    is_input = F.col("is_input")
    committed = F.coalesce(F.col("committed"), F.lit(0))

    def over_inputs(condition: Column) -> Column:
        return F.count(F.when(is_input & condition, True))

    row = per_id.agg(
        over_inputs(F.lit(True)).alias("inputs"),
        F.sum("outputs").alias("outputs"),
        F.sum("produced").alias("produced"),
        F.sum("reads").alias("reads"),
        F.sum(F.when(is_input, F.col("consumers"))).alias("consumed_by"),
        F.max(F.when(is_input, F.col("consumers"))).alias("out_degree_max"),
        over_inputs(F.col("consumers") == 0).alias("without_consumer"),
        F.max(F.when(is_input, committed)).alias("committed_max"),
        over_inputs(committed == 0).alias("without_committed"),
        over_inputs(committed > 1).alias("several_committed"),
    ).first()
    return {name: int(row[name] or 0) for name in row.asDict()}


def _distinct_counts(history: History, output_topic: str) -> dict[str, Any]:
    """Transactions (from their events or output headers), committed transactions (records
    in the final-committed scan), committed offsets and transactions per input partition, as
    distinct (tag, transaction, partition) triples counted in one job. Each task de-duplicates
    before the shuffle, so a transaction's key travels a few times, not once per record."""
    events = history.kind("txn")
    outputs = history.kind("read").where(F.col("topic") == output_topic)
    committing = F.col("f").isin("send-offsets", "commit-offsets") & (F.col("type") == "ok")
    offsets = events.where(committing).select("*", F.explode("offsets").alias("entry"))
    none = F.lit(None)

    def keyed(tag: str, frame: DataFrame, txn: Column, partition: Column) -> DataFrame:
        return frame.select(F.lit(tag), txn, partition.cast("int"))

    known = outputs.where(_txn_known())
    committed = known.where(F.col("process") == FINAL_COMMITTED)
    union = (
        keyed("txn", events.where(_txn_known()), _txn_column(), none)
        .union(keyed("txn", known, _txn_column(), none))
        .union(keyed("committed", committed, _txn_column(), none))
        .union(
            keyed("offsets", offsets.where(_txn_known()), _txn_column(), F.col("entry.partition"))
        )
        .union(keyed("src", known, _txn_column(), F.col("src_partition")))
        .toDF("tag", "txn", "partition")
    )
    rows = union.distinct().groupBy("tag", "partition").count().collect()
    counts: dict[str, Any] = dict.fromkeys(("txn", "committed", "offsets"), 0)
    per_partition: dict[int, int] = {}
    for row in rows:
        if row["tag"] != "src":
            counts[row["tag"]] += row["count"]
        elif row["partition"] is not None:
            per_partition[row["partition"]] = row["count"]
    counts["per_input_partition"] = {str(p): n for p, n in sorted(per_partition.items())}
    return counts


# --- anomaly neighbourhoods ---------------------------------------------------------------


def anomaly_subgraphs(
    history: History, checks: dict, input_topic: str, output_topic: str, max_anomalies: int
) -> list[dict[str, Any]]:
    """One small lineage graph per example of a failing check, anomalous nodes marked.

    The neighbourhood of an example is every read of a record that *is* the example (same id,
    same transaction, or same topic/partition/offset), every read of another record derived
    from the same inputs, those inputs' sends and the events of every transaction involved.
    Fetched with one query per table for all examples together. Examples that name no record
    or transaction (liveness: a partition's end offsets, an open transactional.id) have no
    lineage and are not drawn.
    """
    examples = drawable_examples(checks, input_topic, output_topic)[:max_anomalies]
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
    all_txns = {_txn_of(row) for row in read_rows} | {key.txn for key in keys}
    send_rows = _rows_of(history.kind("send"), ids=all_ids)
    txn_rows = _rows_of(history.kind("txn"), txns=all_txns)

    anomalies = []
    for name, index, key in examples:
        own = [row for row in read_rows if key.matches(row)]
        ids = {row["id"] for row in own} | {key.id}
        rows = [row for row in read_rows if row["id"] in ids or key.matches(row)]
        txns = {_txn_of(row) for row in rows} | {key.txn}
        graph = lineage_graph(
            rows,
            [row for row in send_rows if row["id"] in ids],
            [row for row in txn_rows if _txn_of(row) in txns],
            input_topic,
            output_topic,
        )
        marked = anomalous_nodes(name, key, graph, output_topic)
        nx.set_node_attributes(graph, {node: node in marked for node in graph}, "anomalous")
        anomalies.append(
            {"check": name, "example": index, "title": f"{name}: {key.describe()}"}
            | serialize(graph, marked)
        )
    return anomalies


def drawable_examples(
    checks: dict, input_topic: str, output_topic: str
) -> list[tuple[str, int, ExampleKeys]]:
    """(check, example index, keys) of failing checks' examples that name a record or
    transaction, round-robin over the checks: every failing check is drawn once before any
    is drawn twice."""
    queues = []
    for name, check in checks.items():
        if not isinstance(check, dict) or check.get("verdict") != "FAIL":
            continue
        topic = input_topic if name in INPUT_POSITION_CHECKS else output_topic
        keyed = [
            (name, index, ExampleKeys.of(example, topic))
            for index, example in enumerate(check.get("examples") or [])
            if isinstance(example, dict)
        ]
        queues.append([entry for entry in keyed if entry[2].names_a_record])
    rounds = zip_longest(*queues)
    return [entry for round_ in rounds for entry in round_ if entry is not None]


@dataclass(frozen=True)
class ExampleKeys:
    """What identifies an example row: its record id, its transaction, its position, reader."""

    id: int | None
    txn: tuple[int, int, int] | None  # instance, incarnation, txn_seq
    position: tuple[str, int, int] | None
    process: str | None

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
        return cls(id_, txn, position, reader if isinstance(reader, str) else None)

    @property
    def txn_name(self) -> str | None:
        return None if self.txn is None else ".".join(map(str, self.txn))

    @property
    def names_a_record(self) -> bool:
        return self.id is not None or self.txn is not None or self.position is not None

    def matches(self, row: dict) -> bool:
        return (
            (self.id is not None and row["id"] == self.id)
            or (self.txn is not None and _txn_of(row) == self.txn)
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

    Ids are a small ``isin``; transactions a broadcast semi-join on their three integers, so
    no per-row key is built over a history of millions of rows.
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
    rows = frame.where(condition)
    if txn_list:
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
    input_topic: str,
    output_topic: str,
) -> nx.DiGraph:
    """input → txn (consumed-by) → output (produced) → read (read-by); txn → offsets."""
    graph = nx.DiGraph()
    _add_inputs(graph, read_rows, send_rows, input_topic)
    _add_transactions(graph, txn_rows)
    for row in sorted(read_rows, key=lambda row: row.get("time") or 0.0):
        if row["topic"] != output_topic:
            continue
        output = f"out:{row['partition']}:{row['offset']}"
        if output not in graph:
            graph.add_node(output, type="output", **_output_attributes(row))
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


def _add_inputs(
    graph: nx.DiGraph, read_rows: list[dict], send_rows: list[dict], input_topic: str
) -> None:
    """An input node per id that exists: sent (any outcome) or present in the input topic."""
    places: dict[int, set[tuple[int, int]]] = {}
    outcomes: dict[int, set[str]] = {}
    for row in send_rows:
        outcomes.setdefault(row["id"], set()).add(row["type"])
        if row["type"] == "ok":
            places.setdefault(row["id"], set()).add((row["partition"], row["offset"]))
    for row in read_rows:
        if row["topic"] == input_topic:
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


def anomalous_nodes(check: str, key: ExampleKeys, graph: nx.DiGraph, output_topic: str) -> set:
    """The nodes the example is about, so the drawing shows where the anomaly sits.

    Isolation checks mark the read (a reader saw what it should not; a whole transaction for
    a fractured read), delivery checks the records (a duplicate every committed output of its
    input, a phantom every output of its id), fencing checks the transaction. Any other check
    marks the record or transaction its example names.
    """
    family = check.split(".", 1)[0]
    txn = f"txn:{key.txn_name}" if key.txn_name is not None else None
    inputs = {f"in:{key.id}"} if key.id is not None and check != "delivery.phantom" else set()
    output, readers = None, set()
    if key.position is not None and key.position[0] == output_topic:
        output = f"out:{key.position[1]}:{key.position[2]}"
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
        marked = inputs | {output}
        if check in ("delivery.duplicate", "delivery.phantom"):
            marked |= {
                node
                for node, data in graph.nodes(data=True)
                if data["type"] == "output"
                and data.get("id") == key.id
                and (check == "delivery.phantom" or _read_by(graph, node, FINAL_COMMITTED))
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


# --- transaction dependency cycles --------------------------------------------------------


def dependency_cycles(history: History, input_topic: str, output_topic: str) -> dict[str, Any]:
    """G0 / G1c over committed transactions (those with records in the final-committed scan).

    ww: on each output partition, consecutive records by offset written by different
    transactions (the earlier one's write is overwritten in version order). wr: a transaction
    consumed an input record that another transaction wrote; in the workloads here the seeder
    writes every input, so wr edges appear only for chained pipelines. Counts are strongly
    connected components with a cycle; each example is a shortest cycle in one of them.
    """
    committed = history.kind("read").where((F.col("process") == FINAL_COMMITTED) & _txn_known())
    written = committed.where(F.col("topic") == output_topic)
    order = Window.partitionBy("partition").orderBy("offset")
    previous = [F.lag(name).over(order).alias(f"previous_{name}") for name in TXN_KEY_FIELDS]
    changed = F.lit(False)
    for name in TXN_KEY_FIELDS:
        changed = changed | (F.col(f"previous_{name}") != F.col(name))
    edges = (
        written.select(*previous, *TXN_KEY_FIELDS)
        .where(changed)
        .select(_txn_text("previous_").alias("source"), _txn_text().alias("target"), F.lit("ww"))
    )
    writers = committed.where(F.col("topic") == input_topic)
    if not writers.isEmpty():  # only chained pipelines consume records a transaction wrote
        written_by = writers.select(
            F.col("partition").alias("src_partition"),
            F.col("offset").alias("src_offset"),
            _txn_text().alias("source"),
        )
        consumers = written.select("src_partition", "src_offset", _txn_text().alias("target"))
        wr = (
            written_by.join(consumers, ["src_partition", "src_offset"])
            .where(F.col("source") != F.col("target"))
            .select("source", "target", F.lit("wr"))
        )
        edges = edges.union(wr)
    distinct_edges = edges.toDF("source", "target", "type").distinct()
    rows = distinct_edges.limit(DEPENDENCY_EDGE_LIMIT + 1).collect()
    if len(rows) > DEPENDENCY_EDGE_LIMIT:
        return {
            "G0": None,
            "G1c": None,
            "examples": [],
            "note": f"not computed: more than {DEPENDENCY_EDGE_LIMIT} dependency edges",
        }
    return find_cycles([(row["source"], row["target"], row["type"]) for row in rows])


def find_cycles(edges: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Count G0 (ww only) and G1c (with a wr edge) components; up to three example cycles."""
    graph = nx.DiGraph()
    for source, target, kind in edges:
        if graph.has_edge(source, target):
            graph[source][target]["types"].add(kind)
        else:
            graph.add_edge(source, target, types={kind})
    ww_graph = graph.edge_subgraph(
        (source, target) for source, target, data in graph.edges(data=True) if "ww" in data["types"]
    )
    g0 = _cyclic_components(ww_graph)
    g1c = [
        component
        for component in _cyclic_components(graph)
        if any(
            "wr" in graph[source][target]["types"]
            for source, target in graph.subgraph(component).edges
        )
    ]
    examples = [_example_cycle(ww_graph, component, "G0") for component in g0]
    examples += [_example_cycle(graph, component, "G1c") for component in g1c]
    return {
        "G0": len(g0),
        "G1c": len(g1c),
        "examples": examples[:MAX_CYCLE_EXAMPLES],
        "transactions": graph.number_of_nodes(),
        "ww_edges": sum("ww" in data["types"] for _, _, data in graph.edges(data=True)),
        "wr_edges": sum("wr" in data["types"] for _, _, data in graph.edges(data=True)),
        "note": CYCLE_NOTE,
    }


def _cyclic_components(graph: nx.DiGraph) -> list[set[str]]:
    components = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    return sorted(components, key=lambda component: (len(component), min(component)))


def _example_cycle(graph: nx.DiGraph, component: set[str], anomaly: str) -> dict[str, Any]:
    """A shortest cycle through the component's first node (G1c: through its first wr edge)."""
    sub = graph.subgraph(component)
    if anomaly == "G1c":
        start, via = min(
            (source, target)
            for source, target, data in sub.edges(data=True)
            if "wr" in data["types"]
        )
        cycle = [start, *nx.shortest_path(sub, via, start)]
    else:
        start = min(component)
        paths = (nx.shortest_path(sub, via, start) for via in sub.successors(start))
        cycle = [start, *min(paths, key=lambda path: (len(path), path))]
    return {
        "anomaly": anomaly,
        "component_size": len(component),
        "cycle": cycle,
        "edges": [
            {
                "source": source,
                "target": target,
                "type": "+".join(sorted(sub[source][target]["types"])),
            }
            for source, target in pairwise(cycle)
        ],
    }
