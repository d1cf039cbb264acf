"""What an output record carries about where it came from, and how a reader gets it back.

Every output record names its source record, the processor (instance, incarnation), the
transaction (transactional.id, sequence, size, intended fate, the record's place in it) and
the consumer group generation the processor held, as ASCII headers. A reader turns those
headers back into the `read` event fields of docs/history.md, so checkers can follow a
record's lineage without ever talking to Kafka.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from eoschaos.contract.history import (
    HEADER_FATE,
    HEADER_GENERATION,
    HEADER_INCARNATION,
    HEADER_INSTANCE,
    HEADER_SRC_ID,
    HEADER_SRC_OFFSET,
    HEADER_SRC_PARTITION,
    HEADER_SRC_TOPIC,
    HEADER_TXN_ID,
    HEADER_TXN_INDEX,
    HEADER_TXN_SEQ,
    HEADER_TXN_SIZE,
)

# librdkafka serializes its consumer group metadata (rd_kafka_consumer_group_metadata_write)
# as b"CGMDv2:", the generation id as a host-order int32, then group id, member id and group
# instance id. Checked against a live cluster: the generation grows with every rebalance.
_CGMD_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")

# Header -> (read event field, type). eoschaos.src.topic has no field: the input topic is one.
_HEADER_FIELDS: dict[str, tuple[str, type]] = {
    HEADER_SRC_PARTITION: ("src_partition", int),
    HEADER_SRC_OFFSET: ("src_offset", int),
    HEADER_SRC_ID: ("id", int),
    HEADER_INSTANCE: ("instance", int),
    HEADER_INCARNATION: ("incarnation", int),
    HEADER_TXN_ID: ("txn_id", str),
    HEADER_TXN_SEQ: ("txn_seq", int),
    HEADER_TXN_SIZE: ("txn_size", int),
    HEADER_TXN_INDEX: ("txn_index", int),
    HEADER_GENERATION: ("generation", int),
    HEADER_FATE: ("fate", str),
}


def group_generation(metadata: bytes) -> int:
    """The group generation inside confluent-kafka's consumer_group_metadata() bytes."""
    if not metadata.startswith(_CGMD_MAGIC):
        raise ValueError(f"not librdkafka consumer group metadata: {metadata[:16]!r}")
    return _GENERATION.unpack_from(metadata, len(_CGMD_MAGIC))[0]


@dataclass(frozen=True)
class TransactionTag:
    """The part of the lineage shared by every record of one transaction (or batch)."""

    instance: int
    incarnation: int
    generation: int
    fate: str  # commit | abort | none
    txn_id: str | None = None  # absent without transactions (mode alos)
    txn_seq: int | None = None
    txn_size: int | None = None


def transform(value: bytes | None) -> bytes:
    """The processing step of Kafka's example: an output value is its input value + "-ok"."""
    return (value or b"") + b"-ok"


def lineage_headers(
    tag: TransactionTag,
    src_topic: str,
    src_partition: int,
    src_offset: int,
    src_id: int,
    index: int | None = None,
) -> list[tuple[str, bytes]]:
    """`index`: the record's place among its transaction's sends, which the int-* checks
    order by (a transaction's sends to several partitions have no common offset order)."""
    values: dict[str, object | None] = {
        HEADER_SRC_TOPIC: src_topic,
        HEADER_SRC_PARTITION: src_partition,
        HEADER_SRC_OFFSET: src_offset,
        HEADER_SRC_ID: src_id,
        HEADER_INSTANCE: tag.instance,
        HEADER_INCARNATION: tag.incarnation,
        HEADER_TXN_ID: tag.txn_id,
        HEADER_TXN_SEQ: tag.txn_seq,
        HEADER_TXN_SIZE: tag.txn_size,
        HEADER_TXN_INDEX: index,
        HEADER_GENERATION: tag.generation,
        HEADER_FATE: tag.fate,
    }
    return [
        (name, str(value).encode("ascii")) for name, value in values.items() if value is not None
    ]


def lineage_fields(headers: list[tuple[str, bytes]] | None) -> dict[str, Any]:
    """The `read` event fields named by a record's lineage headers (unknown headers ignored)."""
    fields: dict[str, Any] = {}
    for name, raw in headers or ():
        if name in _HEADER_FIELDS and raw is not None:
            field, kind = _HEADER_FIELDS[name]
            fields[field] = kind(raw.decode("ascii"))
    return fields
