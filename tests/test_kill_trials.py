"""`eoschaos run` killed with SIGKILL (a CI job's timeout) at a moment of each phase, then
`eoschaos cleanup RUN_DIR`. Nothing the run started listened beyond loopback while it ran, and
nothing of it is left running or listening afterwards. The re-check is a verdict or one line
(an unfinished run never reads as PASS). The killed process's writers lost no more history
than their flush interval. CI kills during the cluster's start and during the workload. Nightly
adds a kill while the checkers run (72 s; 5 of session 19's 50 random trials hit that phase
too), kills at random moments, and kills of `eoschaos matrix` at random moments followed by
the resumed night.
scripts/kill_trials.py runs many and prints the figures. The containers backend's kill trial is
in tests/test_containers.py, with the runtime and the image."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from kill_trials import RUN_ARGS, RUN_SECONDS, matrix_trial, random_trial, run_trial

CI_MATRIX = Path(__file__).resolve().parent.parent / "chaos" / "matrices" / "ci.toml"
NIGHTLY_TRIALS = int(os.environ.get("EOSCHAOS_KILL_TRIALS", "50"))  # ~55 s each
MATRIX_SECONDS = 115.0  # eoschaos matrix ci.toml, start to index, on the 2-core machine


def assert_nothing_lost_or_left(trial) -> None:
    assert trial.problems() == [], trial


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("moment", "delay_s"),
    [
        ("cluster start", 2.0),
        ("workload", 6.0),
        pytest.param("checking", 1.0, marks=pytest.mark.chaos),
    ],
)
def test_a_run_killed_during_a_phase_leaves_nothing_and_never_reads_as_pass(
    tmp_path, moment, delay_s
):
    trial = run_trial(tmp_path / "run", moment, delay_s, RUN_ARGS)
    assert not trial.finished_first, "the kill came after the run ended: it tests nothing"
    assert trial.phase_hit == moment
    assert_nothing_lost_or_left(trial)  # loopback only, too
    if moment != "cluster start":
        assert trial.listened_on, "the run's listening sockets must have been seen"
    if moment == "workload":  # mid-run: the history exists and is judged unfinished
        assert (trial.check_verdict, trial.check_complete) in (("UNKNOWN", False), ("FAIL", False))
        assert trial.check_exit in (1, 3)


@pytest.mark.cluster
@pytest.mark.chaos
@pytest.mark.parametrize("seed", range(NIGHTLY_TRIALS))
def test_a_run_killed_at_a_random_moment_leaves_nothing_and_never_reads_as_pass(tmp_path, seed):
    trial = random_trial(tmp_path / "run", random.Random(seed), RUN_SECONDS, run_args=RUN_ARGS)
    assert_nothing_lost_or_left(trial)


@pytest.mark.cluster
@pytest.mark.chaos
@pytest.mark.parametrize("seed", range(3))
def test_a_matrix_killed_at_a_random_moment_resumes_every_cell_run_once_leaving_nothing(
    tmp_path, seed
):
    delay_s = random.Random(seed).uniform(0, MATRIX_SECONDS)
    trial = matrix_trial(tmp_path / "night", CI_MATRIX, delay_s)
    assert_nothing_lost_or_left(trial)  # every cell run judged once after the resume, too
