"""A run's partitions as the brokers wrote them: batch headers read with Kafka's own tool.

Two real librdkafka anomalies (docs/findings.md) were explained only by running Kafka's
DumpLogSegments by hand on the kept data dirs: producer ids, epochs and sequence numbers of
the batches around the anomalous offsets, and which transactions were aborted. The run does
that for every partition of its topics while the data dirs exist, and records the headers in
the history (writer LOG_BATCHES), so the checker can join them to its anomalies and a re-check
years later still can. Batch headers only -- never a record's key or value -- so the size is
bounded by batches, not records; aborted transactions come from the segments' .txnindex.

One replica per partition: the one with the most log bytes (the replicas agree on everything
committed; a replica behind would show less).
"""

from __future__ import annotations

import functools
import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from eoschaos.clusters.admin import run_tool
from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.contract.history import LOG_ABORTED, LOG_BATCH, LOG_BATCH_KIND, HistoryWriter

# Kafka's tools module took DumpLogSegments over from the broker's own (Scala) after 4.1
DUMP_TOOL_MOVED = "org.apache.kafka.tools.DumpLogSegments"
DUMP_TOOL_CORE = "kafka.tools.DumpLogSegments"
DUMP_TIMEOUT_S = 300.0
MTIME_SLACK_S = 2.0  # a file system's timestamps may be that coarse
_PAIR = re.compile(r"(\w+): (\S+)")
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass(frozen=True)
class Replica:
    topic: str
    partition: int
    node: int
    path: Path


def chosen_replicas(data_dirs: dict[int, Path], topics: set[str]) -> list[Replica]:
    """Per partition of `topics`, the replica (node, directory) with the most log bytes."""
    best: dict[tuple[str, int], tuple[int, Replica]] = {}
    for node, data in sorted(data_dirs.items()):
        for directory in sorted(data.glob("*-*")) if data.is_dir() else []:
            name = _PARTITION_DIR.match(directory.name)
            if not name or name["topic"] not in topics:
                continue
            key = (name["topic"], int(name["partition"]))
            size = sum(log.stat().st_size for log in directory.glob("*.log"))
            if key not in best or size > best[key][0]:
                best[key] = (size, Replica(key[0], key[1], node, directory))
    return [replica for _, replica in (best[key] for key in sorted(best))]


def segments_written_since(
    data_dirs: dict[int, Path], topic: str, since: float
) -> dict[str, Replica]:
    """The .log segments of `topic`'s chosen replicas written to since `since` (seconds, wall
    clock), by path. A coordinator topic of a shared cluster grows with every run; a segment
    untouched since the run started holds none of its records."""
    return {
        str(path): replica
        for replica in chosen_replicas(data_dirs, {topic})
        for path in sorted(replica.path.glob("*.log"))
        if path.stat().st_mtime >= since - MTIME_SLACK_S
    }


def dump(dist: KafkaDistribution, replicas: list[Replica]) -> Iterator[tuple[Replica, dict]]:
    """(replica, header) for every batch and every aborted transaction of `replicas`, from
    one run of DumpLogSegments over all their .log and .txnindex files."""
    by_file = {
        str(path): replica
        for replica in replicas
        for path in sorted(replica.path.glob("*.log")) + sorted(replica.path.glob("*.txnindex"))
    }
    if not by_file:
        return
    yield from parse_dump(run_dump(dist, by_file), by_file)


def run_dump(dist: KafkaDistribution, files: Iterable[str], *options: str) -> str:
    """DumpLogSegments' text for `files`, in one run of the tool."""
    return run_tool(
        dist, dump_tool(dist), [*options, "--files", ",".join(files)], timeout=DUMP_TIMEOUT_S
    )


@functools.cache
def dump_tool(dist: KafkaDistribution) -> str:
    """DumpLogSegments' class in this distribution: where its jars hold it, not what its
    version number suggests (4.0 and 4.1 still have the broker's own)."""
    moved = DUMP_TOOL_MOVED.replace(".", "/") + ".class"
    for jar in sorted(dist.libs.glob("kafka-tools-*.jar")):
        with zipfile.ZipFile(jar) as archive:
            if moved in archive.namelist():
                return DUMP_TOOL_MOVED
    return DUMP_TOOL_CORE


def lines_by_replica(out: str, by_file: dict[str, Replica]) -> Iterator[tuple[Replica, str]]:
    """Each line of DumpLogSegments' text, under the file named by the last "Dumping FILE"
    line; lines of files not in `by_file` are left out."""
    replica = None
    for line in out.splitlines():
        if line.startswith("Dumping "):
            replica = by_file.get(line.removeprefix("Dumping ").strip())
        elif replica is not None:
            yield replica, line


def parse_dump(out: str, by_file: dict[str, Replica]) -> Iterator[tuple[Replica, dict]]:
    """DumpLogSegments' text -> headers: a batch line ("baseOffset: …") or an aborted
    transaction of a .txnindex ("producerId: … firstOffset: … lastOffset: …"), each under
    the file named by the last "Dumping FILE" line."""
    for replica, line in lines_by_replica(out, by_file):
        if line.startswith("|"):
            continue
        fields = dict(_PAIR.findall(line))
        if "baseOffset" in fields:
            yield replica, _batch(fields)
        elif "firstOffset" in fields and "producerId" in fields:
            yield replica, _aborted(fields)


def _batch(fields: dict[str, str]) -> dict:
    return {
        "kind": LOG_BATCH,
        "base_offset": int(fields["baseOffset"]),
        "last_offset": int(fields["lastOffset"]),
        "count": int(fields.get("count", 0)),
        "producer_id": int(fields.get("producerId", -1)),
        "producer_epoch": int(fields.get("producerEpoch", -1)),
        "base_sequence": int(fields.get("baseSequence", -1)),
        "last_sequence": int(fields.get("lastSequence", -1)),
        "transactional": fields.get("isTransactional") == "true",
        "control": fields.get("isControl") == "true",
        "leader_epoch": int(fields.get("partitionLeaderEpoch", -1)),
        "create_time": int(fields.get("CreateTime", 0)),
    }


def _aborted(fields: dict[str, str]) -> dict:
    return {
        "kind": LOG_ABORTED,
        "producer_id": int(fields["producerId"]),
        "first_offset": int(fields["firstOffset"]),
        "last_offset": int(fields["lastOffset"]),
    }


def record_log_batches(
    dist: KafkaDistribution, data_dirs: dict[int, Path], topics: set[str], history: HistoryWriter
) -> int:
    """Every batch header and aborted transaction of `topics` into `history`; how many."""
    recorded = 0
    for replica, header in dump(dist, chosen_replicas(data_dirs, topics)):
        kind = header.pop("kind")
        first = header.pop("base_offset" if kind == LOG_BATCH else "first_offset")
        history.record(
            LOG_BATCH_KIND,
            "ok",
            kind,
            topic=replica.topic,
            partition=replica.partition,
            offset=first,
            count=header.pop("count", None),
            params=json.dumps({**header, "node": replica.node}, sort_keys=True),
        )
        recorded += 1
    return recorded
