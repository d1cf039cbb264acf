"""index.html: a night on one page, self-contained and offline.

A grid of cells by Kafka versions, each square saying (in words, and in colour) how many seeds
met the cell's expectation, with a link to every run's report; the regressions against earlier
nights and the version changes next to them; seconds per phase; what was not run.
"""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path
from typing import Any

from eoschaos.matrix.nights import Trend

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.35em 0.6em; text-align: left; vertical-align: top; }
.met { background: #e3f4e3; } .unmet { background: #fbe0e0; } .error { background: #fff2cc; }
.regression { font-weight: bold; color: #a00; } .recovery { color: #070; }
.seed { display: inline-block; margin-right: 0.5em; }
"""


def write_index(
    rows: list[dict[str, Any]],
    path: Path,
    *,
    trends: dict[tuple[str, str], Trend],
    version_changes: list[str],
    not_run: list[str],
) -> None:
    path.write_text(render_index(rows, trends, version_changes, not_run), encoding="utf-8")


def render_index(
    rows: list[dict[str, Any]],
    trends: dict[tuple[str, str], Trend],
    version_changes: list[str],
    not_run: list[str],
) -> str:
    unmet = [row for row in rows if not row.get("met_expectation")]
    headline = f"{len(rows) - len(unmet)} of {len(rows)} cell runs met their expectation" + (
        f"; {len(not_run)} not run" if not_run else ""
    )
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>eoschaos matrix</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>eoschaos matrix: {'ALL MET' if not unmet else 'UNMET'}</h1>",
        f"<p id='headline'>{html.escape(headline)}</p>",
        _grid(rows, trends),
        _regressions(trends, version_changes),
        _phases(rows),
    ]
    if not_run:
        items = "".join(f"<li>{html.escape(key)}</li>" for key in not_run)
        parts.append(f"<h2>Not run (time budget spent)</h2><ul id='not-run'>{items}</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _grid(rows: list[dict[str, Any]], trends: dict[tuple[str, str], Trend]) -> str:
    versions = list(dict.fromkeys(row["kafka_version"] for row in rows))
    by_square: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_square[(row["name"], row["kafka_version"])].append(row)
    cells = list(dict.fromkeys(row["name"] for row in rows))
    head = "".join(f"<th>Kafka {html.escape(v)}</th>" for v in versions)
    body = []
    for cell in cells:
        expected = next(row["expected"] for row in rows if row["name"] == cell)
        squares = "".join(
            _square(by_square.get((cell, version), []), trends.get((cell, version)))
            for version in versions
        )
        body.append(
            f"<tr><th>{html.escape(cell)}<br><small>expects {html.escape(expected)}</small>"
            f"</th>{squares}</tr>"
        )
    return (
        "<h2>Cells</h2><table id='grid'><tr><th>cell</th>"
        + head
        + "</tr>"
        + "".join(body)
        + "</table>"
    )


def _square(runs: list[dict[str, Any]], trend: Trend | None) -> str:
    if not runs:
        return "<td>not run</td>"
    met = sum(1 for run in runs if run.get("met_expectation"))
    errors = sum(1 for run in runs if run["verdict"] == "ERROR")
    unmet = len(runs) - met - errors
    status = "met" if met == len(runs) else ("error" if unmet == 0 else "unmet")
    words = f"{met}/{len(runs)} met" + (f", {unmet} unmet" if unmet else "")
    words += f", {errors} errored" if errors else ""
    seeds = []
    for run in runs:
        mark = "met" if run.get("met_expectation") else run["verdict"]
        label = f"seed {run['seed']}: {run['verdict']} ({'met' if mark == 'met' else 'UNMET'})"
        if run.get("report"):
            seeds.append(f"<a class='seed' href='{html.escape(run['report'])}'>{label}</a>")
        else:
            reason = html.escape(run.get("reason", ""))
            seeds.append(f"<span class='seed' title='{reason}'>{label}: {reason}</span>")
    change = trend.change if trend else ""
    mark = ""
    if change:
        css = "regression" if change == "newly unmet" else "recovery"
        mark = f"<div class='{css}'>{change}</div>"
    rate = (
        f"<div><small>met {trend.nights_met} of {trend.nights_run} nights</small></div>"
        if trend and trend.nights_run > 1
        else ""
    )
    return f"<td class='{status}'><b>{words}</b>{mark}{rate}<div>{' '.join(seeds)}</div></td>"


def _regressions(trends: dict[tuple[str, str], Trend], version_changes: list[str]) -> str:
    changed = [(key, trend) for key, trend in trends.items() if trend.change]
    items = "".join(
        f"<li class='{'regression' if t.change == 'newly unmet' else 'recovery'}'>"
        f"{html.escape(cell)} on Kafka {html.escape(version)}: {t.change} "
        f"(met {t.nights_met} of {t.nights_run} nights)</li>"
        for (cell, version), t in changed
    )
    versions = "".join(f"<li>{html.escape(change)}</li>" for change in version_changes)
    return (
        "<h2>Since the previous night</h2><div id='regressions'>"
        + (f"<ul>{items}</ul>" if items else "<p>No cell changed.</p>")
        + (f"<p>Versions changed:</p><ul>{versions}</ul>" if versions else "")
        + "</div>"
    )


def _phases(rows: list[dict[str, Any]]) -> str:
    totals: dict[str, float] = defaultdict(float)
    for row in rows:
        for phase, seconds in (row.get("seconds") or {}).items():
            totals[phase] += seconds
    cells = "".join(
        f"<tr><td>{html.escape(phase)}</td><td>{seconds:.0f} s</td></tr>"
        for phase, seconds in totals.items()
    )
    return (
        "<h2>Time per phase</h2><table id='phases'><tr><th>phase</th><th>total</th></tr>"
        + cells
        + "</table>"
    )
