"""Benchmark: how long a Flink run's cluster and job take to start, and to come back from a
JobManager kill, read off the run directories of real runs (`--workload flink`).

    .venv/bin/python scripts/bench_flink_start.py RUN_DIR_OR_MATRIX_OUT [...]

Per run: from the JobManager's and TaskManagers' first start (the supervisor's history) to the
job RUNNING in the JobManager's log, to every task running (the seeder's first send: it holds the
input until then), to its first completed checkpoint, and to the first output record the
downstream observer read; and, for each JobManager killed, from its kill to the
resubmitted job RUNNING. Prints one line per run and the medians; numbers go to
docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import re
import statistics
from datetime import datetime
from pathlib import Path

from eoschaos.contract.history import (
    OBSERVER,
    SEEDER,
    SUPERVISOR,
    instance_name,
    recorded_events,
)
from eoschaos.matrix.runner import run_dirs
from eoschaos.workloads.flink.pipeline import JOBMANAGER

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\S+) ")
_RUNNING = re.compile(r"Job eoschaos-flink \w+ \(\w+\) switched from state CREATED to RUNNING")
_COMPLETED = re.compile(r"Completed checkpoint \d+ ")


def _first(log: Path, pattern: re.Pattern[str]) -> float | None:
    for line in log.open(errors="replace"):
        stamp = _STAMP.match(line)
        if stamp and pattern.search(line):
            return datetime.fromisoformat(stamp.group(1)).timestamp()
    return None


def one_run(run_dir: Path) -> dict[str, float] | None:
    starts = [
        e
        for e in recorded_events(run_dir, SUPERVISOR)
        if e["kind"] == "instance" and e["f"] == "start"
    ]
    first_log = run_dir / "workload" / f"{instance_name(JOBMANAGER, 0)}.log"
    if not starts or not first_log.exists() or _first(first_log, _STAMP) is None:
        return None  # not a Flink run, or its logs carry no dates
    began = min(e["time"] for e in starts)
    running = _first(first_log, _RUNNING)
    checkpoint = _first(first_log, _COMPLETED)
    reads = [e["time"] for e in recorded_events(run_dir, OBSERVER) if e["kind"] == "read"]
    sends = [e["time"] for e in recorded_events(run_dir, SEEDER) if e["kind"] == "send"]
    figures = {
        "job running": running - began if running else None,
        # the seeder holds the input until every task runs (FlinkPipeline.ready_for_input)
        "every task running": min(sends) - began if sends else None,
        "first checkpoint": checkpoint - began if checkpoint else None,
        "first output": min(reads) - began if reads else None,
    }
    kills = [e for e in recorded_events(run_dir, SUPERVISOR) if e["f"] == "exit"]
    back = []
    for kill in kills:
        if kill["instance"] != JOBMANAGER or kill.get("error") != "-9":
            continue
        log = run_dir / "workload" / f"{instance_name(JOBMANAGER, kill['incarnation'] + 1)}.log"
        resumed = _first(log, _RUNNING) if log.exists() else None
        if resumed is not None:
            back.append(resumed - kill["time"])
    figures["jobmanager kill to running"] = max(back) if back else None
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    args = parser.parse_args()
    columns: dict[str, list[float]] = {}
    for run_dir in run_dirs(args.dirs):
        figures = one_run(run_dir)
        if figures is None:
            continue
        shown = ", ".join(f"{k} {v:.1f} s" for k, v in figures.items() if v is not None)
        print(f"{run_dir.name}: {shown}")
        for name, value in figures.items():
            if value is not None:
                columns.setdefault(name, []).append(value)
    for name, values in columns.items():
        print(
            f"{name}: median {statistics.median(values):.1f} s, "
            f"range {min(values):.1f}-{max(values):.1f} s over {len(values)} runs"
        )


if __name__ == "__main__":
    main()
