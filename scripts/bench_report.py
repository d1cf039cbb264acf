"""Benchmark: real headless Chromium rendering a report, against a blank page (the floor:
the browser's own start and exit).

    .venv/bin/python scripts/bench_report.py RUN_DIR/report.html [--runs 5]

Prints one line per run and the medians; the difference is what the report itself costs.
Numbers go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from browser import rendered_dom  # the tests' Chromium helper, with the same flags


def timed(page: Path) -> float:
    started = time.monotonic()
    dom = rendered_dom(page)
    assert "</html>" in dom, f"{page} did not render"
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        blank = Path(work) / "blank.html"
        blank.write_text("<!doctype html><html><body>blank</body></html>")
        reports, blanks = [], []
        for run in range(args.runs):
            blanks.append(timed(blank))
            reports.append(timed(args.report))
            print(f"run {run + 1}: report {reports[-1]:.2f} s, blank page {blanks[-1]:.2f} s")
    size = args.report.stat().st_size
    report, floor = statistics.median(reports), statistics.median(blanks)
    print(
        f"median: report {report:.2f} s ({size / 1024:.0f} KiB), blank page {floor:.2f} s, "
        f"the report's own cost {report - floor:.2f} s"
    )


if __name__ == "__main__":
    main()
