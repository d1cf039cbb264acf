"""Where an output record names its source id (--id-from, docs/byo.md)."""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from eoschaos.workloads.harness.reader import IdSet, IdSource


def record(key: bytes | None = None, value: bytes | None = None, headers=None) -> Message:
    return Message(topic="out", partition=0, offset=0, key=key, value=value, headers=headers)


def test_key_is_the_decimal_id():
    assert IdSource("key").extract(record(key=b"1234")) == 1234


def test_a_key_that_is_not_decimal_names_no_id():
    assert IdSource("key").extract(record(key=b"bucket-3")) is None


def test_header_holds_the_decimal_id():
    headers = [("trace", b"x"), ("source-id", b"77")]
    assert IdSource("header:source-id").extract(record(headers=headers)) == 77


def test_missing_header_names_no_id():
    assert IdSource("header:source-id").extract(record(key=b"5")) is None


def test_json_path_reaches_a_nested_integer():
    value = b'{"source": {"id": 42}, "text": "x"}'
    assert IdSource("json:source.id").extract(record(value=value)) == 42


@pytest.mark.parametrize(
    "value", [b"not json", b'{"source": {}}', b'{"source": {"id": "42"}}', b'{"source": 5}', None]
)
def test_json_path_that_does_not_lead_to_an_integer_names_no_id(value):
    assert IdSource("json:source.id").extract(record(value=value)) is None


@pytest.mark.parametrize("spec", ["body", "header:", "json:", "value:id"])
def test_unknown_id_source_is_refused_with_the_forms_it_takes(spec):
    with pytest.raises(ValueError, match="is not key, header:NAME or json:PATH"):
        IdSource(spec)


def test_id_set_counts_each_id_once_and_ignores_ids_out_of_range():
    seen = IdSet(10)
    for record_id in (3, 3, 9, 10, -1, 0):
        seen.add(record_id)
    assert seen.count == 3


def test_id_set_says_when_an_id_repeats_and_never_for_an_id_it_cannot_hold():
    seen = IdSet(10)
    assert [seen.add(record_id) for record_id in (3, 4, 3, 12, 12)] == [
        True,
        True,
        False,
        True,
        True,
    ]
