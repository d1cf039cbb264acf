"""Broker-log forensics: the batches that hold each anomaly example's records, and what they say.

The run records every batch header of its topics as the brokers wrote them (writer
LOG_BATCHES: producer id, epoch, base sequence, transactional and control flags, and the
aborted transactions of each segment's index). Here each reported example's records are
placed in their batches -- one small Spark job, only when a check failed -- and where the
headers show a known pattern it is stated in words: two producers wrote the copies (outside
any transaction, or with nothing fencing the older), one producer's epoch was bumped between
them, one producer wrote it to two topics, a record was sent again under a new sequence, or
its transaction was aborted. A history without batch
headers (an older run, a container run whose logs could not be read) says so instead; the
checker never reads a broker's log itself.
"""

from __future__ import annotations

import functools
import json
import operator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import CATALOGUE, CheckResult
from eoschaos.contract.history import (
    LOG_ABORTED,
    LOG_BATCH,
    LOG_BATCH_KIND,
    OFFSET_COMMIT,
    TXN_STATE,
)

MAX_PLACES = 40  # examples are few (max_examples per check); this bounds the job's filter
NO_PRODUCER_ID = -1  # a batch of a producer without idempotence


@dataclass(frozen=True)
class Place:
    check: str
    example: int
    id: Any
    topic: str
    partition: int
    offset: int


def example_places(
    checks: dict[str, CheckResult], input_topic: str, output_topic: str
) -> list[Place]:
    """The topic/partition/offset of every record a failed check's examples point at."""
    places: list[Place] = []
    for name, check in checks.items():
        if not check.failed:
            continue
        on_input = name in CATALOGUE and CATALOGUE[name].examples_on_input
        topic = input_topic if on_input else output_topic
        for index, example in enumerate(check.examples):
            spots = [example] + [example.get(key) for key in ("first", "last")]
            for spot in spots:
                if isinstance(spot, dict) and _is_place(spot):
                    # an example on one of several topics of its role names it
                    where = spot.get("topic") or example.get("topic") or topic
                    place = Place(
                        name, index, example.get("id"), where, spot["partition"], spot["offset"]
                    )
                    places.append(place)
    return places[:MAX_PLACES]


def _is_place(spot: dict) -> bool:
    return all(isinstance(spot.get(key), int) for key in ("partition", "offset"))


def forensics_section(history: History, checks: dict[str, CheckResult]) -> dict[str, Any]:
    """Per failed example: its records' batches and the pattern they show, if one is known."""
    places = example_places(checks, history.input_topic, history.output_topic)
    if not places:
        return {"recorded": None, "examples": []}
    # the partitions' batches and aborted ranges, not the coordinators' records
    log = history.kind(LOG_BATCH_KIND).filter(~F.col("f").isin(TXN_STATE, OFFSET_COMMIT))
    last = F.get_json_object("params", "$.last_offset").cast("long")
    holds = functools.reduce(
        operator.or_,
        [
            (F.col("topic") == topic)
            & (F.col("partition") == partition)
            & (F.col("offset") <= offset)
            & (last >= offset)
            for topic, partition, offset in {(p.topic, p.partition, p.offset) for p in places}
        ],
    )
    rows = log.where(holds).select("f", "topic", "partition", "offset", "count", "params")
    found = [row.asDict() for row in rows.collect()]
    if not found and log.isEmpty():
        return {"recorded": False, "examples": []}
    examples: dict[tuple[str, int], dict[str, Any]] = {}
    for place in places:
        entry = examples.setdefault(
            (place.check, place.example),
            {"check": place.check, "example": place.example, "id": place.id, "places": []},
        )
        entry["places"].append(_located(place, found))
    for entry in examples.values():
        entry["pattern"] = pattern(entry["check"], entry["places"])
    return {"recorded": True, "examples": list(examples.values())}


def _located(place: Place, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The place with the data batch holding it and, if any, the aborted transaction of the
    same producer whose range covers it."""
    here = [
        {**json.loads(row["params"] or "{}"), "f": row["f"], "first": row["offset"]}
        | {"count": row["count"]}
        for row in rows
        if (row["topic"], row["partition"]) == (place.topic, place.partition)
    ]
    here = [b for b in here if b["first"] <= place.offset <= b.get("last_offset", -1)]
    batch = next((b for b in here if b["f"] == LOG_BATCH and not b.get("control")), None)
    aborted = None
    if batch is not None:
        aborted = next(
            (
                b
                for b in here
                if b["f"] == LOG_ABORTED and b.get("producer_id") == batch.get("producer_id")
            ),
            None,
        )
    return {
        "topic": place.topic,
        "partition": place.partition,
        "offset": place.offset,
        "batch": _batch_view(batch),
        "aborted_by_marker_at": aborted["last_offset"] if aborted else None,
    }


def _batch_view(batch: dict[str, Any] | None) -> dict[str, Any] | None:
    if batch is None:
        return None
    keys = (
        "first",
        "last_offset",
        "count",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "transactional",
        "leader_epoch",
        "node",
    )
    return {key: batch.get(key) for key in keys}


def pattern(check: str, places: list[dict[str, Any]]) -> str | None:
    """A known pattern in the batch headers of one example's records, in words; None if the
    headers show none (they are still listed)."""
    batches = [p["batch"] for p in places if p["batch"]]
    aborted = [p for p in places if p["aborted_by_marker_at"] is not None]
    if aborted and check.startswith("isolation."):
        p = aborted[0]
        return (
            f"the record at offset {p['offset']} is in a transaction of producer "
            f"{p['batch']['producer_id']} that was aborted (ABORT marker at offset "
            f"{p['aborted_by_marker_at']}): a read_committed reader must never return it"
        )
    if len(batches) < 2:
        return None
    producers = sorted({b["producer_id"] for b in batches})
    if producers == [NO_PRODUCER_ID]:
        return (
            "a producer without idempotence (producer id -1) appended the copies: a send it "
            "retried was appended again, and the broker has no sequence to recognise it by"
        )
    if len(producers) > 1 and all(b.get("transactional") is False for b in batches):
        return (
            f"the copies were appended by different producers ({_listed(producers)}), neither "
            "in a transaction: what wrote them sends outside the pipeline's transactions, so "
            "a record processed again (after a crash or a rebalance) is sent again, and no "
            "abort or fencing can take the first copy back"
        )
    if len(producers) > 1:
        return (
            f"the copies were appended by different producers ({_listed(producers)}): the "
            "record was processed or sent twice by two writers (two instances, or an instance "
            "and its restart), and nothing fenced the older one"
        )
    epochs = sorted({b["producer_epoch"] for b in batches})
    if len(epochs) > 1:
        return (
            f"one producer ({producers[0]}) appended both copies, under epochs "
            f"{_listed(epochs)}: its epoch was bumped while a batch holding the "
            "record was possibly written, and the record was appended again after the bump"
        )
    topics = {p.get("topic") for p in places if p["batch"]}
    if len(topics) > 1:
        return (
            f"one producer ({producers[0]}, epoch {epochs[0]}) appended the copies to "
            f"{', '.join(sorted(map(str, topics)))}: the pipeline wrote the record to each "
            "of them from one processing of it (routed it twice, e.g. to a dead-letter topic "
            "and on)"
        )
    sequences = sorted({b["base_sequence"] for b in batches})
    if len(sequences) > 1:
        return (
            f"one producer ({producers[0]}, epoch {epochs[0]}) appended both copies under "
            f"different sequence numbers ({_listed(sequences)}): the client sent "
            "the record again as a new record, so the broker could not recognise a retry"
        )
    return None


def _listed(values: list[int]) -> str:
    return ", ".join(map(str, values))
