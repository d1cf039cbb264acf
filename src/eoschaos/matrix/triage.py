"""Triage of a hunt's FAIL draws: each one a reviewer has explained gets a class and a reason.

A nightly hunt that exits 1 every night for the same known anomaly hides a new one. So a FAIL is
triaged by the first rule that matches it: the rules of `--triage FILE` (the reviewer's), then
KNOWN (what docs/findings.md explains for eoschaos' own workloads). A rule names a class
(TRIAGE_CLASSES), one line of why, and what a draw must show: its workload, faults its schedule
holds, and checks that cover every check it failed; or the draws themselves by key, as a
reviewer triages one night's FAILs after reading them. hunt.json counts the FAILs per class;
the hunt exits 1 only for an untriaged FAIL or an ERROR. A draw a rule matches as it fails is
not shrunk: the hunt's hours go to draws nobody has explained yet.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eoschaos.chaos.catalogue import CATALOGUE
from eoschaos.contract.checks import CATALOGUE as CHECKS
from eoschaos.contract.errors import EoschaosError

TRIAGE_CLASSES = ("expected", "client bug", "broker bug", "harness bug")
UNTRIAGED = "untriaged"
RULE_KEYS = ("triage", "why", "workloads", "faults", "checks", "draws")


@dataclass(frozen=True)
class TriageRule:
    """Matches a FAIL draw of one of `workloads` (any if empty) whose schedule holds every
    fault of `faults` and whose failed checks are all among `checks` (any if empty); or, with
    `draws`, exactly those draws (keys as in results.jsonl)."""

    triage: str
    why: str
    workloads: tuple[str, ...] = ()
    faults: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    draws: tuple[str, ...] = ()

    def matches(self, key: str, workload: str, faults: set[str], failed: set[str]) -> bool:
        if self.draws:
            return key in self.draws
        return (
            (not self.workloads or workload in self.workloads)
            and set(self.faults) <= faults
            and (not self.checks or failed <= set(self.checks))
        )


# What docs/findings.md explains for eoschaos' own workloads under the hunt's faults.
KNOWN = (
    TriageRule(
        "expected",
        "KAFKA-17754: librdkafka keeps its producer epoch across transactions, so a stale "
        "EndTxn commits its next transaction (docs/findings.md)",
        workloads=("kip447",),
        faults=("stale-endtxn",),
        checks=(
            "fencing.stale-commit",
            "isolation.aborted-read",
            "isolation.uncommitted-read",
            "delivery.lost",
            "delivery.duplicate",
            "delivery.torn-transaction",
        ),
    ),
)


def triage_of(
    rules: Iterable[TriageRule], key: str, workload: str, faults: set[str], failed: set[str]
) -> TriageRule | None:
    """The first rule that matches the FAIL draw, or None: untriaged."""
    return next((rule for rule in rules if rule.matches(key, workload, faults, failed)), None)


def load_rules(path: Path | None) -> tuple[TriageRule, ...]:
    """The reviewer's rules of `path` (TOML: a [[rule]] table each), then KNOWN. Every
    mistake is one EoschaosError naming the rule and the fix."""
    if path is None:
        return KNOWN
    try:
        tables = tomllib.loads(path.read_text()).get("rule", [])
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise EoschaosError(f"--triage {path}: cannot read it as TOML ({exc})") from None
    if not isinstance(tables, list):
        raise EoschaosError(f"--triage {path}: write each rule as a [[rule]] table")
    return (
        *(_rule(table, f"--triage {path}: rule {n}") for n, table in enumerate(tables, 1)),
        *KNOWN,
    )


def _rule(table: Any, where: str) -> TriageRule:
    if not isinstance(table, dict):
        raise EoschaosError(f"{where}: write it as a [[rule]] table")
    unknown = sorted(set(table) - set(RULE_KEYS))
    if unknown:
        raise EoschaosError(f"{where}: unknown key {unknown[0]!r}; a rule takes {RULE_KEYS}")
    if table.get("triage") not in TRIAGE_CLASSES:
        raise EoschaosError(
            f"{where}: triage = {table.get('triage')!r}; write one of {TRIAGE_CLASSES}"
        )
    if not isinstance(table.get("why"), str) or not table["why"].strip():
        raise EoschaosError(f'{where}: write why = "...": one line a reviewer reads')
    lists = {}
    for key in ("workloads", "faults", "checks", "draws"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise EoschaosError(f"{where}: {key} must be a list of strings")
        lists[key] = tuple(value)
    for name, known, what in (("faults", CATALOGUE, "fault"), ("checks", CHECKS, "check")):
        strange = [value for value in lists[name] if value not in known]
        if strange:
            raise EoschaosError(f"{where}: unknown {what} {strange[0]!r} in {name}")
    if not (lists["draws"] or lists["workloads"] or lists["faults"] or lists["checks"]):
        raise EoschaosError(
            f"{where}: it would match every FAIL; name draws, or workloads, faults or checks"
        )
    return TriageRule(table["triage"], table["why"].strip(), **lists)
