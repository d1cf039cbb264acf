"""The history: the versioned contract between the half that runs and the half that judges.

Every process of a run (seeder, each processor incarnation, observer, final scans, nemesis)
appends its own JSON-lines file under ``RUN_DIR/history/``. One file per writer means no
locking between processes, and a killed writer damages at most its own last line. Lines are
written whole, with one ``os.write`` per flush, and flushed at least every FLUSH_INTERVAL_S
(0.5 s), so a crash loses at most the last half second. At the end of a run the files are
compacted into one Parquet dataset partitioned by ``kind``. docs/history.md documents every
field.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.rundir import HISTORY_DIR, SCHEMA_VERSION

KINDS = ("send", "txn", "rebalance", "read", "instance", "fault", "end", "checkpoint")
TYPES = ("invoke", "ok", "fail", "info")
# The error of an `info` txn event whose call blocked far past its own timeout and was abandoned
# (the process exits and is replaced): the attempt never got an answer from any broker.
HUNG_ERROR_PREFIX = "HUNG:"

# One flat row type for every kind: fields a kind does not use are null. Spark reads the
# JSON lines and the Parquet files with exactly this schema, so a field that drifts in type
# is caught at read time, not silently coerced.
SCHEMA_DDL = ", ".join(
    [
        "kind STRING",
        "type STRING",
        "f STRING",
        "process STRING",
        "time DOUBLE",
        "error STRING",
        "id LONG",
        "topic STRING",
        "partition INT",
        "offset LONG",
        "src_partition INT",
        "src_offset LONG",
        "instance INT",
        "incarnation INT",
        "txn_id STRING",
        "txn_seq LONG",
        "txn_size INT",
        "generation INT",
        "fate STRING",
        "isolation STRING",
        "count LONG",
        "offsets ARRAY<STRUCT<partition: INT, offset: LONG>>",
        "partitions ARRAY<INT>",
        "target STRING",
        "params STRING",
        "lso LONG",
        "txn_index INT",
    ]
)
FIELDS = tuple(part.split(" ", 1)[0] for part in SCHEMA_DDL.split(", ") if " " in part)
# Fields added to schema v1 after runs were recorded without them (adding a field does not
# change what any other means): a history without one reads it as null.
ADDED_FIELDS = ("txn_index",)

# Lineage headers every output record of a processor carries (ASCII values).
HEADER_SRC_TOPIC = "eoschaos.src.topic"
HEADER_SRC_PARTITION = "eoschaos.src.partition"
HEADER_SRC_OFFSET = "eoschaos.src.offset"
HEADER_SRC_ID = "eoschaos.src.id"
HEADER_INSTANCE = "eoschaos.instance"
HEADER_INCARNATION = "eoschaos.incarnation"
HEADER_TXN_ID = "eoschaos.txn.id"
HEADER_TXN_SEQ = "eoschaos.txn.seq"
HEADER_TXN_SIZE = "eoschaos.txn.size"
HEADER_TXN_INDEX = "eoschaos.txn.index"  # the record's place among its transaction's sends
HEADER_GENERATION = "eoschaos.generation"
HEADER_FATE = "eoschaos.fate"

# Writers: each names its history file (`<writer>.jsonl`) and its events' `process`.
SEEDER = "seeder"
OBSERVER = "observer"  # the downstream read_committed reader, live during the run
SUPERVISOR = "supervisor"  # starts and exits of workload instances
INSTANCE_KIND = "instance"  # its events' kind: f "start", and f "exit" with the status in `error`
NEMESIS = "nemesis"
# The key of a healed fault's params (its `ok` row) that says whether it did what it is for:
# false when it saw that it hit nothing (a broker already down, an instance with no transaction
# in flight). The same params hold what it saw change (docs/history.md).
FAULT_TOOK_EFFECT = "took_effect"
FINAL_COMMITTED = "final-committed"  # the read_committed scan of every topic at the end
FINAL_UNCOMMITTED = "final-uncommitted"  # the read_uncommitted scan at the end
FINAL_SCAN_BY_ISOLATION = {"read_committed": FINAL_COMMITTED, "read_uncommitted": FINAL_UNCOMMITTED}
FINAL_SCANS = tuple(FINAL_SCAN_BY_ISOLATION.values())
END_STATE = "end-state"  # LSOs, group offsets and open transactions once faults healed
END_AGGREGATES = "end-aggregates"  # a stateful workload's final aggregates
END_EXPECTED = "end-expected"  # what a user's --expect function says the output must hold
# The run's partitions as the brokers wrote them, read after the final scans: one event per
# batch header (f "batch") and per aborted transaction of a segment's .txnindex (f "aborted"),
# `offset` its first offset, the rest of the header as JSON in `params` (docs/history.md); and
# one event per transaction-state record the coordinators wrote during the run (f TXN_STATE),
# and one per offset commit of the run's groups, with the marker that resolved it
# (f OFFSET_COMMIT).
LOG_BATCHES = "log-batches"
LOG_BATCH_KIND = "log"
# A Flink job's checkpoints as its JobManager's log tells them, recorded after the run (writer
# FLINK_CHECKPOINTS): f CHECKPOINT_TRIGGER, CHECKPOINT_COMPLETE or CHECKPOINT_RESTORE (the job
# restored from that checkpoint), `count` the checkpoint's number, on the JobManager's instance
# and incarnation.
FLINK_CHECKPOINTS = "flink-checkpoints"
CHECKPOINT_KIND = "checkpoint"
CHECKPOINT_TRIGGER = "trigger"
CHECKPOINT_COMPLETE = "complete"
CHECKPOINT_RESTORE = "restore"
LOG_BATCH = "batch"
LOG_ABORTED = "aborted"
# Kafka's own topics the coordinators write, as txn-state and offset-commit rows name them
TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TXN_STATE = "txn-state"
OFFSET_COMMIT = "offset-commit"

# A read of a record that names no source id (what a phantom is made of), or an id the reader
# already read in that topic (a duplicate's later copy), keeps the record as it was in its
# `params`: {"key", "value", "headers": [[name, value], ...]}, each text shortened to
# RAW_TEXT_MAX characters, bytes that are not UTF-8 as \xNN. At most RAW_RECORDS_PER_READER of
# each (repeats: per topic) per reader: enough to show any anomaly example, bounded whatever
# a broken pipeline writes.
RAW_TEXT_MAX = 200
RAW_RECORDS_PER_READER = 100

FLUSH_INTERVAL_S = 0.5
NEWER_INCARNATION_POLL_S = 0.2


def raw_text(data: bytes | None) -> str | None:
    """Bytes as text a report can show: UTF-8 where they are, a backslash, x and two hex digits
    per byte where not, shortened to RAW_TEXT_MAX characters with the full length said."""
    if data is None:
        return None
    text = data.decode("utf-8", errors="backslashreplace")
    if len(text) <= RAW_TEXT_MAX:
        return text
    return f"{text[:RAW_TEXT_MAX]}… ({len(data)} bytes)"


def raw_record(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None
) -> dict[str, Any]:
    """A record as it was, for a read's `params` (see RAW_TEXT_MAX)."""
    return {
        "key": raw_text(key),
        "value": raw_text(value),
        "headers": [[raw_text(name.encode()), raw_text(data)] for name, data in headers or ()],
    }


def instance_name(instance: int, incarnation: int) -> str:
    """The process name of a workload instance's incarnation: its history writer (kip447), log
    file and PID file."""
    return f"processor-{instance}.{incarnation}"


class HistoryWriter:
    """Appends events of one writer process to ``RUN_DIR/history/<process>.jsonl``.

    Thread-safe: librdkafka delivery callbacks and the main loop may record concurrently.
    A background thread flushes every FLUSH_INTERVAL_S so idle writers lose nothing either;
    `flush_each` writers (processors: a few events per transaction) flush every event, so
    others can follow their progress live (the nemesis times its zombie pauses by it).
    """

    def __init__(self, run_dir: Path, process: str, *, flush_each: bool = False) -> None:
        directory = Path(run_dir) / HISTORY_DIR
        directory.mkdir(parents=True, exist_ok=True)
        self.process = process
        self.flush_each = flush_each  # low-volume writers: every event on disk at once
        self.path = directory / f"{process}.jsonl"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[str] = []
        self.error: OSError | None = None  # the last write error, if any (a full disk)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_periodically, daemon=True)
        self._flusher.start()

    def record(self, kind: str, type_: str, f: str, **fields: Any) -> None:
        """Append one event; ``time`` defaults to now. Unknown fields are a programming error."""
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"not in history schema v{SCHEMA_VERSION}: {sorted(unknown)}")
        event = {"kind": kind, "type": type_, "f": f, "process": self.process}
        event["time"] = fields.pop("time", None) or time.time()
        event.update((key, value) for key, value in fields.items() if value is not None)
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._lock:
            self._pending.append(line)
        if self.flush_each:
            self.flush()

    def flush(self) -> None:
        """Write what is pending. On a write error (a full disk) what was not written stays
        pending, in order, for the next flush, and the error is raised (and kept in `error`):
        a history must never lose events silently."""
        with self._lock:
            data = "".join(self._pending).encode()
            self._pending.clear()
            try:
                while data:  # regular files take it all at once; the loop covers short writes
                    data = data[os.write(self._fd, data) :]
            except OSError as exc:
                self._pending.append(data.decode())  # JSON lines are ASCII: any cut decodes
                self.error = exc
                raise

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._flusher.join()
        try:
            self.flush()
        except OSError as exc:
            raise EoschaosError(
                f"{self.path}: the last events could not be written ({exc.strerror}); what was "
                "written before is kept. Free space on its disk"
            ) from None
        finally:
            os.close(self._fd)

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush_periodically(self) -> None:
        while not self._closed.wait(FLUSH_INTERVAL_S):
            # On a write error the events stay pending and the error in `error`: retried at
            # the next interval and at close.
            with contextlib.suppress(OSError):
                self.flush()


def recorded_events(run_dir: Path, writer: str) -> list[dict[str, Any]]:
    """Every event one writer recorded in a finished run, in order; none if it wrote nothing.
    For the scripts that read a run after the fact (the checkers read the compacted history)."""
    path = Path(run_dir) / HISTORY_DIR / f"{writer}.jsonl"
    if not path.exists():
        return []
    with path.open() as lines:
        return [json.loads(line) for line in lines]


def instance_history_files(run_dir: Path, instance: int) -> list[Path]:
    """The history files a workload instance's incarnations wrote, oldest incarnation first."""
    prefix = instance_name(instance, 0).removesuffix("0")
    by_incarnation = {
        int(path.stem.removeprefix(prefix)): path
        for path in (Path(run_dir) / HISTORY_DIR).glob(f"{prefix}*.jsonl")
        if path.stem.removeprefix(prefix).isdigit()
    }
    return [by_incarnation[n] for n in sorted(by_incarnation)]


def _live_events(run_dir: Path, instance: int, deadline: float) -> Iterator[dict[str, Any]]:
    """Events an instance records from now until the deadline, as they are flushed: from the
    end of its newest incarnation's file, moving to a newer incarnation's once one appears
    (a replacement started meanwhile is followed too)."""
    current, live, looked = None, None, 0.0
    try:
        while time.monotonic() < deadline:
            if time.monotonic() - looked > NEWER_INCARNATION_POLL_S:
                looked = time.monotonic()
                newest = next(reversed(instance_history_files(run_dir, instance)), None)
                if newest is not None and newest != current:
                    first = current is None
                    if live is not None:
                        live.close()
                    current, live = newest, newest.open()
                    if first:
                        live.seek(0, os.SEEK_END)  # what is already there happened before
            line = live.readline() if live is not None else ""
            if not line.endswith("\n"):  # nothing new, or a line still being written
                if line and live is not None:
                    live.seek(live.tell() - len(line.encode()))
                time.sleep(0.002)
                continue
            yield json.loads(line)
    finally:
        if live is not None:
            live.close()


def await_instance_event(
    run_dir: Path, instance: int, matches: Callable[[dict[str, Any]], bool], timeout: float
) -> bool:
    """Follow a workload instance's live history until it records an event that `matches`
    (True) or the timeout passes (False). Only writers with `flush_each` can be followed
    this closely (kip447 processors are). An instance that has written no history at all
    is a black box (Streams, Spark, a user's pipeline): False at once, nothing to wait for."""
    if not instance_history_files(run_dir, instance):
        return False
    deadline = time.monotonic() + timeout
    return any(matches(event) for event in _live_events(run_dir, instance, deadline))
