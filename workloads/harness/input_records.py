"""The input record of each id: the seeder's own, or the user's (`--input`).

The seeder's own record is key = the id as ASCII decimal, value `value-<id>`. A real pipeline
parses records of its own (JSON orders, a payment with an account and an amount), and judging
an adapter that turns ours into those would judge the adapter. So `--input MODULE:FUNCTION` (or
`FILE.py:FUNCTION`) names the user's: called as FUNCTION(id, seed) for each id, it returns a
mapping of `topic`, `key`, `value` and `headers` (each optional; the topic one of the run's
input topics, by default id mod their number; text is sent as UTF-8, a dict or list value as
JSON, headers as a mapping or a list of pairs). The id must be where the input's
IdSource (`--input-id-from`) finds it: the final scans name each input record by it, and
everything downstream is what it is for our own input.

A function that raises, returns another shape, or puts an id where it cannot be found (or two
records under one id) is refused before anything starts, tried on the first CHECKED_IDS ids
and the last.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eoschaos.contract.errors import EoschaosError
from eoschaos.workloads.harness.reader import IdSource
from eoschaos.workloads.harness.user_function import load_function

CHECKED_IDS = 1000
RECORD_PARTS = ("topic", "key", "value", "headers")


@dataclass(frozen=True)
class SeedRecord:
    """What the seeder sends for one id (its partition is the seeder's; so is its topic,
    where the record names none)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    topic: str | None = None


RecordFunction = Callable[[int], SeedRecord]


def seeded(record_id: int) -> SeedRecord:
    """The seeder's own record of an id."""
    return SeedRecord(str(record_id).encode(), f"value-{record_id}".encode())


def load_input(spec: str, seed: int) -> RecordFunction:
    """The user's record function `spec`, bound to the run's seed, its answers shaped into
    SeedRecords (EoschaosError, naming --input and the id, for one that is not a record)."""
    function = load_function("--input", spec, "orders.py:order")

    def record_of(record_id: int) -> SeedRecord:
        return _shaped(spec, record_id, function(record_id, seed))

    return record_of


def check_input(
    spec: str, record_of: RecordFunction, ids: IdSource, records: int, topics: tuple[str, ...]
) -> None:
    """Refuse (EoschaosError, one line) a record function that raises, answers other than a
    record, names a topic that is not one of the input `topics`, or puts an id where `ids`
    does not find it, on the first CHECKED_IDS ids and the last: a run would judge the wrong
    ids, or stop midway."""
    for record_id in sorted({*range(min(records, CHECKED_IDS)), max(records - 1, 0)}):
        try:
            record = record_of(record_id)
        except EoschaosError:
            raise
        except Exception as exc:  # the user's code: whatever it raised, in one line
            raise EoschaosError(
                f"--input {spec!r} raised {type(exc).__name__}: {exc} for id {record_id}"
            ) from None
        if record.topic is not None and record.topic not in topics:
            raise EoschaosError(
                f"--input {spec!r} sends id {record_id} to topic {record.topic!r}, which is not "
                f"an input topic; return one of {', '.join(topics)}, or add it to --input-topics"
            )
        found = ids.find(record.key, record.value, list(record.headers))
        if found != record_id:
            where = "no id" if found is None else f"id {found}"
            raise EoschaosError(
                f"--input {spec!r}: {ids.option} {ids.spec} finds {where} in the record of id "
                f"{record_id}; put the id there, or say where it is with --input-id-from"
            )


def _shaped(spec: str, record_id: int, returned: Any) -> SeedRecord:
    if not isinstance(returned, Mapping) or not set(returned) <= set(RECORD_PARTS):
        raise EoschaosError(
            f"--input {spec!r} returned {_shown(returned)} for id {record_id}; return a dict "
            "of key, value and headers (each optional), e.g. {'key': 'order-7', 'value': "
            "{'order_id': 7}}"
        )
    try:
        return SeedRecord(
            _bytes(returned.get("key")),
            _bytes(returned.get("value")),
            _headers(returned.get("headers")),
            _topic(returned.get("topic")),
        )
    except TypeError as exc:
        raise EoschaosError(f"--input {spec!r}, id {record_id}: {exc}") from None


def _bytes(part: Any) -> bytes | None:
    if part is None or isinstance(part, bytes):
        return part
    if isinstance(part, str):
        return part.encode()
    if isinstance(part, dict | list):
        return json.dumps(part, separators=(",", ":")).encode()
    raise TypeError(f"a key or value is text, bytes, a dict or a list, not {_shown(part)}")


def _topic(topic: Any) -> str | None:
    if topic is None or isinstance(topic, str):
        return topic
    raise TypeError(f"a topic is text, not {_shown(topic)}")


def _headers(headers: Any) -> tuple[tuple[str, bytes], ...]:
    pairs = list(headers.items()) if isinstance(headers, Mapping) else headers or []
    if not isinstance(pairs, list | tuple) or not all(
        isinstance(pair, list | tuple) and len(pair) == 2 for pair in pairs
    ):
        raise TypeError(
            f"headers are a dict or a list of (name, value) pairs, not {_shown(headers)}"
        )
    shaped = []
    for name, value in pairs:
        if not isinstance(name, str) or not isinstance(value, str | bytes):
            header = _shown((name, value))
            raise TypeError(f"a header is a name (text) and a value (text or bytes), not {header}")
        shaped.append((name, value.encode() if isinstance(value, str) else value))
    return tuple(shaped)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
