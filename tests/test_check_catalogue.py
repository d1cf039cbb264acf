"""One spec per check (eoschaos.contract.checks): every place that lists checks -- the verdict's
applicability, the report's pointers, the planter and docs/checkers.md -- comes from it. Pure
data: no Spark, no cluster (the verdicts built from it are in tests/checkers/)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from eoschaos.contract.checks import (
    CATALOGUE,
    Evidence,
    Pass,
    first_missing,
    markdown_table,
    needing_pass,
)
from eoschaos.testing import PLANT_CHECKS, Plants

DOCS = Path(__file__).resolve().parent.parent / "docs" / "checkers.md"
INFORMATIONAL_PLANTS = {"fenced_attempts", "hung_calls"}  # counted, not anomalies


def test_docs_checkers_table_is_the_one_the_specs_generate():
    assert markdown_table() in DOCS.read_text(), (
        "docs/checkers.md's table differs from the specs; regenerate it with "
        "`python -m eoschaos.contract.checks`"
    )


def test_every_check_says_what_it_means_and_where_to_look():
    for spec in CATALOGUE.values():
        assert spec.meaning.endswith("."), spec.name
        assert spec.look, spec.name
        assert spec.family in {"delivery", "isolation", "fencing", "liveness", "aggregate"}


def test_a_check_implies_only_checks_that_exist_and_never_itself():
    for spec in CATALOGUE.values():
        assert set(spec.implies) <= set(CATALOGUE) - {spec.name}, spec.name


def test_the_planter_plants_every_anomaly_a_spec_names_and_no_other():
    anomalies = {f.name for f in fields(Plants)} - INFORMATIONAL_PLANTS
    assert set(PLANT_CHECKS) == anomalies
    planted = [plant for spec in CATALOGUE.values() for plant in spec.plants]
    assert len(planted) == len(set(planted)), "a plant is claimed by two checks"


def test_every_pass_finds_some_check():
    assert {spec.found_by for spec in CATALOGUE.values()} == set(Pass)


def test_a_check_is_not_applicable_for_the_first_evidence_it_lacks_in_evidence_order():
    stale_commit = CATALOGUE["fencing.stale-commit"]
    missing = {
        Evidence.COORDINATOR_STATES: "no coordinator states",
        Evidence.TRANSACTIONS: "no transactions",
    }
    assert first_missing(stale_commit, missing) == "no transactions"
    assert first_missing(CATALOGUE["isolation.order"], missing) is None
    only_states = {Evidence.COORDINATOR_STATES: "no coordinator states"}
    assert first_missing(stale_commit, only_states) == "no coordinator states"


def test_a_check_says_where_its_evidence_comes_from():
    assert CATALOGUE["delivery.torn-transaction"].sources == ("broker logs",)
    assert CATALOGUE["fencing.stale-commit"].sources == ("client history", "broker logs")
    assert CATALOGUE["isolation.aborted-read"].sources == ("client history",)
    assert CATALOGUE["isolation.order"].sources == ("reads",)


def test_the_checks_of_a_pass_are_those_whose_spec_names_it():
    assert needing_pass(Pass.LOG_TRANSACTIONS) == (
        "delivery.torn-transaction",
        "isolation.uncommitted-offset-read",
        "fencing.older-epoch-commit",
        "liveness.hanging-transaction",
        "liveness.realtime-lag",
    )
