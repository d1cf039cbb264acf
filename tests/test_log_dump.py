"""Reading DumpLogSegments' output: batch headers and aborted transactions, nothing per record."""

from __future__ import annotations

import zipfile
from pathlib import Path

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.clusters.log_dump import (
    DUMP_TOOL_CORE,
    DUMP_TOOL_MOVED,
    Replica,
    chosen_replicas,
    dump_tool,
    parse_dump,
)

# As Kafka 4.3.1's DumpLogSegments prints a transactional segment and its .txnindex (shortened
# record lines; the tool prints one per record with --deep-iteration).
DUMP = """Dumping /d/output-topic-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 14 count: 15 baseSequence: 0 lastSequence: 14 producerId: 1 \
producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false \
deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795535261971 size: 4107 magic: 2 \
compresscodec: none crc: 1310741587 isvalid: true
| offset: 0 CreateTime: 1795535261971 keySize: 2 valueSize: 11 sequence: 0 headerKeys: [] key: 57
baseOffset: 15 lastOffset: 15 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1 \
producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true \
deleteHorizonMs: OptionalLong.empty position: 4107 CreateTime: 1795535263160 size: 78 magic: 2 \
compresscodec: none crc: 1472640645 isvalid: true
Dumping /d/output-topic-0/00000000000000000000.txnindex
version: 0 producerId: 1 firstOffset: 16 lastOffset: 47 lastStableOffset: 48
Dumping /elsewhere/not-asked-for.log
baseOffset: 0 lastOffset: 0 count: 1 producerId: 9
"""
REPLICA = Replica("output-topic", 0, 2, Path("/d/output-topic-0"))
FILES = {
    "/d/output-topic-0/00000000000000000000.log": REPLICA,
    "/d/output-topic-0/00000000000000000000.txnindex": REPLICA,
}


def test_each_batch_header_and_aborted_transaction_is_read_and_records_are_skipped():
    headers = [header for _, header in parse_dump(DUMP, FILES)]
    assert [h["kind"] for h in headers] == ["batch", "batch", "aborted"]
    assert headers[0] == {
        "kind": "batch",
        "base_offset": 0,
        "last_offset": 14,
        "count": 15,
        "producer_id": 1,
        "producer_epoch": 0,
        "base_sequence": 0,
        "last_sequence": 14,
        "transactional": True,
        "control": False,
        "leader_epoch": 0,
        "create_time": 1795535261971,
    }
    assert headers[1]["control"] is True
    assert headers[2] == {
        "kind": "aborted",
        "producer_id": 1,
        "first_offset": 16,
        "last_offset": 47,
    }


def test_headers_are_attributed_to_the_replica_of_their_file_only():
    assert {replica for replica, _ in parse_dump(DUMP, FILES)} == {REPLICA}


def test_the_replica_with_the_most_log_bytes_is_chosen_per_partition(tmp_path):
    for node, size in ((1, 10), (2, 30), (3, 20)):
        partition = tmp_path / str(node) / "output-topic-0"
        partition.mkdir(parents=True)
        (partition / "00000000000000000000.log").write_bytes(bytes(size))
        (tmp_path / str(node) / "other-topic-0").mkdir()
    data_dirs = {node: tmp_path / str(node) for node in (1, 2, 3)}
    assert chosen_replicas(data_dirs, {"output-topic"}) == [
        Replica("output-topic", 0, 2, tmp_path / "2" / "output-topic-0")
    ]


def _distribution(root: Path, version: str, *classes: str) -> KafkaDistribution:
    libs = root / version / "libs"
    libs.mkdir(parents=True)
    with zipfile.ZipFile(libs / f"kafka-tools-{version}.jar", "w") as jar:
        for name in ("org/apache/kafka/tools/ConsoleProducer.class", *classes):
            jar.writestr(name, b"")
    return KafkaDistribution(version=version, libs=libs)


def test_dump_log_segments_is_run_from_where_the_distributions_jars_hold_it(tmp_path):
    """Kafka 4.0 and 4.1 keep the broker's own tool; later ones have it in kafka-tools."""
    moved = "org/apache/kafka/tools/DumpLogSegments.class"
    assert dump_tool(_distribution(tmp_path, "4.1.0")) == DUMP_TOOL_CORE
    assert dump_tool(_distribution(tmp_path, "4.3.1", moved)) == DUMP_TOOL_MOVED
