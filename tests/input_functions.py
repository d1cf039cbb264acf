"""Input record functions (`--input`) that a run must refuse before anything starts."""

from __future__ import annotations


def raises(record_id: int, seed: int) -> dict:
    raise ValueError("no orders today")


def not_a_record(record_id: int, seed: int) -> str:
    return f"order {record_id}"


def unknown_part(record_id: int, seed: int) -> dict:
    return {"key": str(record_id), "body": "x"}


def id_elsewhere(record_id: int, seed: int) -> dict:
    return {"key": f"order-{record_id}", "value": {"order": record_id}}


def two_records_one_id(record_id: int, seed: int) -> dict:
    return {"value": {"order_id": record_id // 2}}


def bad_header(record_id: int, seed: int) -> dict:
    return {"key": str(record_id), "headers": {"n": record_id}}


def to_another_topic(record_id: int, seed: int) -> dict:
    return {"topic": "payments", "key": str(record_id)}
