"""Records shown as they were: each failed example whose record the run kept raw gets it.

A reader keeps a record's key, value and headers (in the read's `params`) when the record names
no source id -- what a phantom is made of -- or an id it already read in that topic -- a
duplicate's later copy (eoschaos.contract.history.raw_record). Here the examples' places are
looked up among those reads: one small Spark job, only when a check failed, over reads that
carry a raw record (at most a few hundred per reader)."""

from __future__ import annotations

import functools
import json
import operator
from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.forensics import example_places
from eoschaos.checkers.history_io import History
from eoschaos.contract.checks import DUPLICATE, DUPLICATE_INPUT, CheckResult


def attach_raw_records(history: History, checks: dict[str, CheckResult]) -> None:
    """Set `record` on every failed example whose record was kept raw: at the example's place,
    or for a duplicate, any kept copy of its id (a third copy is at neither place it names)."""
    places = example_places(checks, history.input_topic, history.output_topic)
    copies = _duplicated_ids(checks, history.input_topic, history.output_topic)
    if not places and not copies:
        return
    wanted = [
        (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") == offset)
        for topic, partition, offset in {(p.topic, p.partition, p.offset) for p in places}
    ] + [(F.col("topic") == topic) & (F.col("id") == id_) for _check, _index, topic, id_ in copies]
    rows = (
        history.kind("read")
        .where(F.col("params").isNotNull() & functools.reduce(operator.or_, wanted))
        .select("topic", "partition", "offset", "id", "params")
        .collect()
    )
    # every reader that kept a place kept the same record: any one of them will do
    at_place: dict[tuple[str, int, int], Any] = {}
    of_id: dict[tuple[str, int], Any] = {}
    for row in rows:
        record = json.loads(row["params"])
        at_place[(row["topic"], row["partition"], row["offset"])] = record
        if row["id"] is not None:
            of_id.setdefault((row["topic"], row["id"]), record)
    found = [(p.check, p.example, at_place.get((p.topic, p.partition, p.offset))) for p in places]
    found += [(check, index, of_id.get((topic, id_))) for check, index, topic, id_ in copies]
    for check, index, record in found:
        example = checks[check].examples[index]
        if record is not None and "record" not in example:
            example["record"] = record


def _duplicated_ids(
    checks: dict[str, CheckResult], input_topic: str, output_topic: str
) -> list[tuple[str, int, str, int]]:
    """(check, example index, topic, id) of the failed duplicate checks' examples."""
    topics = {DUPLICATE.name: output_topic, DUPLICATE_INPUT.name: input_topic}
    return [
        (name, index, _first_topic(example) or topic, example["id"])
        for name, topic in topics.items()
        if name in checks and checks[name].failed
        for index, example in enumerate(checks[name].examples)
        if isinstance(example.get("id"), int)
    ]


def _first_topic(example: dict[str, Any]) -> str | None:
    """The topic of a duplicate's first copy, where its role has several topics."""
    first = example.get("first")
    return first.get("topic") if isinstance(first, dict) else None
