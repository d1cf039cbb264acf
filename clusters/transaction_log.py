"""The transaction coordinators' own log: every state a transactional id went through.

KAFKA-17754 (docs/findings.md) was shown by reading `__transaction_state` with Kafka's
DumpLogSegments by hand: a PrepareCommit nobody on the client side asked for, and the producer
epoch the same across hundreds of transactions (protocol version 1). The run does that while
the data dirs exist and records each state record in the history (writer LOG_BATCHES,
f TXN_STATE), so the checker (fencing.stale-commit), a reviewer and a re-check years later
see the coordinator's side of every transaction next to the client's.

Only records written since the run started: a shared cluster's log also holds earlier runs,
often under the same transactional ids. Kafka 3.x prints a state as text, 4.x as JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from eoschaos.clusters.kafka_dist import KafkaDistribution
from eoschaos.clusters.log_dump import (
    Replica,
    lines_by_replica,
    run_dump,
    segments_written_since,
)
from eoschaos.contract.history import (
    LOG_BATCH_KIND,
    TRANSACTION_STATE_TOPIC,
    TXN_STATE,
    HistoryWriter,
)

# Kafka 4.0-4.3 print the state as its id (org.apache.kafka.coordinator.transaction.
# TransactionState), 4.4 and 3.x as its name. Each is recorded by name.
STATE_NAMES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
TOMBSTONES = ("null", "<DELETE>")  # a removed transactional id: 4.x, 3.x
_RECORD = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: (?P<create_time>-?\d+) "
    r".* key: (?P<key>.*?) payload: (?P<payload>.*)$"
)
_LEGACY_KEY = re.compile(r"transaction_metadata::transactionalId=(?P<id>.*)$")
_LEGACY_PAYLOAD = re.compile(
    r"producerId:(?P<producer_id>-?\d+),producerEpoch:(?P<producer_epoch>-?\d+),"
    r"state=(?P<state>\w+),partitions=\[(?P<partitions>[^\]]*)\],"
    r"txnLastUpdateTimestamp=(?P<last_update_ms>-?\d+)"
)


def parse_transaction_log(out: str, by_file: dict[str, Replica]) -> Iterator[tuple[Replica, dict]]:
    """DumpLogSegments --transaction-log-decoder's text -> one state per record: offset,
    create time (ms), transactional id, producer id and epoch, state name, the partitions in
    the transaction ("topic-partition"), last update (ms). Tombstones are skipped; a record in
    a format neither reader knows raises ValueError."""
    for replica, line in lines_by_replica(out, by_file):
        match = _RECORD.match(line)
        if match is None:
            continue
        if match["payload"] in TOMBSTONES:
            continue
        state = _json_state(match["key"], match["payload"]) or _legacy_state(
            match["key"], match["payload"]
        )
        if state is None:
            # a format this reader does not know: said, not skipped, or a run would silently
            # lose the coordinators' side of every transaction
            raise ValueError(
                f"unreadable __transaction_state record at offset {match['offset']}: "
                f"{match['payload'][:120]}"
            )
        yield (
            replica,
            {"offset": int(match["offset"]), "create_time": int(match["create_time"]), **state},
        )


def _json_state(key: str, payload: str) -> dict | None:
    """Kafka 4.x: key {"data": {"transactionalId"}}, payload {"data": {...}} (null: tombstone)."""
    try:
        key_data = json.loads(key)["data"]
        data = json.loads(payload)["data"]
        return {
            "transactional_id": key_data["transactionalId"],
            "producer_id": data["producerId"],
            "producer_epoch": data["producerEpoch"],
            "state": _state_name(data["transactionStatus"]),
            "partitions": [
                f"{entry['topic']}-{partition}"
                for entry in data.get("transactionPartitions") or []
                for partition in entry["partitionIds"]
            ],
            "last_update_ms": data["transactionLastUpdateTimestampMs"],
        }
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def _state_name(status: int | str) -> str:
    if isinstance(status, str):
        if status not in STATE_NAMES:
            raise ValueError(f"unknown transaction state {status!r}")
        return status
    return STATE_NAMES[status]


def _legacy_state(key: str, payload: str) -> dict | None:
    """Kafka 3.x: `transaction_metadata::transactionalId=ID` and `producerId:…,state=…`."""
    key_match = _LEGACY_KEY.match(key)
    value = _LEGACY_PAYLOAD.match(payload)
    if key_match is None or value is None:
        return None
    return {
        "transactional_id": key_match["id"],
        "producer_id": int(value["producer_id"]),
        "producer_epoch": int(value["producer_epoch"]),
        "state": value["state"],
        "partitions": [p for p in value["partitions"].split(",") if p],
        "last_update_ms": int(value["last_update_ms"]),
    }


def record_transaction_log(
    dist: KafkaDistribution, data_dirs: dict[int, Path], since: float, history: HistoryWriter
) -> int:
    """Every state record written to `__transaction_state` since `since` (seconds, wall
    clock) into `history`, at its create time; how many."""
    by_file = segments_written_since(data_dirs, TRANSACTION_STATE_TOPIC, since)
    if not by_file:
        return 0
    out = run_dump(dist, by_file, "--transaction-log-decoder")
    recorded = 0
    for replica, state in parse_transaction_log(out, by_file):
        if state["create_time"] < since * 1000:
            continue
        history.record(
            LOG_BATCH_KIND,
            "ok",
            TXN_STATE,
            time=state["create_time"] / 1000,
            topic=replica.topic,
            partition=replica.partition,
            offset=state["offset"],
            txn_id=state["transactional_id"],
            params=json.dumps(
                {
                    "producer_id": state["producer_id"],
                    "producer_epoch": state["producer_epoch"],
                    "state": state["state"],
                    "partitions": state["partitions"],
                    "last_update_ms": state["last_update_ms"],
                    "node": replica.node,
                },
                sort_keys=True,
            ),
        )
        recorded += 1
    return recorded
