"""`eoschaos matrix` on a real cluster: two cells (an eos cell whose expectation is deliberately
wrong: it PASSes where a FAIL was expected, and an alos cell expected to FAIL with
delivery.duplicate, which it meets), the matrix killed with SIGKILL after its first verdict,
cleaned up, and resumed.

One night serves every test here (module fixture): a matrix run is minutes of real work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser import rendered_dom

from eoschaos.clusters.kafka_dist import DEFAULT_KAFKA_VERSION

pytestmark = pytest.mark.cluster

MATRIX = f"""
[defaults]
duration = 20
records = 4000
kafka_versions = ["{DEFAULT_KAFKA_VERSION}"]
seeds = [1]

[[cell]]
name = "eos-wrongly-expected"
duration = 10
records = 2000
expect = "FAIL:delivery.duplicate"

[[cell]]
name = "alos-crash"
mode = "alos"
faults = "crash"
expect = "FAIL:delivery.duplicate"
"""
CELLS = ("eos-wrongly-expected", "alos-crash")
# last night, every cell met its expectation, on another librdkafka
LAST_NIGHT = [
    {
        "key": f"{cell}@{DEFAULT_KAFKA_VERSION}#s1",
        "name": cell,
        "kafka_version": DEFAULT_KAFKA_VERSION,
        "seed": 1,
        "verdict": "PASS",
        "met_expectation": True,
        "versions": {"librdkafka": "0.0.1"},
    }
    for cell in CELLS
]


@dataclass
class Night:
    out: Path
    killed_after_rows: int
    left_running_after_cleanup: list[str]
    cleanup: subprocess.CompletedProcess[str]
    resumed: subprocess.CompletedProcess[str]

    def rows(self) -> dict[str, dict]:
        lines = (self.out / "results.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        assert len({row["key"] for row in rows}) == len(rows), "a cell run was judged twice"
        return {row["name"]: row for row in rows}


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that name `text` (our run dirs are in every one)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture(scope="module")
def night(tmp_path_factory) -> Night:
    root = tmp_path_factory.mktemp("matrix")
    matrix, out, previous = root / "matrix.toml", root / "tonight", root / "last-night"
    matrix.write_text(MATRIX)
    previous.mkdir()
    (previous / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in LAST_NIGHT))
    command = ["matrix", str(matrix), "--out", str(out), "--previous", str(previous)]
    with (root / "killed.log").open("w") as log:
        first = subprocess.Popen([sys.executable, "-m", "eoschaos.cli", *command], stderr=log)
        try:
            rows = wait_for(
                lambda: (
                    (out / "results.jsonl").exists()
                    and (out / "results.jsonl").read_text().count("\n")
                ),
                600,
                "the first verdict",
            )
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
    eoschaos = [sys.executable, "-m", "eoschaos.cli"]
    # this night's clusters only: a bare `eoschaos cleanup` would stop every session's
    cleanup = subprocess.run(
        [*eoschaos, "cleanup", str(out)], capture_output=True, text=True, timeout=120
    )
    # the recording child notices it is orphaned and stops its instances (within seconds)
    deadline = time.monotonic() + 90
    while (left := processes_mentioning(str(out))) and time.monotonic() < deadline:
        time.sleep(1)
    resumed = subprocess.run(
        [sys.executable, "-m", "eoschaos.cli", *command],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    return Night(out, rows, left, cleanup, resumed)


def test_a_matrix_killed_with_sigkill_leaves_nothing_running_after_cleanup(night):
    assert night.killed_after_rows >= 1
    assert night.cleanup.returncode == 0, night.cleanup.stderr
    assert "processes stopped in 1 run dirs" in night.cleanup.stdout
    assert night.left_running_after_cleanup == []


def test_the_resumed_matrix_judges_every_cell_run_exactly_once(night):
    assert set(night.rows()) == set(CELLS)


def test_the_unmet_expectation_makes_the_exit_code_1(night):
    assert night.resumed.returncode == 1, night.resumed.stderr[-3000:]
    assert "unmet: eos-wrongly-expected" in night.resumed.stderr


def test_each_row_carries_its_verdict_expectation_and_phases(night):
    rows = night.rows()
    alos = rows["alos-crash"]
    assert alos["verdict"] == "FAIL" and alos["met_expectation"] is True
    assert alos["failed"]["delivery.duplicate"]["count"] > 0
    wrong = rows["eos-wrongly-expected"]
    assert (wrong["verdict"], wrong["met_expectation"]) == ("PASS", False)
    for row in rows.values():
        assert {"record", "check", "report"} <= set(row["seconds"])
        assert (night.out / row["report"]).exists()
        assert row["versions"]["librdkafka"] and row["versions"]["kafka"]


def test_junit_has_a_suite_per_cell_and_fails_only_the_unmet_one(night):
    suites = {s.get("name"): s for s in ET.parse(night.out / "junit.xml").getroot()}
    assert set(suites) == set(CELLS)
    failures = {name: int(suite.get("failures")) for name, suite in suites.items()}
    assert failures == {"alos-crash": 0, "eos-wrongly-expected": 2}
    names = [case.get("name") for case in suites["alos-crash"].iter("testcase")]
    assert f"delivery.duplicate [kafka {DEFAULT_KAFKA_VERSION}, seed 1]" in names
    assert len(names) > 5  # one testcase per property, and the verdict's


def test_the_index_in_chromium_shows_the_grid_links_and_the_regression(night):
    dom = rendered_dom(night.out / "index.html")
    assert 'id="grid"' in dom
    for row in night.rows().values():
        assert f'href="{row["report"]}"' in dom
    regressions = dom[dom.index('id="regressions"') :]
    assert "eos-wrongly-expected on Kafka" in regressions and "newly unmet" in regressions
    assert "librdkafka 0.0.1 →" in regressions
