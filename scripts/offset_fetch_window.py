"""Forensics of the 99-duplicates lead (docs/findings.md): did a consumer start a partition while
a transactional offset commit of it was pending, or below its stable committed offset?

    EOSCHAOS_LIBRDKAFKA_DEBUG=cgrp eoschaos matrix chaos/matrices/lead-99-widened.toml --out DIR
    .venv/bin/python scripts/offset_fetch_window.py DIR [RUN_DIR ...]

Read from the run directory only: the group's transactional offset commits in
`__consumer_offsets` with their markers' times (history `log-batches`), and each assignment's
start offset from librdkafka's debug lines in the kip447 processors' logs ("Starting pending
assigned partition ... at offset N"). Per run: the longest pending commit, committed offsets
that went backwards, the assignment starts, those inside a pending commit of their partition,
and those below the stable committed offset (the lead's anomaly); and the assignments whose
committed offsets were fetched while a commit of their partition was pending (the lead's
window met: "Querying committed offset for pending assigned partition ...").
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from eoschaos.contract.history import LOG_BATCHES, OFFSET_COMMIT, recorded_events
from eoschaos.contract.rundir import HISTORY_DIR, VERDICT_FILE
from eoschaos.matrix.runner import run_dirs

_START = re.compile(
    r"^%7\|(?P<time>[\d.]+)\|SRVPEND\|.*Starting pending assigned partition (?P<topic>\S+) "
    r"\[(?P<partition>\d+)\] at offset (?P<offset>\S+)"
)
# an assignment's committed-offset fetch going out: inside a pending commit, the lead's window
_QUERY = re.compile(
    r"^%7\|(?P<time>[\d.]+)\|SRVPEND\|.*Querying committed offset for pending assigned "
    r"partition (?P<topic>\S+) \[(?P<partition>\d+)\]"
)


@dataclass(frozen=True)
class Commit:
    partition: int
    offset: int
    written: float  # the offset commit's own record
    decided: float  # its transaction's marker
    committed: bool


def _commits(run: Path) -> list[Commit]:
    commits = []
    for row in recorded_events(run, LOG_BATCHES):
        if row["f"] != OFFSET_COMMIT:
            continue
        params = json.loads(row["params"])
        if params.get("transactional") and params.get("marker_time"):
            commits.append(
                Commit(
                    row["partition"],
                    row["offset"],
                    params["commit_ms"] / 1000,
                    params["marker_time"] / 1000,
                    params["marker"] == "COMMIT",
                )
            )
    return commits


def describe(run: Path) -> str:
    commits = _commits(run)
    stable = sorted((c for c in commits if c.committed), key=lambda c: c.decided)
    backwards, highest = 0, {}
    for commit in stable:
        backwards += commit.offset < highest.get(commit.partition, -1)
        highest[commit.partition] = max(highest.get(commit.partition, -1), commit.offset)

    def pending(partition: int, at: float) -> bool:
        return any(c.partition == partition and c.written <= at < c.decided for c in commits)

    starts = inside = below = queried_pending = 0
    for log in sorted((run / "workload").glob("processor-*.log")):
        with open(log, errors="replace") as lines:
            for line in lines:
                query = _QUERY.match(line)
                if query:
                    queried_pending += pending(int(query["partition"]), float(query["time"]))
                match = _START.match(line)
                if match is None:
                    continue
                at, partition = float(match["time"]), int(match["partition"])
                starts += 1
                inside += pending(partition, at)
                then = [c.offset for c in stable if c.partition == partition and c.decided <= at]
                offset = match["offset"]
                started = int(offset) if offset.isdigit() else 0  # INVALID: from the beginning
                below += bool(then) and started < max(then)
    verdict = (
        json.loads((run / VERDICT_FILE).read_text())["verdict"]
        if (run / VERDICT_FILE).exists()
        else "unchecked"
    )
    longest = max((c.decided - c.written for c in commits), default=0.0)
    return (
        f"{run.name}: {verdict} | longest pending commit {longest:.1f} s | committed offsets "
        f"backwards {backwards} | offsets fetched while a commit was pending {queried_pending} "
        f"| assignment starts {starts}, inside a pending commit {inside}, below the stable "
        f"offset {below}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="run dirs or matrix output dirs")
    args = parser.parse_args()
    for run in run_dirs(args.dirs):
        if (run / HISTORY_DIR / f"{LOG_BATCHES}.jsonl").exists():
            print(describe(run))


if __name__ == "__main__":
    main()
