"""A history with a damaged line anywhere gets a verdict, or one line naming the file and the
line: never a traceback. Hypothesis puts random bytes, non-UTF-8, random JSON, events with
fields of the wrong type and deeply nested lines into a correct history at a random place, with
or without a newline after them (a cut-short last line is what a killed writer leaves). A few
examples in CI (each is a check), many nightly (`pytest -m chaos`)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from fuzzing import in_ci_and_nightly
from hypothesis import strategies as st

from eoschaos.checkers.verdict import check_run
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.rundir import HISTORY_DIR
from eoschaos.testing import RunShape, generate

CI_EXAMPLES, NIGHTLY_EXAMPLES = 6, 100
FIELDS = ["kind", "type", "f", "time", "process", "topic", "partition", "offset", "id"]
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=10,
)
DAMAGED_LINES = st.one_of(
    st.binary(min_size=1, max_size=120).filter(lambda line: b"\n" not in line),
    ANY_JSON.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(st.sampled_from(FIELDS), ANY_JSON, min_size=1).map(
        lambda event: json.dumps(event).encode()
    ),
    st.integers(1_000, 20_000).map(lambda depth: b'{"kind":' + b"[" * depth),
)


@pytest.fixture(scope="module")
def correct_run(spark, tmp_path_factory) -> Path:
    run = generate(spark, tmp_path_factory.mktemp("fuzz"), RunShape(), parquet=False)
    return run.run_dir


def damaged_history_is_judged_or_refused(spark, correct_run, line, where, newline):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(shutil.copytree(correct_run, Path(tmp) / "run"))
        history = run_dir / HISTORY_DIR / "observer.jsonl"
        lines = history.read_bytes().splitlines(keepends=True)
        at = round(where * len(lines))
        lines.insert(at, line + (b"\n" if newline else b""))
        history.write_bytes(b"".join(lines))
        try:
            verdict = check_run(spark, run_dir, lineage=False)
        except EoschaosError as refused:
            message = str(refused)
            assert message.startswith(f"{history}:"), message
            assert "\n" not in message, message
            return
        assert verdict["verdict"] in ("PASS", "FAIL", "UNKNOWN")


(
    test_a_damaged_history_line_is_judged_or_refused_naming_its_file,
    test_a_damaged_history_line_is_judged_or_refused_naming_its_file_nightly,
) = in_ci_and_nightly(
    damaged_history_is_judged_or_refused,
    CI_EXAMPLES,
    NIGHTLY_EXAMPLES,
    line=DAMAGED_LINES,
    where=st.floats(0, 1),
    newline=st.booleans(),
)
