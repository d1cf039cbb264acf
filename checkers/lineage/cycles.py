"""The transaction dependency graph (Elle's ww and wr edges between committed transactions) and
its G0 / G1c cycles: information for the reviewer, never part of the verdict."""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

import networkx as nx
from pyspark.sql import Window
from pyspark.sql import functions as F

from eoschaos.checkers.lineage.keys import TXN_KEY_FIELDS, txn_known, txn_text
from eoschaos.contract.history import FINAL_COMMITTED

if TYPE_CHECKING:
    from eoschaos.checkers.history_io import History

MAX_CYCLE_EXAMPLES = 3
# The committed-transaction graph has ~records/100 nodes and a few edges per node; past this
# many edges it is not collected into Python (cycles are then reported as not computed).
DEPENDENCY_EDGE_LIMIT = 2_000_000
CYCLE_NOTE = (
    "Information only, not part of the verdict: Kafka does not promise serializable "
    "transactions across partitions, so concurrent transactions interleaving on several "
    "partitions form ww cycles (G0) in a correct run."
)


def dependency_cycles(history: History, input_topic: str, output_topic: str) -> dict[str, Any]:
    """G0 / G1c over committed transactions (those with records in the final-committed scan).

    ww: on each output partition, consecutive records by offset written by different
    transactions (the earlier one's write is overwritten in version order). wr: a transaction
    consumed an input record that another transaction wrote; in the workloads here the seeder
    writes every input, so wr edges appear only for chained pipelines. Counts are strongly
    connected components with a cycle; each example is a shortest cycle in one of them.
    """
    committed = history.kind("read").where((F.col("process") == FINAL_COMMITTED) & txn_known())
    written = committed.where(F.col("topic") == output_topic)
    order = Window.partitionBy("partition").orderBy("offset")
    previous = [F.lag(name).over(order).alias(f"previous_{name}") for name in TXN_KEY_FIELDS]
    changed = F.lit(False)
    for name in TXN_KEY_FIELDS:
        changed = changed | (F.col(f"previous_{name}") != F.col(name))
    edges = (
        written.select(*previous, *TXN_KEY_FIELDS)
        .where(changed)
        .select(txn_text("previous_").alias("source"), txn_text().alias("target"), F.lit("ww"))
    )
    writers = committed.where(F.col("topic") == input_topic)
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
    """Count G0 (ww only) and G1c (with a wr edge) components; up to three example cycles.

    The ww graph is built as a graph of its own, not as a view of the whole one (networkx's
    views cost as much again per step of the search), and without a wr edge there is no G1c
    to search for."""
    types: dict[tuple[str, str], set[str]] = {}
    for source, target, kind in edges:
        types.setdefault((source, target), set()).add(kind)
    graph, ww_graph = nx.DiGraph(), nx.DiGraph()
    graph.add_edges_from(
        (source, target, {"types": kinds}) for (source, target), kinds in types.items()
    )
    ww_graph.add_edges_from(
        (source, target, {"types": kinds})
        for (source, target), kinds in types.items()
        if "ww" in kinds
    )
    wr_edges = sum("wr" in kinds for kinds in types.values())
    g0 = _cyclic_components(ww_graph)
    g1c = [
        component
        for component in (_cyclic_components(graph) if wr_edges else [])
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
        "ww_edges": ww_graph.number_of_edges(),
        "wr_edges": wr_edges,
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
