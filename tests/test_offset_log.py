"""Reading the group coordinators' `__consumer_offsets` as DumpLogSegments prints it: one row
per offset commit, a transactional one with the marker its producer wrote next in the same
partition. Against real brokers: tests/test_scenarios.py (every run records them)."""

from __future__ import annotations

from pathlib import Path

from eoschaos.clusters.log_dump import Replica
from eoschaos.clusters.offset_log import OffsetCommit, parse_offset_log

PREFIX = "keySize: 49 valueSize: 36 sequence: 0 headerKeys: []"


def batch(offset: int, producer_id: int, epoch: int, transactional: bool, control: bool) -> str:
    return (
        f"baseOffset: {offset} lastOffset: {offset} count: 1 baseSequence: 0 lastSequence: 0 "
        f"producerId: {producer_id} producerEpoch: {epoch} partitionLeaderEpoch: 0 "
        f"isTransactional: {str(transactional).lower()} isControl: {str(control).lower()} "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 1 magic: 2"
    )


def commit(offset: int, topic: str, partition: int, committed: int, group: str = "g") -> str:
    key = f'{{"type":"1","data":{{"group":"{group}","topic":"{topic}","partition":{partition}}}}}'
    value = f'{{"version":"4","data":{{"offset":{committed},"leaderEpoch":0,"metadata":"",'
    value += '"commitTimestamp":1000}}'
    return f"| offset: {offset} CreateTime: {100 + offset} {PREFIX} key: {key} payload: {value}"


def marker(offset: int, kind: str) -> str:
    return (
        f"| offset: {offset} CreateTime: {100 + offset} keySize: 4 valueSize: 6 sequence: -1 "
        f"headerKeys: [] endTxnMarker: {kind} coordinatorEpoch: 0"
    )


# As Kafka 4.3.1 prints them: group metadata, a plain commit, producer 2000's commit resolved
# by COMMIT (its marker's epoch bumped: transaction version 2), producer 2001's by ABORT,
# producer 2002's left open, and a tombstone.
GROUP_METADATA = (
    "| offset: 0 CreateTime: 100 keySize: 29 valueSize: 24 sequence: 0 headerKeys: [] key: "
    '{"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"",'
    '"generation":0,"protocol":null,"leader":null,"currentStateTimestamp":1,"members":[]}}'
)
DUMP = "\n".join(
    [
        "Dumping /d/__consumer_offsets-5/00000000000000000000.log",
        "Log starting offset: 0",
        batch(0, -1, -1, False, False),
        GROUP_METADATA,
        batch(1, -1, -1, False, False),
        commit(1, "in", 0, 7),
        batch(2, 2000, 0, True, False),
        commit(2, "in", 3, 99),
        batch(3, 2001, 4, True, False),
        commit(3, "in", 1, 21),
        batch(4, 2000, 1, True, True),
        marker(4, "COMMIT"),
        batch(5, 2001, 4, True, True),
        marker(5, "ABORT"),
        batch(6, 2002, 0, True, False),
        commit(6, "in", 2, 50),
        batch(7, -1, -1, False, False),
        f"| offset: 7 CreateTime: 107 {PREFIX} key: "
        '{"type":"1","data":{"group":"g","topic":"in","partition":4}} payload: null',
    ]
)
REPLICA = Replica("__consumer_offsets", 5, 2, Path("/d/__consumer_offsets-5"))
FILES = {"/d/__consumer_offsets-5/00000000000000000000.log": REPLICA}


def by_partition() -> dict[int, OffsetCommit]:
    return {c.partition: c for c in parse_offset_log(DUMP, FILES)}


def test_every_offset_commit_is_read_and_nothing_else():
    assert sorted(by_partition()) == [0, 1, 2, 3]  # not the group metadata, not the tombstone


def test_a_plain_commit_has_no_producer_and_no_marker():
    plain = by_partition()[0]
    assert (plain.group, plain.topic, plain.offset) == ("g", "in", 7)
    assert (plain.transactional, plain.producer_id, plain.marker) == (False, -1, None)
    assert (plain.log_partition, plain.log_offset, plain.node) == (5, 1, 2)


def test_a_transactional_commit_is_resolved_by_its_producer_s_next_marker():
    committed, aborted = by_partition()[3], by_partition()[1]
    assert (committed.producer_id, committed.producer_epoch, committed.offset) == (2000, 0, 99)
    assert (committed.marker, committed.marker_offset, committed.marker_time) == (
        "COMMIT",
        4,
        104,
    )
    assert (aborted.producer_id, aborted.marker, aborted.marker_offset) == (2001, "ABORT", 5)


def test_a_transactional_commit_with_no_marker_is_open():
    assert by_partition()[2].transactional
    assert by_partition()[2].marker is None
