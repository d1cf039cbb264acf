"""Reading the coordinators' `__transaction_state` as DumpLogSegments prints it: one state per
record, whether Kafka 4.x wrote it (JSON) or 3.x (text). Both against real brokers:
tests/test_nemesis.py (the stale commit, on every Kafka version) and tests/test_scenarios.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from eoschaos.clusters.kafka_dist import resolve
from eoschaos.clusters.log_dump import Replica
from eoschaos.clusters.transaction_log import parse_transaction_log, record_transaction_log
from eoschaos.contract.history import LOG_BATCHES, HistoryWriter

PREFIX = "keySize: 12 valueSize: 109 sequence: -1 headerKeys: []"
# As Kafka 4.3.1 prints an Ongoing transaction with output and offsets partitions (one line
# per record; the batch lines between them are skipped).
DUMP_4X = f"""Dumping /d/__transaction_state-2/00000000000000000000.log
Log starting offset: 0
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 \
producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
| offset: 2 CreateTime: 1795635840316 {PREFIX} key: {{"type":"0","data":{{"transactionalId":\
"kip447-0"}}}} payload: {{"version":"1","data":{{"producerId":2000,"previousProducerId":2000,\
"producerEpoch":0,"transactionTimeoutMs":20000,"transactionStatus":1,"transactionPartitions":\
[{{"topic":"output-topic","partitionIds":[3,4]}},{{"topic":"__consumer_offsets","partitionIds"\
:[1]}}],"transactionLastUpdateTimestampMs":1795635840316,"transactionStartTimestampMs":\
1795635840087}}}}
| offset: 3 CreateTime: 1795635840400 {PREFIX} key: {{"type":"0","data":{{"transactionalId":\
"kip447-0"}}}} payload: {{"version":"1","data":{{"producerId":2000,"previousProducerId":2000,\
"producerEpoch":0,"transactionTimeoutMs":20000,"transactionStatus":4,"transactionPartitions":\
[],"transactionLastUpdateTimestampMs":1795635840399,"transactionStartTimestampMs":\
1795635840087}}}}
| offset: 4 CreateTime: 1795635840500 {PREFIX} key: {{"type":"0","data":{{"transactionalId":\
"gone"}}}} payload: null
"""
# As Kafka 3.9's TransactionLog formats the same states, and a tombstone.
DUMP_3X = f"""Dumping /d/__transaction_state-2/00000000000000000000.log
| offset: 2 CreateTime: 1795635840316 {PREFIX} key: \
transaction_metadata::transactionalId=kip447-0 payload: producerId:2000,producerEpoch:0,\
state=Ongoing,partitions=[output-topic-3,output-topic-4,__consumer_offsets-1],\
txnLastUpdateTimestamp=1795635840316,txnTimeoutMs=20000
| offset: 3 CreateTime: 1795635840400 {PREFIX} key: \
transaction_metadata::transactionalId=kip447-0 payload: producerId:2000,producerEpoch:0,\
state=CompleteCommit,partitions=[],txnLastUpdateTimestamp=1795635840399,txnTimeoutMs=20000
| offset: 4 CreateTime: 1795635840500 {PREFIX} key: \
transaction_metadata::transactionalId=gone payload: <DELETE>
"""
REPLICA = Replica("__transaction_state", 2, 3, Path("/d/__transaction_state-2"))
FILES = {"/d/__transaction_state-2/00000000000000000000.log": REPLICA}
ONGOING = {
    "offset": 2,
    "create_time": 1795635840316,
    "transactional_id": "kip447-0",
    "producer_id": 2000,
    "producer_epoch": 0,
    "state": "Ongoing",
    "partitions": ["output-topic-3", "output-topic-4", "__consumer_offsets-1"],
    "last_update_ms": 1795635840316,
}


def test_a_kafka_4_state_is_read_from_its_json_with_the_state_named():
    states = [state for _, state in parse_transaction_log(DUMP_4X, FILES)]
    assert states[0] == ONGOING
    assert (states[1]["state"], states[1]["partitions"]) == ("CompleteCommit", [])


def test_a_kafka_3_state_is_read_from_its_text_the_same_way():
    states = [state for _, state in parse_transaction_log(DUMP_3X, FILES)]
    assert states[0] == ONGOING
    assert (states[1]["state"], states[1]["partitions"]) == ("CompleteCommit", [])


def test_a_kafka_4_4_state_printed_by_name_is_read_the_same_way():
    dump = DUMP_4X.replace('"transactionStatus":1', '"transactionStatus":"Ongoing"')
    states = [state for _, state in parse_transaction_log(dump, FILES)]
    assert states[0] == ONGOING


def test_a_record_neither_reader_knows_is_an_error_not_a_silent_skip():
    dump = DUMP_4X.replace('"transactionStatus":1', '"transactionStatus":"Frozen"')
    with pytest.raises(ValueError, match="unreadable __transaction_state record at offset 2"):
        list(parse_transaction_log(dump, FILES))


def test_tombstones_and_batch_lines_are_skipped():
    for dump in (DUMP_4X, DUMP_3X):
        assert [state["offset"] for _, state in parse_transaction_log(dump, FILES)] == [2, 3]


def test_states_are_attributed_to_the_replica_of_their_file_only():
    assert {replica for replica, _ in parse_transaction_log(DUMP_4X, FILES)} == {REPLICA}
    assert list(parse_transaction_log(DUMP_4X, {})) == []


def test_segments_untouched_since_the_run_started_are_not_read(tmp_path):
    """A shared cluster's log holds every earlier run: only what was written since is read."""
    segment = tmp_path / "1" / "__transaction_state-0" / "00000000000000000000.log"
    segment.mkdir(parents=True)  # Kafka's tool fails on it: reading it would fail the test
    os.utime(segment, (1_000_000_000, 1_000_000_000))
    with HistoryWriter(tmp_path / "run", LOG_BATCHES) as history:
        assert record_transaction_log(resolve(), {1: tmp_path / "1"}, time.time(), history) == 0
