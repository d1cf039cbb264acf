"""Forensics of a Flink run kept down past its sink's transaction timeout
(chaos/matrices/flink-down-past-timeout.toml, docs/findings.md): did the committer's "this most
likely signals data loss" warnings name transactions the coordinators had already committed,
and which transactions did the coordinators abort against the checkpoint the job restored?

    .venv/bin/python scripts/flink_commit_warnings.py RUN_DIR_OR_MATRIX_OUT [...]

Read from the run directory only: the TaskManagers' logs, the coordinators' transaction states
(history `log-batches`), the first fault (the freeze) and the JobManagers' restores. One line
per run.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from eoschaos.contract.history import (
    CHECKPOINT_RESTORE,
    FLINK_CHECKPOINTS,
    LOG_BATCHES,
    NEMESIS,
    TXN_STATE,
    recorded_events,
)
from eoschaos.contract.rundir import VERDICT_FILE
from eoschaos.matrix.runner import run_dirs

_WARNING = re.compile(r"transactionalId='([^']+)'.*signals data loss")


def _warned(run: Path) -> set[str]:
    """The transactional ids the KafkaSink's committer warned of as a likely data loss."""
    warned = set()
    for log in (run / "workload").glob("processor-*.log"):
        with open(log, errors="replace") as lines:
            warned.update(m.group(1) for line in lines if (m := _WARNING.search(line)))
    return warned


def describe(run: Path) -> str:
    verdict = json.loads((run / VERDICT_FILE).read_text())
    freeze = min(row["time"] for row in recorded_events(run, NEMESIS))
    committed_before, aborted = set(), set()
    for row in recorded_events(run, LOG_BATCHES):
        if row["f"] != TXN_STATE:
            continue
        state = json.loads(row["params"])
        if state["state"] == "CompleteCommit" and state["last_update_ms"] / 1000 < freeze:
            committed_before.add(row["txn_id"])
        elif state["state"] == "CompleteAbort":
            aborted.add(row["txn_id"])
    checkpoints = recorded_events(run, FLINK_CHECKPOINTS)
    restored = sorted({row["count"] for row in checkpoints if row["f"] == CHECKPOINT_RESTORE})
    warned = _warned(run)
    failed = [name for name, check in verdict["checks"].items() if check["verdict"] == "FAIL"]
    # the sink names a transaction PREFIX-SUBTASK-CHECKPOINT
    suffixes = sorted("-".join(txn.rsplit("-", 2)[-2:]) for txn in aborted)
    return (
        f"{run.name}: {verdict['verdict']} {' '.join(failed) or '-'} | warned {len(warned)}, "
        f"of them committed before the freeze {len(warned & committed_before)} | "
        f"aborted {' '.join(suffixes) or '-'} | restored from checkpoint "
        f"{','.join(map(str, restored)) or '-'}"
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
