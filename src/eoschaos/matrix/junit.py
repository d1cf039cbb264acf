"""junit.xml: one testsuite per cell, one testcase per property per (Kafka version, seed), so
GitHub, GitLab and Jenkins show a night's verdicts natively.

A testcase fails when that property went against the cell's expectation: any FAIL in a cell
expected to PASS; the named check not failing in a known-bad cell. A run that could not be
judged (ERROR) is one testcase with an <error>. Each cell run also has a `verdict` testcase,
so an unmet expectation with no failing property (an incomplete history) still shows.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

from eoschaos.contract.checks import CheckResult, results_of
from eoschaos.contract.rundir import VERDICT_FILE

MAX_EXAMPLES = 3


def write_junit(rows: list[dict[str, Any]], out: Path, path: Path) -> None:
    suites = ET.Element("testsuites", name="eoschaos matrix")
    by_cell: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_cell[row["name"]].append(row)
    for cell, cell_rows in by_cell.items():
        suite = ET.SubElement(suites, "testsuite", name=cell)
        for row in cell_rows:
            _cases(suite, cell, row, out)
        cases = suite.findall("testcase")
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def _cases(suite: ET.Element, cell: str, row: dict[str, Any], out: Path) -> None:
    where = f"[kafka {row['kafka_version']}, seed {row['seed']}]"
    seconds = sum((row.get("seconds") or {}).values())
    if row["verdict"] == "ERROR":
        case = ET.SubElement(suite, "testcase", classname=cell, name=f"run {where}")
        case.set("time", f"{seconds:.1f}")
        ET.SubElement(case, "error", message=row.get("reason", "error"))
        return
    report = out / row["report"]
    checks = results_of(json.loads((out / row["run_dir"] / VERDICT_FILE).read_text()))
    expected = row["expected"]
    # a known-bad cell's checks, one of which must FAIL
    wanted = expected.removeprefix("FAIL:").split("|") if expected.startswith("FAIL:") else []
    wanted_failed = any(name in checks and checks[name].failed for name in wanted)
    for name, check in checks.items():
        case = ET.SubElement(suite, "testcase", classname=cell, name=f"{name} {where}")
        outcome = check.verdict
        if expected == "PASS" and outcome == "FAIL":
            failure = ET.SubElement(
                case, "failure", message=f"{name} FAILED: {_counts(check)}", type="anomaly"
            )
            failure.text = _details(check, report)
        elif name in wanted and not wanted_failed:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{name} was expected to FAIL (known-bad cell) and is {outcome}",
                type="calibration",
            )
            failure.text = f"report: {report}"
        else:
            ET.SubElement(case, "system-out").text = f"{outcome}; report: {report}"
    case = ET.SubElement(suite, "testcase", classname=cell, name=f"verdict {where}")
    case.set("time", f"{seconds:.1f}")
    if not row["met_expectation"]:
        message = f"verdict {row['verdict']}, expected {expected}"
        ET.SubElement(
            case, "failure", message=message, type="expectation"
        ).text = f"report: {report}"


def _counts(check: CheckResult) -> str:
    counts = check.counts or {"count": check.count}
    return ", ".join(f"{key} {value}" for key, value in counts.items())


def _details(check: CheckResult, report: Path) -> str:
    examples = check.examples[:MAX_EXAMPLES]
    lines = [f"counts: {_counts(check)}", f"report: {report}"]
    lines += [f"example: {json.dumps(example, default=str)}" for example in examples]
    return "\n".join(lines)
