"""Bad input from every side gets one line naming its file, never a traceback or a hang.

Hypothesis feeds the readers of schedule files, run.json and matrix files random bytes, random
JSON values, documents of nearly the right shape and deeply nested ones. Each reader must
return what it read or raise EoschaosError whose message is one line starting with the file's
path (the CLI prints it and exits 2). A few hundred examples in CI, many more nightly
(`pytest -m chaos`). tests/checkers/test_history_fuzz.py does the same for history files.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzzing import in_ci_and_nightly
from hypothesis import strategies as st

from eoschaos.chaos.catalogue import CATALOGUE
from eoschaos.chaos.schedule import load_schedule
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.rundir import RUN_MANIFEST, SCHEMA_VERSION, read_manifest
from eoschaos.matrix.spec import load_matrix

CI_EXAMPLES, NIGHTLY_EXAMPLES = 200, 5000
NESTING = 100_000  # far deeper than Python's recursion limit

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
RAW_BYTES = st.binary(max_size=400)


def assert_one_line_naming(error: EoschaosError, path: Path) -> None:
    message = str(error)
    assert message.startswith(str(path)), message
    assert "\n" not in message and "Traceback" not in message, message


def read_or_refuse(read: Callable[[Path], Any], name: str, data: bytes) -> None:
    """Write `data` as file `name` in a fresh directory and read it with `read`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            read(path)
        except EoschaosError as error:
            assert_one_line_naming(error, path)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


# --- schedule files ---------------------------------------------------------------------------

ENTRY_KEYS = ["at", "fault", "target", "duration", "params", "when"]
NEAR_ENTRIES = st.dictionaries(
    st.sampled_from(ENTRY_KEYS),
    JSON_VALUES | st.sampled_from(sorted(CATALOGUE)) | st.floats(0, 60),
    max_size=5,
)


def read_schedule(data: bytes) -> None:
    read_or_refuse(load_schedule, "schedule.json", data)


def schedule_of_json(value: Any) -> None:
    read_schedule(_json(value))


def schedule_of_near_entries(entries: list[dict[str, Any]]) -> None:
    read_schedule(_json(entries))


(
    test_a_schedule_file_of_random_bytes_is_read_or_refused_in_one_line,
    test_a_schedule_file_of_random_bytes_is_read_or_refused_in_one_line_nightly,
) = in_ci_and_nightly(read_schedule, CI_EXAMPLES, NIGHTLY_EXAMPLES, data=RAW_BYTES)
(
    test_a_schedule_file_of_random_json_is_read_or_refused_in_one_line,
    test_a_schedule_file_of_random_json_is_read_or_refused_in_one_line_nightly,
) = in_ci_and_nightly(schedule_of_json, CI_EXAMPLES, NIGHTLY_EXAMPLES, value=JSON_VALUES)
(
    test_a_schedule_of_nearly_right_entries_is_read_or_refused_in_one_line,
    test_a_schedule_of_nearly_right_entries_is_read_or_refused_in_one_line_nightly,
) = in_ci_and_nightly(
    schedule_of_near_entries,
    CI_EXAMPLES,
    NIGHTLY_EXAMPLES,
    entries=st.lists(NEAR_ENTRIES, max_size=4),
)


def test_a_deeply_nested_schedule_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / "schedule.json"
    path.write_bytes(b"[" * NESTING)
    with pytest.raises(EoschaosError) as refused:
        load_schedule(path)
    assert_one_line_naming(refused.value, path)


# --- run.json ---------------------------------------------------------------------------------


def read_run_manifest(data: bytes) -> None:
    read_or_refuse(lambda path: read_manifest(path.parent), RUN_MANIFEST, data)


def manifest_of_json(value: Any, versioned: bool) -> None:
    if versioned and isinstance(value, dict):
        value = {**value, "history_schema": SCHEMA_VERSION}
    read_run_manifest(_json(value))


(
    test_a_run_json_of_random_bytes_is_read_or_refused_in_one_line,
    test_a_run_json_of_random_bytes_is_read_or_refused_in_one_line_nightly,
) = in_ci_and_nightly(read_run_manifest, CI_EXAMPLES, NIGHTLY_EXAMPLES, data=RAW_BYTES)
(
    test_a_run_json_of_random_json_is_read_or_refused_in_one_line,
    test_a_run_json_of_random_json_is_read_or_refused_in_one_line_nightly,
) = in_ci_and_nightly(
    manifest_of_json, CI_EXAMPLES, NIGHTLY_EXAMPLES, value=JSON_VALUES, versioned=st.booleans()
)


def test_a_deeply_nested_run_json_is_refused_in_one_line(tmp_path):
    (tmp_path / RUN_MANIFEST).write_bytes(b"[" * NESTING)
    with pytest.raises(EoschaosError) as refused:
        read_manifest(tmp_path)
    assert_one_line_naming(refused.value, tmp_path / RUN_MANIFEST)


# --- matrix files -----------------------------------------------------------------------------

MATRIX_KEYS = [
    "name",
    "expect",
    "workload",
    "mode",
    "faults",
    "duration",
    "records",
    "seeds",
    "kafka_versions",
    "schedule",
    "seed",
    "partitions",
    "color",
]
TOML_SCALARS = (
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["PASS", "FAIL:delivery.duplicate", "kip447", "eos", "kill,zombie"])
)
TOML_VALUES = TOML_SCALARS | st.lists(TOML_SCALARS, max_size=3)
TABLES = st.dictionaries(st.sampled_from(MATRIX_KEYS), TOML_VALUES, max_size=5)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, float):
        return repr(value) if "e" in repr(value) or "." in repr(value) else f"{value}.0"
    return json.dumps(value)  # ints, and strings: JSON's escapes are TOML's basic-string ones


def _toml(defaults: dict[str, Any] | None, cells: list[dict[str, Any]], extra: str) -> str:
    lines = [extra]
    if defaults is not None:
        lines.append("[defaults]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in defaults.items()]
    for cell in cells:
        lines.append("[[cell]]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in cell.items()]
    return "\n".join(lines) + "\n"


def read_matrix(data: bytes) -> None:
    read_or_refuse(load_matrix, "matrix.toml", data)


def matrix_of_near_tables(defaults: Any, cells: Any, extra: str) -> None:
    read_matrix(_toml(defaults, cells, extra).encode())


TOP_LEVEL_STRAYS = st.sampled_from(["", "cell = 3", 'defaults = "x"', "cell = []", "other = 1"])
(
    test_a_matrix_file_of_random_bytes_is_read_or_refused_in_one_line,
    test_a_matrix_file_of_random_bytes_is_read_or_refused_in_one_line_nightly,
) = in_ci_and_nightly(read_matrix, CI_EXAMPLES, NIGHTLY_EXAMPLES, data=RAW_BYTES)
(
    test_a_matrix_of_nearly_right_tables_is_read_or_refused_in_one_line,
    test_a_matrix_of_nearly_right_tables_is_read_or_refused_in_one_line_nightly,
) = in_ci_and_nightly(
    matrix_of_near_tables,
    CI_EXAMPLES,
    NIGHTLY_EXAMPLES,
    defaults=st.none() | TABLES,
    cells=st.lists(TABLES, max_size=3),
    extra=TOP_LEVEL_STRAYS,
)


def test_a_deeply_nested_matrix_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / "matrix.toml"
    path.write_text("x = " + "[" * NESTING)
    with pytest.raises(EoschaosError) as refused:
        load_matrix(path)
    assert_one_line_naming(refused.value, path)
