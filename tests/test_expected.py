"""--expect: how the user's expected-output function is found and how values are compared."""

from __future__ import annotations

import pytest

from eoschaos.contract.errors import EoschaosError
from eoschaos.workloads.byo_examples import counts_per_partition
from eoschaos.workloads.harness.expected import InputRecord, canonical, load_expect


def test_a_module_function_is_loaded():
    assert (
        load_expect("eoschaos.workloads.byo_examples:counts_per_partition") is counts_per_partition
    )


def test_a_file_function_is_loaded(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("def totals(records):\n    return {'all': sum(r.id for r in records)}\n")
    totals = load_expect(f"{path}:totals")
    assert totals([InputRecord(2, 0, b"2", b"", "in"), InputRecord(3, 1, b"3", b"", "in")]) == {
        "all": 5
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "is not MODULE:FUNCTION"),
        ("no_such_module_here:f", "cannot load no_such_module_here: ModuleNotFoundError"),
        ("/nowhere/mine.py:f", "cannot load /nowhere/mine.py"),
        ("eoschaos.workloads.byo_examples:no_such_function", "has no function 'no_such_function'"),
    ],
)
def test_an_expect_that_cannot_be_loaded_is_bad_input(spec, message):
    with pytest.raises(EoschaosError, match=message):
        load_expect(spec)


def test_json_values_compare_whatever_their_spacing_and_key_order():
    assert canonical(b'{"sum": 3, "count": 2}') == canonical({"count": 2, "sum": 3})


def test_text_that_is_not_json_compares_as_it_is():
    assert canonical(b"value-7-ok") == canonical("value-7-ok") == "value-7-ok"
    assert canonical("7") == canonical(7)


def test_expected_counts_per_partition_of_the_example_counter():
    records = [InputRecord(i, i % 2, str(i).encode(), b"", "in") for i in range(5)]
    assert counts_per_partition(iter(records)) == {
        "partition-0": {"count": 3},
        "partition-1": {"count": 2},
    }
