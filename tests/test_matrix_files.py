"""The shipped matrices load, and the nightly one covers every workload in every mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoschaos.clusters.kafka_dist import DEFAULT_KAFKA_VERSION, LATEST_3X_VERSION
from eoschaos.matrix.spec import load_matrix
from eoschaos.workloads.registry import KINDS

MATRICES = Path(__file__).parent.parent / "chaos" / "matrices"


@pytest.mark.parametrize("name", sorted(path.stem for path in MATRICES.glob("*.toml")))
def test_a_shipped_matrix_loads(name):
    assert load_matrix(MATRICES / f"{name}.toml")


def test_the_nightly_matrix_runs_every_workload_in_every_mode_on_both_kafka_lines():
    runs = load_matrix(MATRICES / "nightly.toml")
    covered = {(r.options.get("workload", "kip447"), r.options.get("mode", "eos")) for r in runs}
    assert covered == {(kind.name, mode) for kind in KINDS.values() for mode in kind.modes}
    assert {r.kafka_version for r in runs} == {DEFAULT_KAFKA_VERSION, LATEST_3X_VERSION}


def test_every_known_bad_cell_of_the_nightly_matrix_expects_a_failure():
    for run in load_matrix(MATRICES / "nightly.toml"):
        kind = KINDS[run.options.get("workload", "kip447")]
        correct = run.options.get("mode", "eos") in kind.correct_modes and not run.options.get(
            "non_idempotent_seeder"
        )
        assert (run.expect.verdict == "PASS") == correct, run.key
