"""Inline SVG drawings for the report: fault bands, throughput, lineage graphs.

Hand-made so the report opens offline with nothing to fetch and needs no plotting library.
Every string that reaches a drawing can come from a history (fault targets, record labels),
so all text and attribute values go through ``esc``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WIDTH = 900
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 16, 12, 28
SERIES_COLOURS = {"sends": "#2563eb", "commits": "#16a34a", "reads": "#9333ea"}
FAULT_COLOUR = "#f97316"
LANE_HEIGHT = 22
FAULT_TEXT_CHARS = 70  # the whole title is in the tooltip
CHART_HEIGHT = 240
# Process lanes: a label column, then time. Outcome colours are also named in each bar's
# tooltip and the legend's words, so colour is never the only carrier.
LANE_LABEL_WIDTH = 130
PX_PER_SECOND = 12
MAX_TIMELINE_WIDTH = 16000
PROCESS_LANE_HEIGHT = 20
OUTCOME_COLOURS = {
    "committed": "#16a34a",
    "unknown": "#d97706",
    "aborted": "#6b7280",
    "fenced": "#7c3aed",
}
ACTIVITY_COLOUR = "#bfdbfe"
CHECKPOINT_COLOUR = "#0891b2"  # a Flink checkpoint, from its trigger to its completion
RESTORE_COLOUR = "#db2777"  # a Flink job restored from a checkpoint

# Lineage node types in the order data flows (the order the layout places them).
COLUMNS = ("input", "txn", "offsets", "output", "read")
COLUMN_TITLES = {
    "input": "input record",
    "txn": "transaction",
    "offsets": "committed offsets",
    "output": "output record",
    "read": "read",
}
NODE_FILL = {
    "input": "#dbeafe",
    "txn": "#fef3c7",
    "offsets": "#ede9fe",
    "output": "#dcfce7",
    "read": "#f3f4f6",
}
EDGE_COLOUR = {
    "consumed-by": "#2563eb",
    "produced": "#ca8a04",
    "committed-offsets": "#7c3aed",
    "read-by": "#6b7280",
}
NODE_WIDTH, NODE_HEIGHT, COLUMN_GAP, ROW_GAP = 150, 30, 44, 10
LABEL_CHARS = 22


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def nice_ticks(maximum: float, count: int = 5) -> list[float]:
    """Round tick values 0..maximum (steps of 1, 2 or 5 times a power of ten)."""
    if maximum <= 0:
        return [0.0]
    raw = maximum / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(maximum // step) + 1)]


def _fmt(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Band:
    """A fault window on the time axis, in seconds from the start; end None = never healed."""

    start: float
    end: float | None
    label: str
    title: str


def timeline_width(duration: float) -> int:
    """Wide enough for PX_PER_SECOND, so a 10-minute run scrolls instead of blurring."""
    return int(min(MAX_TIMELINE_WIDTH, max(WIDTH, LANE_LABEL_WIDTH + duration * PX_PER_SECOND)))


class _TimeAxis:
    """Maps seconds to x pixels over the plot area."""

    def __init__(self, duration: float, width: float = WIDTH, left: float = MARGIN_LEFT) -> None:
        self.duration = max(duration, 1.0)
        self.width = width
        self.left, self.right = left, width - MARGIN_RIGHT

    def x(self, seconds: float) -> float:
        clamped = min(max(seconds, 0.0), self.duration)
        return self.left + (self.right - self.left) * clamped / self.duration

    def ticks_svg(self, y: float) -> str:
        parts = [f'<line x1="{self.left}" y1="{y}" x2="{self.right}" y2="{y}" stroke="#374151"/>']
        for tick in nice_ticks(self.duration, 10):
            x = self.x(tick)
            parts.append(
                f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#374151"/>'
            )
            parts.append(
                f'<text x="{x:.1f}" y="{y + 16}" text-anchor="middle">{_fmt(tick)}s</text>'
            )
        return "".join(parts)


def fault_timeline(
    bands: Sequence[Band], duration: float, width: float = WIDTH, left: float = MARGIN_LEFT
) -> str:
    """One lane per fault: a band from its start to its heal (to the end if never healed)."""
    axis = _TimeAxis(duration, width, left)
    height = MARGIN_TOP + LANE_HEIGHT * max(len(bands), 1) + MARGIN_BOTTOM
    parts = [_svg_open(height, "fault timeline", width)]
    for lane, band in enumerate(bands):
        y = MARGIN_TOP + lane * LANE_HEIGHT
        x0 = axis.x(band.start)
        x1 = axis.x(axis.duration if band.end is None else band.end)
        healed = "" if band.end is not None else " unhealed"
        parts.append(
            f'<rect class="fault-band{healed}" x="{x0:.1f}" y="{y + 3}" '
            f'width="{max(x1 - x0, 2):.1f}" height="{LANE_HEIGHT - 6}" fill="{FAULT_COLOUR}" '
            'fill-opacity="0.45">'
            f"<title>{esc(band.title)}</title></rect>"
        )
        if x0 < width * 2 / 3:  # the fault's name reads from its start, or up to its end
            anchor = f'x="{x0 + 4:.1f}"'
        else:
            anchor = f'x="{x1 - 4:.1f}" text-anchor="end"'
        text = esc(_shorten(band.title, FAULT_TEXT_CHARS))
        parts.append(f'<text {anchor} y="{y + LANE_HEIGHT / 2 + 4}">{text}</text>')
    parts.append(axis.ticks_svg(height - MARGIN_BOTTOM))
    parts.append("</svg>")
    return "".join(parts)


def throughput_chart(
    rows: Sequence[dict[str, Any]],
    bands: Sequence[Band],
    duration: float,
    width: float = WIDTH,
    left: float = MARGIN_LEFT,
) -> str:
    """Records per second of each series over time, fault windows shaded behind the lines."""
    series: dict[str, list[tuple[float, float]]] = {name: [] for name in SERIES_COLOURS}
    for row in rows:
        t = _number(row.get("t"))
        if t is None:
            continue
        for name, points in series.items():
            value = _number(row.get(name))
            if value is not None:
                points.append((t, value))
    lines = [(f"{name}/s", SERIES_COLOURS[name], points) for name, points in series.items()]
    return line_chart(lines, "throughput per second", bands, duration, width, left)


def line_chart(
    lines: Sequence[tuple[str, str, Sequence[tuple[float, float]]]],
    title: str,
    bands: Sequence[Band],
    duration: float,
    width: float = WIDTH,
    left: float = MARGIN_LEFT,
) -> str:
    """Lines of (seconds, value) points, each (name, colour, points), over the run's time
    axis with fault windows shaded behind them; the legend names each line above the plot."""
    axis = _TimeAxis(duration, width, left)
    peak = max((value for _, _, points in lines for _, value in points), default=0.0)
    ticks = nice_ticks(peak, 4)
    top_value = max(ticks[-1], peak, 1e-9) if peak else 1.0
    top, bottom = MARGIN_TOP + 16, CHART_HEIGHT - MARGIN_BOTTOM  # legend above the plot

    def y(value: float) -> float:
        return bottom - (bottom - top) * value / top_value

    parts = [_svg_open(CHART_HEIGHT, title, width)]
    parts += [_fault_window(band, axis, top, bottom) for band in bands]
    for tick in ticks:
        parts.append(
            f'<line x1="{axis.left}" y1="{y(tick):.1f}" x2="{axis.right}" '
            f'y2="{y(tick):.1f}" stroke="#e5e7eb"/>'
            f'<text x="{axis.left - 4}" y="{y(tick) + 4:.1f}" text-anchor="end">'
            f"{_fmt(tick)}</text>"
        )
    for name, colour, points in lines:
        if points:
            coordinates = " ".join(f"{axis.x(t):.1f},{y(v):.1f}" for t, v in sorted(points))
            parts.append(
                f'<polyline class="series" points="{coordinates}" fill="none" '
                f'stroke="{esc(colour)}" stroke-width="1.5"><title>{esc(name)}</title>'
                "</polyline>"
            )
    parts.append(axis.ticks_svg(bottom))
    for index, (name, colour, _) in enumerate(lines):
        x = axis.left + 10 + index * 110
        parts.append(
            f'<rect x="{x}" y="{MARGIN_TOP - 2}" width="12" height="3" fill="{esc(colour)}"/>'
            f'<text x="{x + 16}" y="{MARGIN_TOP + 4}">{esc(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def process_lanes(lanes: Sequence[dict[str, Any]], bands: Sequence[Band], duration: float) -> str:
    """One lane per process: its activity (light), an instance's life (a line from its start
    to its exit) and its transactions as bars coloured by outcome; faults as bands across
    every lane. The time axis is the throughput chart's, so the two read together."""
    width = timeline_width(duration)
    axis = _TimeAxis(duration, width, LANE_LABEL_WIDTH)
    top = MARGIN_TOP
    height = top + PROCESS_LANE_HEIGHT * max(len(lanes), 1) + MARGIN_BOTTOM
    parts = [_svg_open(height, "process timeline", width)]
    parts += [_fault_window(band, axis, top, height - MARGIN_BOTTOM) for band in bands]
    for index, lane in enumerate(lanes):
        parts.append(_lane_svg(lane, axis, top + index * PROCESS_LANE_HEIGHT))
    parts.append(axis.ticks_svg(height - MARGIN_BOTTOM))
    parts.append("</svg>")
    return "".join(parts)


def _fault_window(band: Band, axis: _TimeAxis, top: float, bottom: float) -> str:
    """A fault's window shaded from `top` to `bottom` behind what a chart draws over time."""
    x0, x1 = axis.x(band.start), axis.x(axis.duration if band.end is None else band.end)
    return (
        f'<rect class="fault-window" x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 2):.1f}" '
        f'height="{bottom - top}" fill="{FAULT_COLOUR}" fill-opacity="0.15">'
        f"<title>{esc(band.title)}</title></rect>"
    )


def _lane_svg(lane: dict[str, Any], axis: _TimeAxis, y: float) -> str:
    name = str(lane.get("lane", "?"))
    middle = y + PROCESS_LANE_HEIGHT / 2
    parts = [
        f'<g class="lane" data-lane="{esc(name)}">'
        f'<text class="lane-name" x="{axis.left - 6}" y="{middle + 4:.1f}" text-anchor="end">'
        f"{esc(_shorten(name, 20))}<title>{esc(name)}</title></text>"
    ]
    started, exited = _number(lane.get("started")), _number(lane.get("exited"))
    if started is not None:
        end = axis.duration if exited is None else exited
        life = f"started {started:.3f}s, " + (
            "still running at the end" if exited is None else f"exited {exited:.3f}s"
        )
        parts.append(
            f'<line class="life" x1="{axis.x(started):.1f}" y1="{middle:.1f}" '
            f'x2="{axis.x(end):.1f}" y2="{middle:.1f}" stroke="#374151">'
            f"<title>{esc(name)}: {life}</title></line>"
        )
    for segment in _list_of_lists(lane.get("activity")):
        x0, x1 = axis.x(_number(segment[0]) or 0.0), axis.x(_number(segment[1]) or 0.0)
        parts.append(
            f'<rect class="activity" x="{x0:.1f}" y="{middle - 3:.1f}" '
            f'width="{max(x1 - x0, 1):.1f}" height="6" fill="{ACTIVITY_COLOUR}">'
            f"<title>{esc(name)}: {esc(segment[2])} events, {segment[0]:.3f}s to "
            f"{segment[1]:.3f}s</title></rect>"
        )
    for bar in _list_of_lists(lane.get("transactions")):
        outcome = str(bar[2])
        colour = OUTCOME_COLOURS.get(outcome, "#111827")
        x0, x1 = axis.x(_number(bar[0]) or 0.0), axis.x(_number(bar[1]) or 0.0)
        begun = _begun_words(bar[3] if len(bar) > 3 else None)
        parts.append(
            f'<rect class="txn {esc(outcome)}" x="{x0:.1f}" y="{y + 4}" '
            f'width="{max(x1 - x0, 1.5):.1f}" height="{PROCESS_LANE_HEIGHT - 8}" '
            f'fill="{colour}"><title>{esc(name)}: {esc(outcome)}; {esc(begun)} '
            f"{bar[0]:.3f}s to {bar[1]:.3f}s</title></rect>"
        )
    parts += _checkpoint_svg(lane, axis, y, name)
    parts.append("</g>")
    return "".join(parts)


def _checkpoint_svg(lane: dict[str, Any], axis: _TimeAxis, y: float, name: str) -> list[str]:
    """A JobManager's checkpoints (a line from trigger to completion, a tick at completion; a
    checkpoint never completed is dashed to the lane's end) and its restores (a diamond naming
    the checkpoint the job came back from)."""
    parts = []
    bottom = y + PROCESS_LANE_HEIGHT - 3
    for mark in lane.get("checkpoints") or []:
        if not (isinstance(mark, list) and len(mark) == 3 and _number(mark[0]) is not None):
            continue
        triggered, completed, number = _number(mark[0]), _number(mark[1]), mark[2]
        x0 = axis.x(triggered)
        if completed is None:
            parts.append(
                f'<line class="checkpoint failed" x1="{x0:.1f}" y1="{bottom:.1f}" '
                f'x2="{axis.x(axis.duration):.1f}" y2="{bottom:.1f}" stroke="{CHECKPOINT_COLOUR}" '
                f'stroke-dasharray="2,2"><title>{esc(name)}: checkpoint {esc(number)} triggered '
                f"{triggered:.3f}s, never completed</title></line>"
            )
            continue
        x1 = axis.x(completed)
        parts.append(
            f'<path class="checkpoint" d="M{x0:.1f},{bottom:.1f} H{x1:.1f} V{y + 3:.1f}" '
            f'fill="none" stroke="{CHECKPOINT_COLOUR}"><title>{esc(name)}: checkpoint '
            f"{esc(number)} triggered {triggered:.3f}s, completed {completed:.3f}s</title></path>"
        )
    middle = y + PROCESS_LANE_HEIGHT / 2
    for mark in lane.get("restores") or []:
        if not (isinstance(mark, list) and len(mark) == 2 and _number(mark[0]) is not None):
            continue
        x = axis.x(_number(mark[0]))
        parts.append(
            f'<path class="restore" d="M{x:.1f},{middle - 5:.1f} l5,5 l-5,5 l-5,-5 z" '
            f'fill="{RESTORE_COLOUR}"><title>{esc(name)}: restored from checkpoint '
            f"{esc(mark[1])} at {_number(mark[0]):.3f}s</title></path>"
        )
    return parts


def _begun_words(counts: Any) -> str:
    """{"committed": 3, "aborted": 1} -> "begun here: 3 committed, 1 aborted,"."""
    if not isinstance(counts, dict) or not counts:
        return "no transaction begun here,"
    return "begun here: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items()) + ","


def _list_of_lists(value: Any) -> list[list[Any]]:
    """The well-formed [from, to, ...] rows of a lane field; anything else is skipped."""
    if not isinstance(value, list):
        return []
    return [
        row
        for row in value
        if isinstance(row, list)
        and len(row) >= 3
        and _number(row[0]) is not None
        and _number(row[1]) is not None
    ]


def _svg_open(height: float, title: str, width: float = WIDTH) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" aria-label="{esc(title)}">'
    )


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- lineage ------------------------------------------------------------------------------


def lineage_drawing(anomaly: dict[str, Any], index: int) -> str:
    """A layered drawing of one anomaly's subgraph: input → transaction → output → read.

    Committed offsets are positions in the input partitions, so they sit in the input column
    below the inputs and their edges point back from the transaction: no edge crosses a
    column of boxes. Each node is placed at the mean height of its already placed neighbours
    (one pass in data-flow order), so a record's chain stays roughly on one line.
    """
    nodes = [node for node in anomaly.get("nodes") or [] if isinstance(node, dict)]
    known = {str(node.get("id")) for node in nodes}
    edges = [
        edge
        for edge in anomaly.get("edges") or []
        if isinstance(edge, dict)
        and str(edge.get("source")) in known
        and str(edge.get("target")) in known
    ]
    layout = _Layout.of(nodes, edges)
    marker = f"arrow-{index}"
    parts = [
        _svg_open(layout.height, f"lineage of {anomaly.get('title', '')}", layout.width),
        f'<defs><marker id="{marker}" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#6b7280"/>'
        "</marker></defs>",
    ]
    for (x, y), title in layout.headers:
        parts.append(
            f'<text x="{x + NODE_WIDTH / 2:.0f}" y="{y:.0f}" text-anchor="middle" '
            f'class="col" font-weight="bold">{esc(title)}</text>'
        )
    for edge in edges:
        parts.append(_edge_svg(edge, layout.position, marker))
    for node in nodes:
        parts.append(_node_svg(node, layout.position[str(node.get("id"))]))
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class _Layout:
    position: dict[str, tuple[float, float]]  # top-left corner of each node's box
    headers: list[tuple[tuple[float, float], str]]
    width: float
    height: float

    @classmethod
    def of(cls, nodes: list[dict], edges: list[dict]) -> _Layout:
        by_type: dict[str, list[str]] = {}
        for node in nodes:
            by_type.setdefault(str(node.get("type")), []).append(str(node.get("id")))
        neighbours: dict[str, list[str]] = {}
        for edge in edges:
            source, target = str(edge["source"]), str(edge["target"])
            neighbours.setdefault(source, []).append(target)
            neighbours.setdefault(target, []).append(source)
        column_of = {"input": 0, "offsets": 0, "txn": 1, "output": 2, "read": 3}
        for extra, node_type in enumerate(sorted(set(by_type) - set(column_of))):
            column_of[node_type] = 4 + extra
        used = sorted({column_of[node_type] for node_type in by_type})
        x_of = {column: 8 + i * (NODE_WIDTH + COLUMN_GAP) for i, column in enumerate(used)}
        cursor = dict.fromkeys(used, 28.0)  # next free y in each column
        position: dict[str, tuple[float, float]] = {}
        headers = []
        for node_type in [*COLUMNS, *sorted(set(by_type) - set(COLUMNS))]:
            if node_type not in by_type:
                continue
            column = column_of[node_type]
            if node_type == "offsets" and cursor[column] > 28.0:
                cursor[column] += 22  # room for the sub-header below the inputs
            headers.append(
                ((x_of[column], cursor[column] - 12), COLUMN_TITLES.get(node_type, node_type))
            )

            def wanted(node_id: str) -> tuple[float, str]:
                placed = [position[n][1] for n in neighbours.get(node_id, []) if n in position]
                return (sum(placed) / len(placed) if placed else math.inf, node_id)

            for node_id in sorted(by_type[node_type], key=wanted):
                y = max(cursor[column], wanted(node_id)[0])
                y = cursor[column] if math.isinf(y) else y
                position[node_id] = (x_of[column], y)
                cursor[column] = y + NODE_HEIGHT + ROW_GAP
        width = 16 + len(used) * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
        return cls(position, headers, width, max(cursor.values(), default=28.0))


def _node_svg(node: dict, at: tuple[float, float]) -> str:
    x, y = at
    node_type = str(node.get("type"))
    label = str(node.get("label", node.get("id")))
    anomalous = node.get("anomalous") is True
    tooltip = f"{label}\n{node.get('detail', '')}".strip()
    if anomalous:
        tooltip = "ANOMALOUS: " + tooltip
    stroke = 'stroke="#dc2626" stroke-width="3"' if anomalous else 'stroke="#9ca3af"'
    return (
        f'<g class="{"node anomalous" if anomalous else "node"}"><title>{esc(tooltip)}</title>'
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="5" '
        f'fill="{NODE_FILL.get(node_type, "#ffffff")}" {stroke}/>'
        f'<text x="{x + 6:.0f}" y="{y + NODE_HEIGHT / 2 + 4:.0f}">'
        f"{esc(_shorten(label, LABEL_CHARS))}</text></g>"
    )


def _edge_svg(edge: dict, position: dict[str, tuple[float, float]], marker: str) -> str:
    """A curve from the facing sides of the two boxes (offsets edges run right to left)."""
    sx, sy = position[str(edge["source"])]
    tx, ty = position[str(edge["target"])]
    y0, y1 = sy + NODE_HEIGHT / 2, ty + NODE_HEIGHT / 2
    if tx > sx:
        x0, x1, bend0, bend1 = sx + NODE_WIDTH, tx, 1, -1
    elif tx < sx:
        x0, x1, bend0, bend1 = sx, tx + NODE_WIDTH, -1, 1
    else:  # same column: loop out to the right
        x0, x1, bend0, bend1 = sx + NODE_WIDTH, tx + NODE_WIDTH, 1, 1
    bend = max(abs(x1 - x0) / 2, 20)
    edge_type = str(edge.get("type"))
    return (
        f'<path class="edge" d="M{x0:.0f},{y0:.0f} C{x0 + bend0 * bend:.0f},{y0:.0f} '
        f'{x1 + bend1 * bend:.0f},{y1:.0f} {x1:.0f},{y1:.0f}" fill="none" stroke-width="1.4" '
        f'stroke="{EDGE_COLOUR.get(edge_type, "#6b7280")}" marker-end="url(#{marker})">'
        f"<title>{esc(edge_type)}</title></path>"
    )


def lineage_legend() -> str:
    """Colours of node and edge types, shown once above the anomaly drawings."""
    items = [
        f'<span class="swatch" style="background:{NODE_FILL[node_type]}"></span>'
        f"{esc(COLUMN_TITLES[node_type])}"
        for node_type in COLUMNS
    ]
    items += [
        f'<span class="line" style="border-color:{colour}"></span>{esc(edge_type)}'
        for edge_type, colour in EDGE_COLOUR.items()
    ]
    items.append('<span class="swatch anomalous"></span>anomalous (red outline)')
    return '<p class="legend">' + " ".join(items) + "</p>"
