"""The HTML report: one self-contained page that renders a verdict.json, nothing more.

A reviewer must be able to trust the page without re-running anything, so it shows exactly
what the verdict holds (it never recomputes a verdict), opens offline (no external CSS, JS or
fonts; a Content-Security-Policy forbids fetching anything), and treats every string from the
history as hostile: all of it is escaped, in text, attributes and SVG alike.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import time
from pathlib import Path
from typing import Any

from eoschaos.contract.checks import AGREEMENT_KINDS, CATALOGUE, CheckResult, results_of
from eoschaos.contract.history import FAULT_TOOK_EFFECT
from eoschaos.reports.svg import (
    CHECKPOINT_COLOUR,
    LANE_LABEL_WIDTH,
    OUTCOME_COLOURS,
    RESTORE_COLOUR,
    Band,
    esc,
    fault_timeline,
    line_chart,
    lineage_drawing,
    lineage_legend,
    process_lanes,
    throughput_chart,
    timeline_width,
)

MAX_EXAMPLES_SHOWN = 5
# One colour per output partition in the lag chart (cycled past eight; each line is named).
PARTITION_COLOURS = (
    "#2563eb",
    "#16a34a",
    "#9333ea",
    "#dc2626",
    "#0891b2",
    "#ca8a04",
    "#db2777",
    "#4b5563",
)
UNSEEN_COLOUR = "#dc2626"
# The page's one script: click a column heading to sort (again to reverse), type to filter.
# Without it (a browser with scripts off) the tables are plain, in the verdict's order.
SCRIPT = """"use strict";
(function () {
  var FILTER_MIN_ROWS = 8;  // a data table this long gets a filter box; examples always do
  var each = function (list, f) { Array.prototype.forEach.call(list, f); };
  var key = function (cell) {
    var text = cell.textContent.trim();
    return cell.classList.contains("num") && text !== "" ? Number(text) : text;
  };
  var compare = function (a, b) {
    if (typeof a === "number" && typeof b === "number") { return a - b; }
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  };
  var sortBy = function (table, column, heading) {
    var ascending = heading.getAttribute("aria-sort") !== "ascending";
    each(table.tHead.rows[0].cells, function (th) { th.removeAttribute("aria-sort"); });
    heading.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var order = compare(key(a.cells[column]), key(b.cells[column]));
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  };
  var addFilter = function (table) {
    var input = document.createElement("input");
    var shown = document.createElement("span");
    input.type = "search";
    input.className = "filter";
    input.placeholder = "filter rows";
    input.setAttribute("aria-label", "show only the rows of the next table holding this text");
    shown.className = "muted filter-count";
    input.addEventListener("input", function () {
      var words = input.value.trim().toLowerCase();
      var rows = table.tBodies[0].rows;
      var count = 0;
      each(rows, function (row) {
        row.hidden = row.textContent.toLowerCase().indexOf(words) < 0;
        count += row.hidden ? 0 : 1;
      });
      shown.textContent = words ? " " + count + " of " + rows.length + " rows" : "";
    });
    table.parentNode.insertBefore(input, table);
    table.parentNode.insertBefore(shown, table);
  };
  each(document.querySelectorAll("table.data"), function (table) {
    each(table.tHead.rows[0].cells, function (heading, column) {
      heading.tabIndex = 0;
      heading.title = "sort by this column";
      heading.addEventListener("click", function () { sortBy(table, column, heading); });
      heading.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { sortBy(table, column, heading); }
      });
    });
    if (table.classList.contains("examples") || table.tBodies[0].rows.length >= FILTER_MIN_ROWS) {
      addFilter(table);
    }
  });
}());
"""
# No fetch of any kind, and no script but SCRIPT (allowed by its hash): whatever a pipeline
# wrote is escaped anyway, and the browser would refuse to run it if it were not.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; "
    f"script-src 'sha256-{base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()}'"
)
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1200px;
  color: #111827; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin-top: 32px;
  border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; } h3 { font-size: 15px; }
.verdict { font-size: 44px; font-weight: 800; padding: 8px 24px; border-radius: 8px;
  display: inline-block; margin: 8px 0; letter-spacing: 2px; }
.PASS { background: #dcfce7; color: #166534; } .FAIL { background: #fee2e2; color: #991b1b; }
.UNKNOWN { background: #fef3c7; color: #92400e; }
.badge { font-weight: 700; padding: 1px 8px; border-radius: 4px; }
.banner { background: #fef3c7; border: 2px solid #d97706; padding: 10px 14px;
  border-radius: 6px; margin: 12px 0; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #e5e7eb;
  padding: 3px 8px; text-align: left; vertical-align: top; } th { background: #f9fafb; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre, code { font: 12px/1.4 ui-monospace, monospace; } pre { background: #f9fafb;
  padding: 8px; overflow-x: auto; border: 1px solid #e5e7eb; white-space: pre-wrap; }
.muted { color: #6b7280; } .note { background: #eff6ff; border-left: 4px solid #3b82f6;
  padding: 6px 10px; } .warn { background: #fffbeb; border-left: 4px solid #d97706;
  padding: 6px 10px; }
svg.chart { max-width: 100%; height: auto; font: 11px sans-serif; display: block; }
.scroll { overflow-x: auto; } .scroll svg.chart { max-width: none; }
.legend span.swatch.activity { background: #bfdbfe; }
svg .unhealed { stroke: #991b1b; stroke-dasharray: 4 2; } svg .col { fill: #374151; }
.legend span.swatch { display: inline-block; width: 14px; height: 10px;
  border: 1px solid #6b7280; margin: 0 4px 0 12px; }
.legend span.swatch.anomalous { border: 2px solid #dc2626; }
table.data th { cursor: pointer; } table.data th[aria-sort="ascending"]::after
  { content: " \\25B2"; } table.data th[aria-sort="descending"]::after { content: " \\25BC"; }
input.filter { font: inherit; margin: 4px 0; padding: 2px 6px; width: 18em; }
.legend span.line { display: inline-block; width: 18px; border-top: 2px solid;
  margin: 0 4px 3px 12px; }
"""


def write_report(verdict: dict, path: Path) -> Path:
    path = Path(path)
    path.write_text(render_report(verdict), encoding="utf-8")
    return path


def render_report(verdict: dict) -> str:
    """The whole report as one HTML document; missing optional keys just leave gaps."""
    title = f"eoschaos {verdict.get('workload') or ''} {verdict.get('mode') or ''}".strip()
    body = "".join(
        [
            _summary(verdict),
            _checks(verdict),
            _not_applicable(verdict),
            _timeline(verdict),
            _forensics(verdict),
            _lineage(verdict),
            _agreement(verdict),
            _stats(verdict),
            _reproduce(verdict),
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{esc(title)}: {esc(verdict.get('verdict', '?'))}</title>"
        f"<style>{STYLE}</style></head><body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _verdict_class(value: Any) -> str:
    return value if value in ("PASS", "FAIL", "UNKNOWN") else ""


def _badge(value: Any) -> str:
    return f'<span class="badge {_verdict_class(value)}">{esc(value)}</span>'


def _text(value: Any) -> str:
    """A cell value: scalars as they are, containers as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def params_in_words(params: Any) -> str:
    """A fault's params (JSON text from the history) as words: {"broker": 1,
    "mid_transaction": true} -> "broker 1, mid transaction yes"; anything else as it is."""
    try:
        value = json.loads(params) if isinstance(params, str) else params
    except ValueError:
        return str(params)
    if not isinstance(value, dict):
        return _text(value)

    def word(item: Any) -> str:
        return ("yes" if item else "no") if isinstance(item, bool) else _text(item)

    return ", ".join(f"{str(key).replace('_', ' ')} {word(item)}" for key, item in value.items())


def _milliseconds(seconds: Any) -> str:
    """Seconds to the millisecond, as text so the table does not print a float's tail."""
    number = seconds if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None
    return "" if number is None else f"{number:.3f}"


class Html(str):
    """Markup this module built itself (a link), placed in a table cell unescaped."""


def _table(headers: list[str], rows: list[list[Any]], kind: str = "data") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{esc(cell)}</td>'
            if isinstance(cell, int | float) and not isinstance(cell, bool)
            else f"<td>{cell}</td>"
            if isinstance(cell, Html)
            else f"<td>{esc(_text(cell))}</td>"
            for cell in row
        )
        + "</tr>"
        for row in rows
    )
    return f'<table class="{kind}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _summary(verdict: dict) -> str:
    checks = results_of(verdict)
    failed = [name for name, check in checks.items() if check.failed]
    parts = [
        "<h1>eoschaos verdict</h1>",
        f'<div class="verdict {_verdict_class(verdict.get("verdict"))}">'
        f"{esc(verdict.get('verdict', 'UNKNOWN'))}</div>",
    ]
    unfinished = _list(verdict.get("unfinished"))
    if unfinished:
        missing = "".join(f"<li>{esc(item)}</li>" for item in unfinished)
        parts.append(
            '<div class="banner incomplete" id="unfinished"><strong>Unfinished run.</strong> '
            "The run did not reach its end (it was killed or crashed), so the checks that need "
            "its end could not be judged: the verdict is UNKNOWN, not PASS. A FAIL found in "
            f"what was recorded still stands.<ul>{missing}</ul></div>"
        )
    if _list(verdict.get("damage")):
        damage = "".join(f"<li>{esc(item)}</li>" for item in _list(verdict.get("damage")))
        parts.append(
            '<div class="banner incomplete"><strong>Incomplete history.</strong> A writer was '
            "cut off mid-line (a crash); the checks ran on everything before it, so an anomaly "
            f"in the lost tail cannot be seen.<ul>{damage}</ul></div>"
        )
    summary = f"{len(checks)} checks, {len(failed)} failed"
    if failed:
        summary += ": " + ", ".join(failed)
    parts.append(f"<p>{esc(summary)}</p>")
    faults = verdict.get("faults")
    rows = [
        ["workload", verdict.get("workload")],
        ["mode", verdict.get("mode")],
        ["faults", ", ".join(map(str, faults)) if isinstance(faults, list) else faults],
        ["seed", verdict.get("seed")],
        ["Kafka", verdict.get("kafka_version")],
        ["backend", verdict.get("backend")],
        ["checked in", _seconds(_dict(verdict.get("checker")).get("seconds"))],
        ["Spark jobs", _dict(verdict.get("checker")).get("jobs")],
    ]
    parts.append(_table(["run", "value"], [row for row in rows if row[1] not in (None, "")]))
    return "".join(parts)


def _seconds(value: Any) -> str | None:
    return f"{value:.1f} s" if isinstance(value, int | float) else None


def _checks(verdict: dict) -> str:
    """Failed checks first, each with what it means and where to look."""
    checks = results_of(verdict)
    if not checks:
        return "<h2>Checks</h2><p class='muted'>The verdict holds no checks.</p>"
    rows = []
    details = []
    ordered = sorted(checks.items(), key=lambda item: not item[1].failed)
    drawn = _drawn(verdict)
    for name, check in ordered:
        counts = check.counts
        link = f'<a href="#check-{esc(name)}">{esc(name)}</a>' if check.examples else esc(name)
        rows.append(
            "<tr>"
            f"<td>{link}{_jepsen(check)}</td>"
            f"<td>{_badge(check.verdict)}</td>"
            f'<td class="num">{esc(_text(check.count))}</td>'
            f"<td>{esc(', '.join(f'{k}={_text(v)}' for k, v in counts.items()))}</td>"
            f"<td>{esc(', '.join(check.evidence))}</td>"
            f"<td>{esc(_text(check.description))}{_look_at(name, check)}</td></tr>"
        )
        details.append(_check_examples(name, check, drawn))
    table = (
        '<table class="data"><thead><tr><th>check</th><th>verdict</th><th>count</th>'
        "<th>counts</th><th>judged from</th><th>what it means</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return "<h2>Checks</h2>" + table + "".join(details)


def _jepsen(check: CheckResult) -> str:
    """Jepsen's names for what the check finds, with their counts, under its own name."""
    if not check.jepsen:
        return ""
    names = ", ".join(f"{name}={_text(count)}" for name, count in check.jepsen.items())
    return f'<br><span class="muted">Jepsen: {esc(names)}</span>'


def _look_at(name: str, check: CheckResult) -> str:
    """Where a reviewer looks first when the check fails (its spec): a pointer, not a verdict."""
    spec = CATALOGUE.get(name)
    if not check.failed or spec is None:
        return ""
    return f'<br><span class="look-at"><strong>Look at:</strong> {esc(spec.look)}.</span>'


def _check_examples(name: str, check: CheckResult, drawn: set[tuple[str, int]]) -> str:
    """The first examples of a check; each one with a lineage drawing links to it."""
    indexed = list(enumerate(check.examples))
    if not indexed:
        return ""
    shown = indexed[:MAX_EXAMPLES_SHOWN]
    columns: list[str] = []
    for _, example in shown:
        columns += [key for key in example if key not in columns]
    rows = [
        [_record_in_words(example.get(c)) if c == "record" else example.get(c) for c in columns]
        for _, example in shown
    ]
    if any((name, index) in drawn for index, _ in shown):
        columns.append("lineage")
        for row, (index, _) in zip(rows, shown, strict=True):
            link = f'<a href="#{_lineage_anchor(name, index)}">drawing</a>'
            row.append(Html(link) if (name, index) in drawn else "")
    more = len(indexed) - len(shown)
    note = f"<p class='muted'>{more} more in verdict.json.</p>" if more > 0 else ""
    opened = " open" if check.failed else ""
    table = _table(columns, rows, kind="data examples")
    return (
        f'<details id="check-{esc(name)}"{opened}><summary>{esc(name)}: '
        f"{len(shown)} example record(s)</summary>{table}{note}</details>"
    )


def _record_in_words(record: Any) -> str:
    """A record kept as it was (key, value, headers), as one line of text; escaped like every
    cell, so whatever a pipeline wrote shows as text and never as markup."""
    if record is None:
        return ""
    if not isinstance(record, dict):
        return _text(record)
    parts = [f"key {_shown(record.get('key'))}", f"value {_shown(record.get('value'))}"]
    headers = [h for h in _list(record.get("headers")) if isinstance(h, list) and len(h) == 2]
    if headers:
        parts.append("headers " + ", ".join(f"{_shown(k)}={_shown(v)}" for k, v in headers))
    return "; ".join(parts)


def _shown(text: Any) -> str:
    return "(null)" if text is None else f'"{text}"'


def _lineage_anchor(check: Any, example: Any) -> str:
    return esc(f"lineage-{check}-{example}")


def _drawn(verdict: dict) -> set[tuple[str, int]]:
    """(check, example index) of every anomaly the lineage section draws."""
    anomalies = _list(_dict(verdict.get("lineage")).get("anomalies"))
    return {
        (str(anomaly.get("check")), anomaly.get("example"))
        for anomaly in anomalies
        if isinstance(anomaly, dict) and isinstance(anomaly.get("example"), int)
    }


def _not_applicable(verdict: dict) -> str:
    skipped = _dict(verdict.get("not_applicable"))
    if not skipped:
        return ""
    items = "".join(
        f"<li><strong>{esc(name)}</strong>: {esc(_text(reason))}</li>"
        for name, reason in skipped.items()
    )
    return f"<h2>Not applicable</h2><ul>{items}</ul>"


def _fault_bands(timeline: dict) -> list[Band]:
    bands = []
    for fault in _list(timeline.get("faults")):
        fault = _dict(fault)
        start = fault.get("start")
        if not isinstance(start, int | float):
            continue
        end = fault.get("end") if isinstance(fault.get("end"), int | float) else None
        window = f"{start:.1f}s to {end:.1f}s" if end is not None else f"{start:.1f}s, never healed"
        label = f"{_text(fault.get('f'))} {_text(fault.get('target'))}".strip()
        params = params_in_words(fault.get("params"))
        title = f"{label} ({params}): {window}" if params else f"{label}: {window}"
        bands.append(Band(float(start), end, label, title))
    return bands


def _timeline(verdict: dict) -> str:
    timeline = _dict(verdict.get("timeline"))
    if not timeline:
        return ""
    bands = _fault_bands(timeline)
    throughput = [_dict(row) for row in _list(timeline.get("throughput"))]
    start, end = timeline.get("start"), timeline.get("end")
    duration = end - start if isinstance(start, int | float) and isinstance(end, int | float) else 0
    candidates = [row.get("t") for row in throughput] + [b.end or b.start for b in bands]
    duration = max([duration, *(t for t in candidates if isinstance(t, int | float))])
    width = timeline_width(duration)
    parts = ['<section id="timeline"><h2>Timeline</h2>']
    if isinstance(start, int | float):
        began = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start))
        parts.append(f"<p>Started {esc(began)}; {duration:.1f} s of history.</p>")
    lanes = [_dict(lane) for lane in _list(timeline.get("lanes"))]
    if lanes:
        parts.append("<h3>Processes (fault windows shaded)</h3>")
        parts.append(_lane_legend(lanes))
        parts.append(f'<div class="scroll">{process_lanes(lanes, bands, duration)}</div>')
    parts.append("<h3>Faults</h3>")
    if bands:
        parts.append(
            f'<div class="scroll">{fault_timeline(bands, duration, width, LANE_LABEL_WIDTH)}</div>'
        )
        faults = [_dict(fault) for fault in _list(timeline.get("faults"))]
        parts.append(_without_effect(faults))
        rows = [
            [
                fault.get("f"),
                fault.get("target"),
                _took_effect_in_words(fault),
                params_in_words(_params_but(fault.get("params"), FAULT_TOOK_EFFECT)),
                _milliseconds(fault.get("start")),
                _milliseconds(fault.get("end")) or "never healed",
            ]
            for fault in faults
        ]
        headers = ["fault", "target", "took effect", "what it saw", "start (s)", "healed (s)"]
        parts.append(_table(headers, rows))
    else:
        parts.append("<p class='muted'>No faults were injected.</p>")
    parts.append("<h3>Throughput (records per second; fault windows shaded)</h3>")
    chart = throughput_chart(throughput, bands, duration, width, LANE_LABEL_WIDTH)
    parts.append(f'<div class="scroll">{chart}</div>')
    stats = _dict(verdict.get("stats"))
    chart_args = (bands, duration, width, LANE_LABEL_WIDTH)
    parts.append(_lag_chart(timeline, _dict(stats.get("realtime_lag")), chart_args))
    parts.append(_unseen_chart(timeline, _dict(stats.get("unseen")), chart_args))
    parts.append("</section>")
    return "".join(parts)


def _lag_chart(timeline: dict, figures: dict, chart_args: tuple) -> str:
    """The worst realtime lag per second and output partition, with the verdict's figures."""
    points: dict[str, list[tuple[float, float]]] = {}
    for entry in _list(timeline.get("realtime_lag")):
        if isinstance(entry, list) and len(entry) == 3:
            t, partition, worst = entry
            if isinstance(t, int | float) and isinstance(worst, int | float):
                points.setdefault(str(partition), []).append((t, worst))
    if not points:
        return ""
    lines = [
        (f"partition {p}", PARTITION_COLOURS[n % len(PARTITION_COLOURS)], points[p])
        for n, p in enumerate(sorted(points, key=lambda p: (len(p), p)))
    ]
    summary = (
        f"Worst {_text(figures.get('worst_s'))} s, p99 {_text(figures.get('p99_s'))} s over "
        f"{_text(figures.get('records'))} committed records, from each one's COMMIT marker "
        "to its first downstream read."
    )
    chart = line_chart(lines, "realtime lag", *chart_args)
    return (
        '<h3 id="realtime-lag">Realtime lag (seconds, worst per second and output partition; '
        f'fault windows shaded)</h3><p>{esc(summary)}</p><div class="scroll">{chart}</div>'
    )


def _unseen_chart(timeline: dict, figures: dict, chart_args: tuple) -> str:
    """Acknowledged input not yet read downstream, per second, with the verdict's figures."""
    points = [
        (entry[0], entry[1])
        for entry in _list(timeline.get("unseen"))
        if isinstance(entry, list)
        and len(entry) == 2
        and all(isinstance(v, int | float) for v in entry)
    ]
    if not points:
        return ""
    summary = (
        f"Peak {_text(figures.get('peak'))} at {_text(figures.get('peak_at_s'))} s; "
        f"{_text(figures.get('at_end'))} at the end of the run."
    )
    chart = line_chart([("unseen", UNSEEN_COLOUR, points)], "unseen input", *chart_args)
    return (
        '<h3 id="unseen">Unseen input (acknowledged, not yet read downstream; fault windows '
        f'shaded)</h3><p>{esc(summary)}</p><div class="scroll">{chart}</div>'
    )


def _params(params: Any) -> dict:
    """A fault's params as a dict (they are JSON text in the history); {} if they are not."""
    try:
        value = json.loads(params) if isinstance(params, str) else params
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _params_but(params: Any, key: str) -> Any:
    value = _params(params)
    return {k: v for k, v in value.items() if k != key} if value else params


def _took_effect_in_words(fault: dict) -> str:
    """What the fault's own record says; blank for a fault not healed or a run recorded
    before faults said so."""
    took = _params(fault.get("params")).get(FAULT_TOOK_EFFECT)
    return "" if not isinstance(took, bool) else "yes" if took else "NO"


def _without_effect(faults: list[dict]) -> str:
    """A line that names the faults that hit nothing, so a schedule that did no harm is not
    read as a pipeline that withstood it."""
    missed = [f for f in faults if _params(f.get("params")).get(FAULT_TOOK_EFFECT) is False]
    if not missed:
        return ""
    names = ", ".join(
        f"{_text(f.get('f'))} {_text(f.get('target'))} at {_milliseconds(f.get('start'))} s"
        for f in missed
    )
    return (
        f'<p class="warn" id="faults-without-effect">{len(missed)} of {len(faults)} faults '
        f"did not take effect (they hit nothing; see what each saw): {esc(names)}</p>"
    )


def _lane_legend(lanes: list[dict]) -> str:
    """What the lanes' marks mean, in words as well as colours (checkpoints only where a lane
    has them)."""
    swatches = "".join(
        f'<span class="swatch" style="background:{colour}"></span>{esc(outcome)} transaction'
        for outcome, colour in OUTCOME_COLOURS.items()
    )
    checkpoints = ""
    if any(lane.get("checkpoints") for lane in lanes):
        checkpoints = (
            f'<span class="line" style="border-color:{CHECKPOINT_COLOUR}"></span>a checkpoint, '
            f'triggered to completed<span class="swatch" style="background:{RESTORE_COLOUR}">'
            "</span>the job restored from a checkpoint"
        )
    return (
        f'<p class="legend">{swatches}<span class="swatch activity"></span>activity '
        '(events recorded)<span class="line" style="border-color:#374151"></span>'
        f"an instance's life, start to exit{checkpoints}</p>"
    )


def _forensics(verdict: dict) -> str:
    """Each failed example's records in the batches the brokers wrote, with the pattern."""
    forensics = _dict(verdict.get("forensics"))
    examples = [_dict(example) for example in _list(forensics.get("examples"))]
    head = '<section id="forensics"><h2>Broker-log forensics</h2>'
    if forensics.get("recorded") is False:
        return (
            f"{head}<p class='muted'>This history holds no batch headers of the brokers' logs "
            "(an older eoschaos recorded this run): nothing to show.</p>"
            "</section>"
        )
    if not examples:
        return ""
    parts = [
        head,
        "<p class='muted'>Each example's records in the batches the brokers wrote, read with "
        "Kafka's DumpLogSegments at the end of the run (one replica per partition).</p>",
    ]
    for example in examples:
        pattern = example.get("pattern")
        parts.append(
            f"<h3>{esc(example.get('check'))}: example {esc(example.get('example'))}, "
            + (f"id {esc(example['id'])}" if example.get("id") is not None else "naming no id")
            + "</h3>"
            + (
                f'<p class="pattern"><strong>What the log shows:</strong> {esc(pattern)}.</p>'
                if pattern
                else "<p class='muted'>No known pattern; the batch headers are below.</p>"
            )
        )
        rows = []
        for place in map(_dict, _list(example.get("places"))):
            batch = _dict(place.get("batch"))
            aborted = place.get("aborted_by_marker_at")
            rows.append(
                [
                    f"{_text(place.get('topic'))} p{_text(place.get('partition'))}"
                    f"@{_text(place.get('offset'))}",
                    f"{_text(batch.get('first'))}-{_text(batch.get('last_offset'))}"
                    if batch
                    else "not found",
                    batch.get("producer_id"),
                    batch.get("producer_epoch"),
                    batch.get("base_sequence"),
                    "yes" if batch.get("transactional") else "no",
                    "" if aborted is None else f"aborted (marker at {aborted})",
                    batch.get("leader_epoch"),
                    batch.get("node"),
                ]
            )
        headers = [
            "record",
            "batch offsets",
            "producer id",
            "epoch",
            "base sequence",
            "transactional",
            "transaction",
            "leader epoch",
            "node",
        ]
        parts.append(_table(headers, rows))
    parts.append("</section>")
    return "".join(parts)


def _lineage(verdict: dict) -> str:
    lineage = _dict(verdict.get("lineage"))
    if not lineage:
        return ""
    parts = ["<h2>Offset lineage</h2>"]
    stats = _dict(lineage.get("stats"))
    nodes, edges = _dict(stats.get("nodes")), _dict(stats.get("edges"))
    if nodes or edges:
        parts.append(
            "<p>Whole-history graph: input → transaction → output → read, plus committed "
            "offsets.</p>"
            + _table(["node type", "nodes"], [[k, v] for k, v in nodes.items()])
            + _table(["edge type", "edges"], [[k, v] for k, v in edges.items()])
        )
    other = [[k, v] for k, v in stats.items() if k not in ("nodes", "edges")]
    if other:
        parts.append(_table(["statistic", "value"], other))
    parts.append(_cycles(_dict(lineage.get("cycles"))))
    anomalies = [a for a in _list(lineage.get("anomalies")) if isinstance(a, dict)]
    if anomalies:
        parts.append("<h3>Anomalies, each explained by its subgraph</h3>" + lineage_legend())
        for index, anomaly in enumerate(anomalies):
            omitted = _dict(anomaly.get("omitted"))
            hidden = ", ".join(f"{n} {t}" for t, n in omitted.items())
            anchor = _lineage_anchor(anomaly.get("check"), anomaly.get("example"))
            parts.append(
                f'<h4 id="{anchor}">{esc(_text(anomaly.get("title")))}</h4>'
                + lineage_drawing(anomaly, index)
                + _from_logs(anomaly)
                + (
                    f"<p class='muted'>Not drawn (farther from the anomaly): {esc(hidden)}.</p>"
                    if hidden
                    else ""
                )
            )
    return "".join(parts)


def _from_logs(anomaly: dict) -> str:
    """The anomaly's transactions in words, as the brokers' logs name them."""
    words = [_text(line) for line in _list(anomaly.get("from_logs"))]
    if not words:
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in words)
    return f"<p>Per the brokers' logs:</p><ul class='from-logs'>{items}</ul>"


def _cycles(cycles: dict) -> str:
    if not cycles:
        return ""
    counts = [
        ["G0 (write cycles, ww edges only)", cycles.get("G0")],
        ["G0-process (ww, through one processor's order)", cycles.get("G0-process")],
        [
            "G0-realtime (ww, through one commit returning before a begin)",
            cycles.get("G0-realtime"),
        ],
        ["G1c (cycles with a wr edge)", cycles.get("G1c")],
        ["G1c-process", cycles.get("G1c-process")],
        ["G1c-realtime", cycles.get("G1c-realtime")],
        ["committed transactions with dependencies", cycles.get("transactions")],
        *(
            [f"{kind} edges", cycles.get(f"{kind}_edges")]
            for kind in ("ww", "wr", "process", "realtime")
        ),
    ]
    examples = "".join(
        "<li>"
        + esc(_text(_dict(example).get("anomaly")))
        + ": "
        + esc(
            " ".join(
                f"{_text(_dict(edge).get('source'))} →{_text(_dict(edge).get('type'))}"
                for edge in _list(_dict(example).get("edges"))
            )
            + " "
            + _text((_list(_dict(example).get("cycle")) or [""])[-1])
        )
        + f" <span class='muted'>(component of {esc(_text(_dict(example).get('component_size')))}"
        " transactions)</span></li>"
        for example in _list(cycles.get("examples"))
    )
    return (
        "<h3>Transaction dependency cycles (Elle-style)</h3>"
        f"<p class='note'>{esc(_text(cycles.get('note')))} Counts are strongly connected "
        "components of the committed-transaction graph that contain a cycle. They do not "
        "decide the verdict.</p>"
        + _table(["", "count"], [row for row in counts if row[1] is not None])
        + (
            f"<p>Example cycles (transactions as instance.incarnation.seq):</p><ul>{examples}</ul>"
            if examples
            else ""
        )
    )


def _agreement(verdict: dict) -> str:
    """The client's transactions against the coordinators' (stats.transactions.agreement): a
    line when they agree; each kind of disagreement with its meaning and examples when not.
    None is a check's FAIL, so it sits beside the statistics, not among the checks."""
    agreement = _dict(_dict(_dict(verdict.get("stats")).get("transactions")).get("agreement"))
    if not agreement:
        return ""
    counts = _dict(agreement.get("counts"))
    head = (
        '<section id="agreement"><h2>Client and brokers\' logs</h2>'
        f"<p>{esc(agreement.get('transactions'))} client transactions of "
        f"{esc(agreement.get('transactional_ids'))} transactional ids compared with the "
        "coordinators' transactions in the brokers' logs: "
    )
    if not counts:
        return f"{head}they agree.</p></section>"
    kinds = [[kind, AGREEMENT_KINDS.get(kind, ""), count] for kind, count in counts.items()]
    examples = [
        [example.get("kind"), {k: v for k, v in example.items() if k != "kind"}]
        for example in map(_dict, _list(agreement.get("disagreements")))
    ]
    return (
        f"{head}they disagree. A client, broker or eoschaos bug for a reviewer to place; no "
        "check's verdict rests on it.</p>"
        + _table(["kind", "what disagrees", "count"], kinds)
        + "<h3>Examples</h3>"
        + _table(["kind", "example"], examples)
        + "</section>"
    )


def _stats(verdict: dict) -> str:
    stats = _dict(verdict.get("stats"))
    if not stats:
        return ""
    return "<h2>History statistics</h2>" + _table(
        ["statistic", "value"], [[k, v] for k, v in _flatten(stats)]
    )


def _flatten(data: dict, prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += _flatten(value, f"{name}.")
        else:
            rows.append((name, value))
    return rows


def _reproduce(verdict: dict) -> str:
    config = _dict(verdict.get("config"))
    cluster = _dict(verdict.get("cluster"))
    checker = _dict(verdict.get("checker"))
    versions = {**_dict(config.get("versions")), **_dict(verdict.get("versions"))}
    command = verdict.get("command") or config.get("command")
    if isinstance(command, list):
        command = shlex.join(map(str, command))
    rows = [
        ["Kafka", verdict.get("kafka_version") or cluster.get("kafka_version")],
        ["metadata.version", cluster.get("metadata_version")],
        ["transaction.version", cluster.get("transaction_version")],
        ["eoschaos", versions.get("eoschaos")],
        ["Spark", versions.get("spark") or checker.get("spark_version")],
        ["confluent-kafka", versions.get("confluent_kafka")],
        ["librdkafka", versions.get("librdkafka")],
        ["Python", versions.get("python")],
        ["Spark master", checker.get("spark_master")],
    ]
    parts = [
        "<h2>Reproduce</h2>",
        f"<pre>{esc(command or 'command not recorded')}</pre>",
        f"<p>Seed: <code>{esc(_text(verdict.get('seed')))}</code></p>",
        _table(
            ["component", "version"], [[k, v if v is not None else "not recorded"] for k, v in rows]
        ),
    ]
    for title, data in (("run.json", config), ("cluster.json", cluster), ("checker", checker)):
        if data:
            parts.append(
                f"<details><summary>{esc(title)}</summary><pre>"
                f"{esc(json.dumps(data, indent=2, sort_keys=True, default=str))}</pre></details>"
            )
    return "".join(parts)
