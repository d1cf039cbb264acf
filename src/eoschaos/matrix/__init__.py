"""`eoschaos matrix FILE --out DIR`: many verdicts a night on one machine, one answer.

spec reads and checks the matrix file; runner runs its cell runs on shared clusters and keeps
the ledger (results.jsonl); junit, nights and index turn the ledger into what CI and a reviewer
read. Exit code: 0 every cell run met its expectation, 1 any did not (or errored), 2 bad input
or the infrastructure failed. hunt (`eoschaos hunt`) runs drawn cells on the same runner until a
time budget is spent, and shrinks the schedule of each that fails.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eoschaos.contract.progress import progress_to_stderr
from eoschaos.matrix.index import write_index
from eoschaos.matrix.junit import write_junit
from eoschaos.matrix.nights import previous_nights, trends, version_changes
from eoschaos.matrix.runner import run_matrix
from eoschaos.matrix.spec import load_matrix

JUNIT_FILE = "junit.xml"
INDEX_FILE = "index.html"


def run_matrix_file(
    path: Path,
    out: Path,
    *,
    max_minutes: float | None = None,
    previous: list[Path] | None = None,
    spark_master: str | None = None,
    progress: Callable[[str], None] = progress_to_stderr,
) -> bool:
    """Run (or resume) the matrix into `out` and write its outputs; True if all was met."""
    runs = load_matrix(path)
    earlier = previous_nights(previous or [])  # bad --previous is bad input: before any start
    progress(f"matrix {path}: {len(runs)} cell runs")
    outcome = run_matrix(
        runs, out, max_minutes=max_minutes, spark_master=spark_master, progress=progress
    )
    write_junit(outcome.rows, out, out / JUNIT_FILE)
    write_index(
        outcome.rows,
        out / INDEX_FILE,
        trends=trends(outcome.rows, earlier),
        version_changes=version_changes(outcome.rows, earlier),
        not_run=[run.key for run in outcome.not_run],
    )
    for run in outcome.not_run:
        progress(f"not run (time budget spent): {run.key}")
    unmet = [row["key"] for row in outcome.rows if not row.get("met_expectation")]
    progress(
        f"{len(outcome.rows) - len(unmet)} of {len(outcome.rows)} cell runs met their "
        f"expectation" + (f"; unmet: {', '.join(unmet)}" if unmet else "")
    )
    print(out / INDEX_FILE)
    return not unmet
