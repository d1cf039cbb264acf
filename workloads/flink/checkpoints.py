"""A Flink job's checkpoints, read from its JobManager's logs into the history after the run.

The reviewer's question after a JobManager or TaskManager kill is which checkpoint the job came
back from, and what it had committed by then. The JobManager logs every checkpoint it triggers
and completes, and every restore; each incarnation's log (the supervisor's instance log) is read
once the run stopped, and each of those lines becomes a `checkpoint` event on that incarnation
(eoschaos.contract.history). The log's timestamps are this machine's wall clock, as every other
event's are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from eoschaos.contract.history import (
    CHECKPOINT_COMPLETE,
    CHECKPOINT_KIND,
    CHECKPOINT_RESTORE,
    CHECKPOINT_TRIGGER,
    FLINK_CHECKPOINTS,
    HistoryWriter,
    instance_name,
)

# The log line's prefix as workloads/flink/build.py has slf4j-simple write it: ISO 8601 time
LOG_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(?:Z|[+-]\d\d:\d\d)) ")
_EVENTS = (
    (CHECKPOINT_TRIGGER, re.compile(r"CheckpointCoordinator - Triggering checkpoint (\d+) ")),
    (CHECKPOINT_COMPLETE, re.compile(r"CheckpointCoordinator - Completed checkpoint (\d+) ")),
    (
        CHECKPOINT_RESTORE,
        re.compile(
            r"CheckpointCoordinator - Restoring job \w+ from (?:Checkpoint|Savepoint) (\d+)"
        ),
    ),
)


@dataclass(frozen=True)
class CheckpointEvent:
    f: str  # CHECKPOINT_TRIGGER, CHECKPOINT_COMPLETE or CHECKPOINT_RESTORE
    checkpoint: int
    time: float  # epoch seconds


def checkpoint_events(log: Path) -> Iterator[CheckpointEvent]:
    """The checkpoint lines of one JobManager log, in order."""
    with log.open(errors="replace") as lines:
        for line in lines:
            stamped = _LINE.match(line)
            if stamped is None or "CheckpointCoordinator" not in line:
                continue
            for f, pattern in _EVENTS:
                found = pattern.search(line)
                if found:
                    time = datetime.fromisoformat(stamped.group(1)).timestamp()
                    yield CheckpointEvent(f, int(found.group(1)), time)
                    break


def record_checkpoints(workload_dir: Path, run_dir: Path, jobmanager: int) -> int:
    """Writer FLINK_CHECKPOINTS: every incarnation's checkpoint lines as `checkpoint` events.
    Returns how many were recorded."""
    recorded = 0
    with HistoryWriter(run_dir, FLINK_CHECKPOINTS) as history:
        incarnation = 0
        while (log := workload_dir / f"{instance_name(jobmanager, incarnation)}.log").exists():
            for event in checkpoint_events(log):
                history.record(
                    CHECKPOINT_KIND,
                    "info",
                    event.f,
                    time=event.time,
                    instance=jobmanager,
                    incarnation=incarnation,
                    count=event.checkpoint,
                )
                recorded += 1
            incarnation += 1
    return recorded
