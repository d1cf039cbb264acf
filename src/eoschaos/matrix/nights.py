"""Tonight against earlier nights: which cells newly stopped (or started) meeting their
expectation, each cell's rate over the nights given, and which versions changed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eoschaos.contract.errors import EoschaosError
from eoschaos.matrix.runner import RESULTS_FILE, read_results

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Trend:
    """One (cell, Kafka version) over the nights: met = every seed's run met its expectation."""

    met_tonight: bool | None  # None: not run tonight
    met_last: bool | None  # the latest earlier night that ran it
    nights_met: int
    nights_run: int

    @property
    def change(self) -> str:
        if self.met_tonight is None or self.met_last is None:
            return ""
        if self.met_last and not self.met_tonight:
            return "newly unmet"
        if not self.met_last and self.met_tonight:
            return "newly met"
        return ""


def previous_nights(paths: list[Path]) -> list[Rows]:
    """Each path is one earlier matrix output (DIR with results.jsonl) or a directory of them
    (taken in name order: date-stamped names sort by night)."""
    nights: list[Rows] = []
    for path in paths:
        if (path / RESULTS_FILE).exists():
            nights.append(read_results(path))
            continue
        found = sorted(p for p in path.glob(f"*/{RESULTS_FILE}")) if path.is_dir() else []
        if not found:
            raise EoschaosError(f"--previous {path}: no {RESULTS_FILE} in it or its subfolders")
        nights += [read_results(p.parent) for p in found]
    return nights


def trends(tonight: Rows, earlier: list[Rows]) -> dict[tuple[str, str], Trend]:
    per_night = [_met_by_cell(rows) for rows in [*earlier, tonight]]
    keys = dict.fromkeys(key for night in per_night for key in night)
    result = {}
    for key in keys:
        history = [night[key] for night in per_night[:-1] if key in night]
        result[key] = Trend(
            met_tonight=per_night[-1].get(key),
            met_last=history[-1] if history else None,
            nights_met=sum(1 for night in per_night if night.get(key)),
            nights_run=sum(1 for night in per_night if key in night),
        )
    return result


def version_changes(tonight: Rows, earlier: list[Rows]) -> list[str]:
    """'confluent_kafka 2.16.1 → 2.17.0': what differs from the latest earlier night."""
    if not earlier:
        return []
    now, before = _versions(tonight), _versions(earlier[-1])
    return [
        f"{name} {before.get(name, '?')} → {now.get(name, '?')}"
        for name in sorted(set(now) | set(before))
        if now.get(name) != before.get(name)
    ]


def _met_by_cell(rows: Rows) -> dict[tuple[str, str], bool]:
    met: dict[tuple[str, str], bool] = {}
    for row in rows:
        key = (row["name"], row["kafka_version"])
        met[key] = met.get(key, True) and bool(row.get("met_expectation"))
    return met


def _versions(rows: Rows) -> dict[str, str]:
    seen: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        for name, version in (row.get("versions") or {}).items():
            if name != "kafka":  # Kafka versions are the matrix's columns
                seen[name].add(str(version))
    return {name: ", ".join(sorted(values)) for name, values in seen.items()}
