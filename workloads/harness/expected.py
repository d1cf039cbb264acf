"""An aggregating pipeline judged by its user's own expected-output function (`--expect`).

A pipeline that aggregates (counts per user, totals per account) writes results, not copies of
its input, so no output record names one source id. What exactly-once means for it is that its
final results equal those of its input processed once. The user says what those are: a Python
function from the committed input records (of every input topic: a join's sides are told apart
by each record's topic) to the expected final value per output key. After the run the harness
calls it on the committed input and reads the last committed value of every key of the output
topic, and records both as `end` rows (writer `end-expected`): f=`expected` and
f=`result`, params {"key", "value"}. The checker only compares rows; it never runs user code,
so an old run directory is re-checked against the expectations recorded at the time.

Values are compared as canonical text: JSON (what the record holds, or what the function
returned, if it is JSON) with sorted keys and no spaces, else the UTF-8 text as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eoschaos.contract.history import END_EXPECTED, HistoryWriter
from eoschaos.workloads.harness.final import committed_records, last_values
from eoschaos.workloads.harness.reader import IdSource
from eoschaos.workloads.harness.user_function import load_function


@dataclass(frozen=True)
class InputRecord:
    """One committed input record as the seeder wrote it (docs/byo.md), with its id."""

    id: int
    partition: int
    key: bytes
    value: bytes
    topic: str


ExpectFunction = Callable[[Iterator[InputRecord]], Mapping[Any, Any]]


def load_expect(spec: str) -> ExpectFunction:
    """`MODULE:FUNCTION` (importable from the working directory) or `FILE.py:FUNCTION`."""
    return load_function("--expect", spec, "my_expectations.py:counts_per_key")


def canonical(value: Any) -> str:
    """The text two values are compared by: canonical JSON where it is JSON, else the text."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _input_records(
    bootstrap: str, topics: tuple[str, ...], ids: IdSource, timeout: float
) -> Iterator[InputRecord]:
    for topic in topics:
        for message in committed_records(bootstrap, topic, timeout):
            record_id = ids.extract(message)
            if record_id is not None:  # every seeded record; anything else is not ours
                key, value = message.key() or b"", message.value() or b""
                yield InputRecord(record_id, message.partition(), key, value, topic)


def record_expected(
    bootstrap: str,
    run_dir: Path,
    function: ExpectFunction,
    input_topics: tuple[str, ...],
    input_ids: IdSource,
    output_topic: str,
    timeout: float,
) -> tuple[int, int]:
    """Call `function` on the committed input (each record's id where `input_ids` finds it),
    read the output's last values; record both. Returns (expected keys, result keys)."""
    records = _input_records(bootstrap, input_topics, input_ids, timeout)
    expected = {str(key): canonical(value) for key, value in function(records).items()}
    results = last_values(bootstrap, output_topic, timeout)
    with HistoryWriter(run_dir, END_EXPECTED) as history:
        for key, value in sorted(expected.items()):
            params = json.dumps({"key": key, "value": value}, sort_keys=True)
            history.record("end", "ok", "expected", topic=input_topics[0], params=params)
        for key, message in sorted(results.items()):
            params = json.dumps({"key": key, "value": canonical(message.value() or b"")})
            history.record(
                "end",
                "ok",
                "result",
                topic=output_topic,
                partition=message.partition(),
                offset=message.offset(),
                params=params,
            )
    return len(expected), len(results)
