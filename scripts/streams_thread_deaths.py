"""Forensics of KAFKA-20785 (docs/findings.md, chaos/matrices/kafka-20785.toml): which Kafka
Streams instances died of a fatal error, and what the fault did, per run.

    .venv/bin/python scripts/streams_thread_deaths.py RUN_DIR_OR_MATRIX_OUT [...]

Read from the run directory only: the instances' exits with an error (history `supervisor`),
the fault's recorded effects (history `nemesis`), and each dead instance's log: the exception
the Streams app's handler was given ("stream thread failed") and whether the producer was
fenced instead. A thread death under the late-commit schedule is the bug; a fencing is the
recoverable answer that transaction version 1 gives.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from eoschaos.contract.history import NEMESIS, SUPERVISOR, recorded_events
from eoschaos.contract.rundir import VERDICT_FILE
from eoschaos.matrix.runner import run_dirs

_CAUSE = re.compile(r"^Caused by: (\S+?):")
_DIED = "stream thread failed"
_FENCED = re.compile(r"ProducerFencedException|got fenced")


def _death_cause(log: Path) -> str | None:
    """The first cause under the app's "stream thread failed" line, if the thread died."""
    died = False
    with open(log, errors="replace") as lines:
        for line in lines:
            died = died or _DIED in line
            if died and (match := _CAUSE.match(line)):
                return match.group(1).rsplit(".", 1)[-1]
    return "unknown" if died else None


def describe(run: Path) -> str:
    verdict = json.loads((run / VERDICT_FILE).read_text())["verdict"]
    exits = [
        row
        for row in recorded_events(run, SUPERVISOR)
        if row["f"] == "exit" and row.get("error") not in (None, "0")
    ]
    effects = [json.loads(row["params"]).get("effects") for row in recorded_events(run, NEMESIS)]
    deaths, fenced = [], 0
    for log in sorted((run / "workload").glob("processor-*.log")):
        if cause := _death_cause(log):
            deaths.append(f"{log.stem}: {cause}")
        fenced += len(_FENCED.findall(log.read_text(errors="replace")))
    return (
        f"{run.name}: {verdict} | exits with an error {len(exits)} | thread deaths "
        f"{', '.join(deaths) or 'none'} | fencing lines {fenced} | fault effects "
        f"{[e for e in effects if e]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="run dirs or matrix output dirs")
    args = parser.parse_args()
    for run in run_dirs(args.dirs):
        if (run / VERDICT_FILE).exists():
            print(describe(run))


if __name__ == "__main__":
    main()
