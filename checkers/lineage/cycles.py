"""The transaction dependency graph (Elle's ww and wr edges between committed transactions, plus
its process and realtime orders) and its G0 / G1c cycles with their -process and -realtime
variants: information for the reviewer, never part of the verdict."""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

import networkx as nx
from pyspark.sql import Window
from pyspark.sql import functions as F

from eoschaos.checkers.lineage.keys import TXN_KEY_FIELDS, txn_known, txn_text
from eoschaos.contract.history import FINAL_COMMITTED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eoschaos.checkers.history_io import History

EDGE_TYPES = ("ww", "wr", "process", "realtime")
# The committed-transaction graph has ~records/100 nodes and a few edges per node; past this
# many edges it is not collected into Python (cycles are then reported as not computed).
DEPENDENCY_EDGE_LIMIT = 2_000_000
# Elle's cycle variants: (edge types a cycle may use, edge types it must use). A -process cycle
# needs a process edge (one processor's later transaction after its earlier one), a -realtime one
# a realtime edge (a transaction committed before another began); G1c a wr edge.
CYCLE_VARIANTS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "G0": (frozenset({"ww"}), ()),
    "G0-process": (frozenset({"ww", "process"}), ("process",)),
    "G0-realtime": (frozenset({"ww", "realtime"}), ("realtime",)),
    "G1c": (frozenset({"ww", "wr"}), ("wr",)),
    "G1c-process": (frozenset({"ww", "wr", "process"}), ("wr", "process")),
    "G1c-realtime": (frozenset({"ww", "wr", "realtime"}), ("wr", "realtime")),
}
# Elle's implications between them: a history with the key's anomaly has each value's too (a
# plain cycle is a trivial -process one; a processor runs one transaction at a time, so its
# order is realtime order; Adya's G1c includes G0).
CYCLE_IMPLIES: dict[str, tuple[str, ...]] = {
    "G0": ("G0-process", "G1c"),
    "G0-process": ("G0-realtime", "G1c-process"),
    "G0-realtime": ("G1c-realtime",),
    "G1c": ("G1c-process",),
    "G1c-process": ("G1c-realtime",),
}
CYCLE_NOTE = (
    "Information only, not part of the verdict: Kafka does not promise serializable "
    "transactions across partitions, so concurrent transactions interleaving on several "
    "partitions form ww cycles (G0) in a correct run."
)


def dependency_cycles(
    history: History, input_topics: tuple[str, ...], output_topics: tuple[str, ...]
) -> dict[str, Any]:
    """G0 / G1c and their -process / -realtime variants over committed transactions (those with
    records in the final-committed scan).

    ww: on each output partition, consecutive records by offset written by different
    transactions (the earlier one's write is overwritten in version order). wr: a transaction
    consumed an input record that another transaction wrote; in the workloads here the seeder
    writes every input, so wr edges appear only for chained pipelines. process: one processor
    incarnation's committed transactions in their order. realtime: a transaction whose commit
    returned before another's begin was called, from the client's own history (none without
    one). The edges and the transactions' times come back in one job.
    """
    committed = history.kind("read").where((F.col("process") == FINAL_COMMITTED) & txn_known())
    written = committed.where(F.col("topic").isin(*output_topics))
    order = Window.partitionBy("topic", "partition").orderBy("offset")
    previous = [F.lag(name).over(order).alias(f"previous_{name}") for name in TXN_KEY_FIELDS]
    changed = F.lit(False)
    for name in TXN_KEY_FIELDS:
        changed = changed | (F.col(f"previous_{name}") != F.col(name))
    no_time = F.lit(None).cast("double")
    edges = (
        written.select(*previous, *TXN_KEY_FIELDS)
        .where(changed)
        .select(
            txn_text("previous_").alias("source"),
            txn_text().alias("target"),
            F.lit("ww").alias("type"),
            no_time.alias("start"),
            no_time.alias("end"),
        )
    )
    writers = committed.where(F.col("topic").isin(*input_topics))
    if not writers.isEmpty():  # only chained pipelines consume records a transaction wrote
        written_by = writers.select(
            F.col("partition").alias("src_partition"),
            F.col("offset").alias("src_offset"),
            txn_text().alias("source"),
        )
        consumers = written.select("src_partition", "src_offset", txn_text().alias("target"))
        wr = (
            written_by.join(consumers, ["src_partition", "src_offset"])
            .where(F.col("source") != F.col("target"))
            .select("source", "target", F.lit("wr"), no_time, no_time)
        )
        edges = edges.union(wr)
    edges = edges.union(_committed_times(history))
    rows = edges.distinct().limit(DEPENDENCY_EDGE_LIMIT + 1).collect()
    if len(rows) > DEPENDENCY_EDGE_LIMIT:
        return {
            **dict.fromkeys(CYCLE_VARIANTS),
            "examples": [],
            "note": f"not computed: more than {DEPENDENCY_EDGE_LIMIT} dependency edges",
        }
    times = {row["source"]: (row["start"], row["end"]) for row in rows if row["type"] == "times"}
    graph_edges = [(row["source"], row["target"], row["type"]) for row in rows if row["target"]]
    nodes = {node for source, target, _ in graph_edges for node in (source, target)}
    return find_cycles(graph_edges + process_edges(nodes | set(times)) + realtime_edges(times))


def _committed_times(history: History) -> DataFrame:
    """Each committed transaction of the client's history: when its begin was called and when
    its commit returned (rows of type "times", source the transaction)."""
    began = (F.col("f") == "begin") & (F.col("type") == "invoke")
    committed = (F.col("f") == "commit") & (F.col("type") == "ok")
    return (
        history.kind("txn")
        .where(txn_known() & (began | committed))
        .groupBy(*TXN_KEY_FIELDS)
        .agg(
            F.min(F.when(began, F.col("time"))).alias("start"),
            F.max(F.when(committed, F.col("time"))).alias("end"),
        )
        .where(F.col("start").isNotNull() & F.col("end").isNotNull())
        .select(
            txn_text().alias("source"),
            F.lit(None).cast("string").alias("target"),
            F.lit("times").alias("type"),
            "start",
            "end",
        )
    )


def process_edges(transactions: set[str]) -> list[tuple[str, str, str]]:
    """Each processor incarnation's transactions ("instance.incarnation.seq") in seq order:
    one single-threaded process, so each ran after the one before it."""
    by_process: dict[tuple[int, int], list[int]] = {}
    for name in transactions:
        instance, incarnation, seq = map(int, name.split("."))
        by_process.setdefault((instance, incarnation), []).append(seq)
    return [
        (f"{i}.{n}.{earlier}", f"{i}.{n}.{later}", "process")
        for (i, n), seqs in by_process.items()
        for earlier, later in pairwise(sorted(seqs))
    ]


def realtime_edges(times: dict[str, tuple[float, float]]) -> list[tuple[str, str, str]]:
    """T1 → T2 where T1's commit returned before T2's begin was called, transitively reduced
    as Elle does: a transaction's predecessors are those finished and not yet followed by a
    later finisher, so the edges grow with the concurrency, not with the square of the count."""
    events = sorted(
        [(start, 0, name) for name, (start, _) in times.items()]
        + [(end, 1, name) for name, (_, end) in times.items()]
    )  # at one instant a begin sorts first: no edge between touching transactions
    frontier: set[str] = set()
    before: dict[str, frozenset[str]] = {}
    edges = []
    for _, is_end, name in events:
        if is_end:
            frontier -= before.get(name, frozenset())
            frontier.add(name)
        else:
            before[name] = frozenset(frontier)
            edges += [(earlier, name, "realtime") for earlier in sorted(frontier)]
    return edges


def find_cycles(edges: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Count each variant's cyclic components, with one example cycle of each found.

    A variant's graph holds only the edges it may use, built as a graph of its own (networkx's
    views cost as much again per step of the search); its count is the strongly connected
    components with a cycle that hold an edge of each type it must use (every edge inside such
    a component lies on a cycle). A variant whose required edges are absent is 0 unsearched."""
    types: dict[tuple[str, str], set[str]] = {}
    for source, target, kind in edges:
        types.setdefault((source, target), set()).add(kind)
    present = set().union(*types.values()) if types else set()
    found: dict[str, int] = {}
    examples = []
    for variant, (allowed, required) in CYCLE_VARIANTS.items():
        if not set(required) <= present:
            found[variant] = 0
            continue
        graph = nx.DiGraph()
        graph.add_edges_from(
            (source, target, {"types": kinds & allowed})
            for (source, target), kinds in types.items()
            if kinds & allowed
        )
        components = [
            component
            for component in _cyclic_components(graph)
            if all(_has_edge(graph, component, kind) for kind in required)
        ]
        found[variant] = len(components)
        if components:
            examples.append(_example_cycle(graph, components[0], variant, required))
    return {
        **found,
        "examples": examples,
        "transactions": len({node for pair in types for node in pair}),
        **{f"{kind}_edges": sum(kind in k for k in types.values()) for kind in EDGE_TYPES},
        "implies": {name: list(implied) for name, implied in CYCLE_IMPLIES.items()},
        "note": CYCLE_NOTE,
    }


def _has_edge(graph: nx.DiGraph, component: set[str], kind: str) -> bool:
    return any(kind in data["types"] for _, _, data in graph.subgraph(component).edges(data=True))


def _cyclic_components(graph: nx.DiGraph) -> list[set[str]]:
    components = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    return sorted(components, key=lambda component: (len(component), min(component)))


def _example_cycle(
    graph: nx.DiGraph, component: set[str], anomaly: str, required: tuple[str, ...]
) -> dict[str, Any]:
    """A closed walk through the first edge of each required type, joined by shortest paths (a
    shortest cycle through one such edge when one type is required; through the component's
    first node when none is)."""
    sub = graph.subgraph(component)
    if required:
        through = [
            min((s, t) for s, t, data in sub.edges(data=True) if kind in data["types"])
            for kind in required
        ]
        cycle = [through[0][0]]
        for (_, via), (start, _) in zip(through, through[1:] + through[:1], strict=True):
            cycle += nx.shortest_path(sub, via, start)
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
