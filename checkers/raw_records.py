"""Records shown as they were: each failed example whose record the run kept raw gets it.

A reader keeps a record's key, value and headers (in the read's `params`) when the record names
no source id -- what a phantom is made of (eoschaos.contract.history.raw_record). Here the
examples' places are looked up among those reads: one small Spark job, only when a check failed,
over reads that carry a raw record (at most a few hundred per run).
"""

from __future__ import annotations

import functools
import json
import operator
from typing import Any

from pyspark.sql import functions as F

from eoschaos.checkers.forensics import example_places
from eoschaos.checkers.history_io import History


def attach_raw_records(history: History, checks: dict[str, dict]) -> None:
    """Set `record` on every failed example whose record was kept raw."""
    places = example_places(checks, history.input_topic, history.output_topic)
    if not places:
        return
    at_a_place = functools.reduce(
        operator.or_,
        [
            (F.col("topic") == topic)
            & (F.col("partition") == partition)
            & (F.col("offset") == offset)
            for topic, partition, offset in {(p.topic, p.partition, p.offset) for p in places}
        ],
    )
    rows = (
        history.kind("read")
        .where(F.col("params").isNotNull() & at_a_place)
        .select("topic", "partition", "offset", "params")
        .collect()
    )
    # every reader that kept a place kept the same record: any one of them will do
    raw: dict[tuple[str, int, int], Any] = {
        (row["topic"], row["partition"], row["offset"]): json.loads(row["params"]) for row in rows
    }
    for place in places:
        record = raw.get((place.topic, place.partition, place.offset))
        example = checks[place.check]["examples"][place.example]
        if record is not None and "record" not in example:
            example["record"] = record
