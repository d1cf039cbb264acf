"""`eoschaos run` killed with SIGKILL (a CI job's timeout) at a moment of each phase, then
`eoschaos cleanup RUN_DIR`. Nothing the run started listened beyond loopback while it ran, and
nothing of it is left running or listening afterwards. The re-check is a verdict or one line
(an unfinished run never reads as PASS). The killed process's writers lost no more history
than their flush interval. CI kills during the cluster's start and right after a crashed
instance was replaced (kip447). Nightly adds that moment for the Streams app and a BYO command,
a kill at a fixed moment of the workload and one while the checkers run, kills of every
workload at random moments, and kills of `eoschaos matrix` at random moments followed by the
resumed night.
scripts/kill_trials.py runs many and prints the figures. The containers backend's kill trial is
in tests/test_containers.py, with the runtime and the image."""

from __future__ import annotations

import os
import random
from pathlib import Path

import copier_image
import pytest
from kill_trials import (
    CRASH_RUN_ARGS,
    INSTANCE_RESTART,
    RANDOM_RUN_ARGS,
    RUN_ARGS,
    matrix_trial,
    random_trial,
    run_trial,
)

from eoschaos.clusters.container_runtime import NO_RUNTIME_FIX, detect_runtime

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
        pytest.param("workload", 6.0, marks=pytest.mark.chaos),  # CI: the restart trial below
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
@pytest.mark.parametrize(
    "workload",
    [
        "kip447",
        # a JVM, and a user's command below a shell: the two kinds eoschaos does not write
        pytest.param("streams", marks=pytest.mark.chaos),
        pytest.param("byo", marks=pytest.mark.chaos),
        pytest.param("byo-image", marks=pytest.mark.chaos),  # a container per instance
    ],
)
def test_a_run_killed_right_after_a_crashed_instance_was_replaced_leaves_no_process(
    tmp_path, workload
):
    """The moment that left a processor running for minutes, parent PID 1, and a Streams JVM
    that joined the next run's cluster: the replacement started after a `crash` fault, by a
    harness then killed with SIGKILL. After `eoschaos cleanup RUN_DIR` no process names the
    run dir in its command line or environment (read from the whole process table), and no
    container carries its label."""
    if workload == "byo-image":
        runtime = detect_runtime()
        if runtime is None:
            pytest.skip(NO_RUNTIME_FIX)
        copier_image.built(runtime)
    trial = run_trial(
        tmp_path / "run",
        INSTANCE_RESTART,
        0.5,
        CRASH_RUN_ARGS[workload],
        recheck=workload == "kip447",  # the re-check of a killed run is the other trials' job
    )
    assert not trial.finished_first, "the run ended before the kill: it tests nothing"
    assert trial.phase_hit == INSTANCE_RESTART, trial
    assert_nothing_lost_or_left(trial)
    assert trial.listened_on, "the run's listening sockets must have been seen"
    if workload == "kip447":  # mid-run: the history exists and is judged unfinished
        assert (trial.check_verdict, trial.check_complete) in (("UNKNOWN", False), ("FAIL", False))
        assert trial.check_exit in (1, 3)


@pytest.mark.cluster
@pytest.mark.chaos
@pytest.mark.parametrize("workload", list(RANDOM_RUN_ARGS))
@pytest.mark.parametrize("seed", range(NIGHTLY_TRIALS))
def test_a_run_killed_at_a_random_moment_leaves_nothing_and_never_reads_as_pass(
    tmp_path, seed, workload
):
    run_args, run_seconds = RANDOM_RUN_ARGS[workload]
    trial = random_trial(tmp_path / "run", random.Random(seed), run_seconds, run_args=run_args)
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
