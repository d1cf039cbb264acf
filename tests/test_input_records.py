"""--input: the user's record of each id, shaped for the seeder and checked before a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoschaos.contract.errors import EoschaosError
from eoschaos.workloads.byo_orders import enriched
from eoschaos.workloads.harness.input_records import (
    SeedRecord,
    check_input,
    load_input,
    seeded,
)
from eoschaos.workloads.harness.reader import IdSource

FUNCTIONS = Path(__file__).parent / "input_functions.py"
ORDERS = "eoschaos.workloads.byo_orders:order"
ORDER_IDS = IdSource("json:order_id", "--input-id-from")


def _write(tmp_path: Path, body: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text(body)
    return f"{path}:record"


def test_the_seeders_own_record_is_the_id_as_key_and_value_dash_id():
    assert seeded(1234) == SeedRecord(b"1234", b"value-1234")


def test_text_is_sent_as_utf8_and_a_dict_value_as_json(tmp_path):
    spec = _write(
        tmp_path,
        "def record(i, seed):\n"
        "    return {'key': f'k-{i}', 'value': {'id': i, 'seed': seed}, "
        "'headers': {'src': 'shop'}}\n",
    )
    assert load_input(spec, seed=9)(4) == SeedRecord(
        b"k-4", b'{"id":4,"seed":9}', (("src", b"shop"),)
    )


def test_every_part_is_optional_and_bytes_pass_as_they_are(tmp_path):
    spec = _write(tmp_path, "def record(i, seed):\n    return {'value': b'\\x00raw'}\n")
    assert load_input(spec, seed=0)(1) == SeedRecord(None, b"\x00raw")


def test_the_same_seed_gives_the_same_orders_and_another_seed_others():
    first, again, other = (load_input(ORDERS, seed) for seed in (3, 3, 4))
    assert [first(i) for i in range(20)] == [again(i) for i in range(20)]
    assert [first(i) for i in range(20)] != [other(i) for i in range(20)]


def test_an_example_order_is_found_by_its_order_id_and_passes_the_check():
    record_of = load_input(ORDERS, seed=1)
    check_input(ORDERS, record_of, ORDER_IDS, records=5000, topics=("in",))
    assert ORDER_IDS.find(*_parts(record_of(4321))) == 4321


def test_the_example_pipeline_keeps_the_order_id_where_the_output_is_searched():
    value = load_input(ORDERS, seed=1)(77).value
    assert IdSource("json:order_id").find(None, enriched(value), None) == 77


@pytest.mark.parametrize(
    ("function", "phrase"),
    [
        ("raises", "raised ValueError: no orders today for id 0"),
        ("not_a_record", "returned 'order 0' for id 0; return a dict of key, value and headers"),
        ("unknown_part", "returned {'key': '0', 'body': 'x'} for id 0"),
        ("id_elsewhere", "--input-id-from json:order_id finds no id in the record of id 0"),
        ("two_records_one_id", "finds id 0 in the record of id 1"),
        ("bad_header", "a header is a name (text) and a value (text or bytes), not ('n', 0)"),
    ],
)
def test_a_bad_record_function_is_refused_in_one_line_naming_the_id(function, phrase):
    spec = f"{FUNCTIONS}:{function}"
    with pytest.raises(EoschaosError) as refused:
        check_input(spec, load_input(spec, seed=0), ORDER_IDS, records=100, topics=("in",))
    assert phrase in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_last_id_is_tried_too(tmp_path):
    spec = _write(
        tmp_path,
        "def record(i, seed):\n    return {'value': {'order_id': i if i < 5000 else -1}}\n",
    )
    with pytest.raises(EoschaosError, match="record of id 9999"):
        check_input(spec, load_input(spec, seed=0), ORDER_IDS, records=10000, topics=("in",))


def _parts(record: SeedRecord) -> tuple:
    return record.key, record.value, list(record.headers)
