"""Names carried through a pass as codes (checkers/codes.py)."""

from __future__ import annotations

from eoschaos.checkers.codes import code_of, name_of


def test_a_name_lookup_with_no_names_finds_none(spark):
    """A history with no downstream reader has no reader names to code."""
    frame = spark.createDataFrame([("any",)], ["process"])
    assert frame.select(code_of("process", {}).alias("code")).first()["code"] is None


def test_a_name_and_its_code_map_both_ways(spark):
    frame = spark.createDataFrame([("b",), ("c",)], ["topic"])
    codes = frame.select(code_of("topic", {"a": 0, "b": 1}).alias("code")).collect()
    assert [row["code"] for row in codes] == [1, None]
    named = frame.select(name_of(code_of("topic", {"b": 0, "c": 1}), ["b", "c"]).alias("name"))
    assert [row["name"] for row in named.collect()] == ["b", "c"]
