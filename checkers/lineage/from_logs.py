"""The transactions around an anomaly, from the brokers' logs alone, for any pipeline.

A client history names the transaction behind each output record only for our instrumented
processors. The logs' transaction table (eoschaos.checkers.log_transactions) names it for any
transactional pipeline: a transaction *consumed* an input record when one of its offset commits
moved its group's committed offset of the record's partition past it (from the offset committed
just before, up to its own), and it *wrote* an output record when one of its batch ranges holds
the record's offset. So an anomaly's drawing can show input → transaction → output, and say in
words which transactions consumed and produced each record, with no client history.

Only the transactions around the examples reach Python: one action over the table (it grows
with transactions, not records) for every example together.

A pipeline that commits its offsets outside transactions (at-least-once) leaves no transaction
to name, but its group's plain commits and its output's batches are in the logs too
(`PlainLog`): each input record is placed against the commits that moved the group past it,
and each output record against the batch that holds it and when it was written. A duplicate
then reads as what it is: two copies written before the group first committed past their input,
so whoever started over in between read it again from the offset committed before.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eoschaos.checkers.log_transactions import COMMIT

Place = tuple[int, int]  # (partition, offset)
LogTxn = tuple[int, int]  # (producer id, its transaction's number in its id's log)
KEY = ["producer_id", "txn_seq"]  # a producer id serves one transactional id: unique


@dataclass(frozen=True)
class Around:
    """What one example's drawing asks the logs about: its input and output records'
    places and the transactions it names."""

    inputs: frozenset[Place] = frozenset()
    outputs: frozenset[Place] = frozenset()
    txns: frozenset[LogTxn] = frozenset()


@dataclass
class LogTransactions:
    """The logs' transactions around some examples, as collected rows, each with its
    offset commits (input ranges) and output ranges."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def around(cls, table: DataFrame, wanted: Iterable[Around]) -> LogTransactions:
        """The table's transactions that consumed an input place, wrote an output place or are
        named by any of `wanted`: one Spark action. The places (a transaction of a few hundred
        records is a few hundred) are a broadcast side joined by partition, never one filter
        expression per place."""
        wanted = list(wanted)
        spark = table.sparkSession
        inputs = sorted({place for around in wanted for place in around.inputs})
        outputs = sorted({place for around in wanted for place in around.outputs})
        txns = sorted({txn for around in wanted for txn in around.txns})
        hits = []
        if inputs:
            commits = table.select(*KEY, F.explode("offsets").alias("c")).select(*KEY, "c.*")
            places = spark.createDataFrame(inputs, "partition INT, place LONG")
            consumed = (F.col("offset") > F.col("place")) & (
                F.col("previous").isNull() | (F.col("previous") <= F.col("place"))
            )
            hits.append(commits.join(F.broadcast(places), "partition").where(consumed))
        if outputs:
            pieces = table.select(*KEY, F.explode("output").alias("o")).select(*KEY, "o.*")
            places = spark.createDataFrame(outputs, "partition INT, place LONG")
            held = F.col("place").between(F.col("first_offset"), F.col("last_offset"))
            hits.append(pieces.join(F.broadcast(places), "partition").where(held))
        if txns:
            hits.append(spark.createDataFrame(txns, "producer_id LONG, txn_seq LONG"))
        if not hits:
            return cls()
        found = functools.reduce(DataFrame.unionByName, (hit.select(*KEY) for hit in hits))
        rows = table.join(F.broadcast(found.distinct()), KEY, "left_semi").collect()
        return cls([row.asDict(recursive=True) for row in rows])

    def consumers(self, place: Place) -> list[dict[str, Any]]:
        """The transactions whose offset commits consumed the input record at `place`."""
        return [row for row in self.rows if any(_consumed(c, place) for c in row["offsets"])]

    def writers(self, place: Place) -> list[dict[str, Any]]:
        """The transactions whose output ranges hold the output record at `place`."""
        return [row for row in self.rows if any(_held(piece, place) for piece in row["output"])]

    def named(self, txn: LogTxn) -> dict[str, Any] | None:
        return next((row for row in self.rows if log_txn_of(row) == txn), None)


def log_txn_of(row: dict[str, Any]) -> LogTxn:
    return (row["producer_id"], row["txn_seq"])


def _consumed(commit: dict[str, Any], place: Place) -> bool:
    previous = commit.get("previous")
    return (
        commit["partition"] == place[0]
        and commit["offset"] > place[1]
        and (previous is None or previous <= place[1])
    )


def _held(piece: dict[str, Any], place: Place) -> bool:
    partition, offset = place
    return (
        piece["partition"] == partition and piece["first_offset"] <= offset <= piece["last_offset"]
    )


# --- the graph and the words ------------------------------------------------------------------


def txn_node(txn: LogTxn) -> str:
    """A transaction of the logs' node name in a drawing."""
    producer, seq = txn
    return f"logtxn:{producer}.{seq}"


def node_of(row: dict[str, Any]) -> str:
    return txn_node(log_txn_of(row))


def name_of(row: dict[str, Any]) -> str:
    """A transaction in words: its id, number, producer id and epoch, and its fate."""
    return (
        f"transaction #{row['txn_seq']} of {row['txn_id']} (producer {row['producer_id']}, "
        f"epoch {row['epoch']}, {row['fate']})"
    )


def _commit_text(commit: dict[str, Any]) -> str:
    start = "the start" if commit.get("previous") is None else commit["previous"]
    return f"p{commit['partition']} {start} → {commit['offset']} ({commit['fate']})"


def _range_text(piece: dict[str, Any]) -> str:
    return (
        f"p{piece['partition']}@{piece['first_offset']}..{piece['last_offset']} "
        f"({piece['records']} records, {piece['fate']})"
    )


def add_log_transactions(graph: nx.DiGraph, found: LogTransactions, named: LogTxn | None) -> None:
    """Put the logs' transactions into an example's graph: input → transaction (consumed-by,
    with the offsets it committed) → output (produced), replacing a direct input → output
    edge the logs now explain; the named transaction with all its ranges."""
    inputs = [(n, d) for n, d in graph.nodes(data=True) if d["type"] == "input"]
    outputs = [(n, d) for n, d in graph.nodes(data=True) if d["type"] == "output"]
    for node, data in inputs:
        for place in data.get("positions") or []:
            for row in found.consumers(tuple(place)):
                _add_transaction(graph, row)
                graph.add_edge(node, node_of(row), type="consumed-by")
    for node, data in outputs:
        for row in found.writers(data["position"]):
            _add_transaction(graph, row)
            graph.add_edge(node_of(row), node, type="produced")
    row = found.named(named) if named is not None else None
    if row is not None:
        _add_transaction(graph, row)
        for piece in row["output"]:
            if not any(_held(piece, d["position"]) for _, d in outputs):
                range_node = f"outrange:{piece['partition']}:{piece['first_offset']}"
                graph.add_node(range_node, type="output", label=_range_text(piece), detail="")
                graph.add_edge(node_of(row), range_node, type="produced")
    explained = [
        (source, target)
        for source, target, kind in graph.edges(data="type")
        if kind == "produced"
        and graph.nodes[source]["type"] == "input"
        and any(
            graph.has_edge(source, txn) and graph.nodes[txn]["type"] == "txn"
            for txn in graph.predecessors(target)
        )
    ]
    graph.remove_edges_from(explained)


def _add_transaction(graph: nx.DiGraph, row: dict[str, Any]) -> None:
    node = node_of(row)
    if node in graph:
        return
    graph.add_node(
        node,
        type="txn",
        label=f"{row['txn_id']} #{row['txn_seq']} {row['fate']}",
        detail=f"{name_of(row)}, from the brokers' logs; began {row.get('began')}, "
        f"completed {row.get('completed')}",
    )
    for commit in row["offsets"]:
        offsets = f"{node}:offsets:{commit['group']}:{commit['partition']}"
        graph.add_node(
            offsets,
            type="offsets",
            label=_commit_text(commit),
            detail=f"{name_of(row)} committed group {commit['group']}'s input "
            + _commit_text(commit),
        )
        graph.add_edge(node, offsets, type="committed-offsets")


def explain(
    graph: nx.DiGraph, shown: Iterable[str], found: LogTransactions, named: LogTxn | None
) -> list[str]:
    """In words, per the logs: which transactions consumed each shown input record and wrote
    each shown output record, and what the named transaction did."""
    words = []
    for node in shown:
        data = graph.nodes[node]
        if data["type"] == "input":
            for place in data.get("positions") or []:
                consumers = found.consumers(tuple(place))
                where = f"input id {data['id']} at p{place[0]}@{place[1]}"
                words.append(
                    f"{where} was consumed by {_names(consumers)}"
                    if consumers
                    else f"no transaction's offset commit in the logs consumed {where}"
                )
        elif data["type"] == "output" and "position" in data:
            writers = found.writers(data["position"])
            partition, offset = data["position"]
            where = f"output p{partition}@{offset}" + (
                f" (id {data['id']})" if data.get("id") is not None else ""
            )
            words.append(
                f"{where} was written by {_names(writers)}"
                if writers
                else f"no transaction in the logs wrote {where}"
            )
    row = found.named(named) if named is not None else None
    if row is not None:
        commits = ", ".join(_commit_text(c) for c in row["offsets"]) or "no input offsets"
        ranges = ", ".join(_range_text(p) for p in row["output"]) or "no output"
        words.append(f"{name_of(row)} wrote {ranges} and committed {commits}")
    return words


def _names(rows: list[dict[str, Any]]) -> str:
    return " and ".join(name_of(row) for row in sorted(rows, key=lambda r: r.get("began") or 0))


# --- pipelines without transactions: the group's plain commits and the output's batches -------


@dataclass(frozen=True)
class PlainLog:
    """The logs of a pipeline with no transactions in them: its group's offset commits of the
    input (`offset_commits`) and the output's batches (`topic_batches`)."""

    commits: DataFrame
    batches: DataFrame

    def around(self, wanted: Iterable[Around]) -> PlainFound:
        """The commits that moved the group past an input place of `wanted`, and the batches
        holding its output places: two small actions, the places a broadcast side."""
        wanted = list(wanted)
        spark = self.commits.sparkSession
        inputs = sorted({place for around in wanted for place in around.inputs})
        outputs = sorted({place for around in wanted for place in around.outputs})
        commits, batches = [], []
        if inputs:
            places = spark.createDataFrame(inputs, "partition INT, place LONG")
            passed = (F.col("offset") > F.col("place")) & (
                F.col("previous").isNull() | (F.col("previous") <= F.col("place"))
            )
            commits = (
                self.commits.filter(F.col("fate") == COMMIT)
                .join(F.broadcast(places), "partition")
                .where(passed)
                .select("group", "partition", "offset", "previous", "time")
                .distinct()
                .collect()
            )
        if outputs:
            places = spark.createDataFrame(outputs, "partition INT, place LONG")
            held = F.col("place").between(F.col("offset"), F.col("last_offset"))
            batches = (
                self.batches.join(F.broadcast(places), "partition")
                .where(held)
                .drop("place")
                .distinct()
                .collect()
            )
        return PlainFound(
            sorted((row.asDict() for row in commits), key=lambda c: c["time"]),
            [row.asDict() for row in batches],
        )


@dataclass
class PlainFound:
    """The plain commits and output batches around some examples, as collected rows."""

    commits: list[dict[str, Any]] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)

    def passed(self, place: Place) -> list[dict[str, Any]]:
        """The group's commits that moved its committed offset past `place`, oldest first."""
        return [c for c in self.commits if _consumed(c, place)]

    def batch(self, place: Place) -> dict[str, Any] | None:
        partition, offset = place
        return next(
            (
                b
                for b in self.batches
                if b["partition"] == partition and b["offset"] <= offset <= b["last_offset"]
            ),
            None,
        )


def _clock(seconds: float) -> str:
    """A time of day as the brokers' clock gave it (UTC, milliseconds)."""
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}"


def explain_plain(graph: nx.DiGraph, shown: Iterable[str], found: PlainFound) -> list[str]:
    """In words, per the logs of a pipeline without transactions: when the group committed
    past each shown input record, when each shown output record was written, and which input
    records had several copies written before the group first committed past them."""
    words = []
    for node in shown:
        data = graph.nodes[node]
        if data["type"] == "input":
            copies = [graph.nodes[n] for n in graph.successors(node)]
            for place in data.get("positions") or []:
                words += _input_words(data["id"], tuple(place), copies, found)
        elif data["type"] == "output" and "position" in data:
            partition, offset = data["position"]
            where = f"output p{partition}@{offset}" + (
                f" (id {data['id']})" if data.get("id") is not None else ""
            )
            batch = found.batch(data["position"])
            words.append(
                f"{where} was written at {_clock(batch['create_time'] / 1000)} by producer "
                f"{batch['producer_id']}"
                + (" in a transaction" if batch["transactional"] else ", outside any transaction")
                if batch is not None
                else f"no batch in the logs holds {where}"
            )
    return words


def _input_words(
    id_: Any, place: Place, copies: list[dict[str, Any]], found: PlainFound
) -> list[str]:
    where = f"input id {id_} at p{place[0]}@{place[1]}"
    passed = found.passed(place)
    if not passed:
        return [f"the group never committed past {where} in the logs"]
    first = passed[0]
    start = "the start" if first["previous"] is None else f"offset {first['previous']}"
    words = [
        f"the group first committed past {where} at {_clock(first['time'])} "
        f"(p{place[0]} {start} → {first['offset']})"
        + (f", and {len(passed) - 1} more times after" if len(passed) > 1 else "")
    ]
    before = [
        copy
        for copy in copies
        if copy["type"] == "output"
        and (batch := found.batch(copy["position"])) is not None
        and batch["create_time"] / 1000 < first["time"]
    ]
    if len(before) > 1:
        words.append(
            f"{len(before)} copies of input id {id_} were written before that commit: whoever "
            f"started over in between (a crash, a rebalance) read it again from {start}"
        )
    return words
