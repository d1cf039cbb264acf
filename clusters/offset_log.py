"""The group coordinators' own log: every offset commit of the run's groups, and for a
transactional one, the marker that resolved it.

The "99 duplicates after a broker kill" investigation (docs/findings.md) was done by reading
`__consumer_offsets` by hand: a committed offset for input partition 3 went from 99 back to 21.
Any pipeline's consumed input is in this log, whatever its language: an offset commit written by
a transactional producer (sendOffsetsToTransaction) is a record of that producer's batch,
visible only once the COMMIT marker that follows it in the same partition resolves it, and
discarded by an ABORT marker. The run reads it with Kafka's DumpLogSegments while the data dirs
exist and records one row per commit (writer LOG_BATCHES, f OFFSET_COMMIT), so a checker can
follow each group's committed offsets in marker order, for pipelines that write no history.

Only the run's commits: a shared cluster's log holds other runs' groups; a commit counts when its
group is one of the run's or it commits a partition of one of the run's topics (a user's
pipeline may name its own group), and only segments written since the run started are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.clusters.log_dump import (
    Replica,
    lines_by_replica,
    run_dump,
    segments_written_since,
)
from eoschaos.contract.history import (
    CONSUMER_OFFSETS_TOPIC,
    LOG_BATCH_KIND,
    OFFSET_COMMIT,
    HistoryWriter,
)

_PAIR = re.compile(r"(\w+): (\S+)")
_RECORD = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: (?P<create_time>-?\d+) "
    r".*? key: (?P<key>.*?) payload: (?P<payload>.*)$"
)
_MARKER = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: (?P<create_time>-?\d+) "
    r".*endTxnMarker: (?P<marker>COMMIT|ABORT)"
)


@dataclass
class OffsetCommit:
    """One offset commit as the group coordinator wrote it."""

    group: str
    topic: str
    partition: int
    offset: int  # the committed offset: the next record the group will read
    log_partition: int  # where it is in __consumer_offsets
    log_offset: int
    create_time: int  # ms
    producer_id: int  # -1: a plain (non-transactional) commit
    producer_epoch: int
    transactional: bool
    commit_ms: int | None = None  # the commit's own timestamp, as the value holds it
    # the marker that resolved a transactional commit; None: none yet (an open transaction)
    marker: str | None = None
    marker_offset: int | None = None
    marker_time: int | None = None
    node: int = 0


def parse_offset_log(out: str, by_file: dict[str, Replica]) -> Iterator[OffsetCommit]:
    """DumpLogSegments --deep-iteration --offsets-decoder's text -> every offset commit, each
    transactional one with the marker its producer wrote next in the same partition."""
    batch: dict[str, str] = {}
    pending: dict[tuple[int, int], list[OffsetCommit]] = {}  # (log partition, producer id)
    for replica, line in lines_by_replica(out, by_file):
        if line.startswith("baseOffset:"):
            batch = dict(_PAIR.findall(line))
            continue
        producer_id = int(batch.get("producerId", -1))
        marker = _MARKER.match(line)
        if marker is not None:
            for commit in pending.pop((replica.partition, producer_id), []):
                commit.marker = marker["marker"]
                commit.marker_offset = int(marker["offset"])
                commit.marker_time = int(marker["create_time"])
                yield commit
            continue
        record = _RECORD.match(line)
        if record is None:
            continue
        decoded = _decode(record["key"], record["payload"])
        if decoded is None:
            continue
        transactional = batch.get("isTransactional") == "true"
        commit = OffsetCommit(
            *decoded[:4],
            log_partition=replica.partition,
            log_offset=int(record["offset"]),
            create_time=int(record["create_time"]),
            producer_id=producer_id,
            producer_epoch=int(batch.get("producerEpoch", -1)),
            transactional=transactional,
            commit_ms=decoded[4],
            node=replica.node,
        )
        if transactional:
            pending.setdefault((replica.partition, producer_id), []).append(commit)
        else:
            yield commit
    for commits in pending.values():  # no marker: the transaction was still open
        yield from commits


def _decode(key: str, payload: str) -> tuple[str, str, int, int, int | None] | None:
    """(group, topic, partition, offset, commit ms) of an offset commit record; None for any
    other record (group metadata) and for a tombstone (an expired or deleted offset). Kafka
    3.9's tool prints them as JSON too, as 4.x's does (read with both on a 4.3.1 log)."""
    try:
        data = json.loads(key)["data"]
        if "topic" not in data:
            return None  # group metadata
        value = json.loads(payload)
        if value is None:
            return None
        committed = value["data"]
        return (
            data["group"],
            data["topic"],
            int(data["partition"]),
            int(committed["offset"]),
            committed.get("commitTimestamp"),
        )
    except (ValueError, TypeError, KeyError):
        return None


def record_offset_log(
    dist: KafkaDistribution,
    data_dirs: dict[int, Path],
    since: float,
    groups: set[str],
    topics: set[str],
    history: HistoryWriter,
) -> int:
    """Every offset commit of `groups`, or of a partition of `topics`, written since `since`
    (seconds, wall clock) into `history` at its create time; how many."""
    by_file = segments_written_since(data_dirs, CONSUMER_OFFSETS_TOPIC, since)
    if not by_file:
        return 0
    out = run_dump(dist, by_file, "--deep-iteration", "--offsets-decoder")
    recorded = 0
    for commit in parse_offset_log(out, by_file):
        ours = commit.group in groups or commit.topic in topics
        if not ours or commit.create_time < since * 1000:
            continue
        history.record(
            LOG_BATCH_KIND,
            "ok",
            OFFSET_COMMIT,
            time=commit.create_time / 1000,
            topic=commit.topic,
            partition=commit.partition,
            offset=commit.offset,
            params=json.dumps(
                {
                    "group": commit.group,
                    "log_partition": commit.log_partition,
                    "log_offset": commit.log_offset,
                    "producer_id": commit.producer_id,
                    "producer_epoch": commit.producer_epoch,
                    "transactional": commit.transactional,
                    "commit_ms": commit.commit_ms,
                    "marker": commit.marker,
                    "marker_offset": commit.marker_offset,
                    "marker_time": commit.marker_time,
                    "node": commit.node,
                },
                sort_keys=True,
            ),
        )
        recorded += 1
    return recorded
