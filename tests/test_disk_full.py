"""A run stops before it fills its disk: one line and exit 2, nothing left running, and the
history recorded so far kept."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from kill_trials import processes_of

from eoschaos.diskguard import MIN_FREE_ENV, DiskFull, DiskGuard


def test_a_disk_already_below_the_floor_is_refused_before_anything_starts(tmp_path):
    free = shutil.disk_usage(tmp_path).free >> 20
    guard = DiskGuard(tmp_path, floor_mb=free + 1000)
    with pytest.raises(DiskFull, match=f"below the floor of {free + 1000} MB"), guard:
        pytest.fail("the body ran")


def test_free_space_falling_below_the_floor_interrupts_the_body(tmp_path):
    started = time.monotonic()
    with pytest.raises(DiskFull, match="fell to"), DiskGuard(tmp_path, floor_mb=0) as guard:
        guard.floor_mb = 1 << 40  # as if the disk filled up now
        time.sleep(30)  # a run waiting on its workload
    assert time.monotonic() - started < 5


def test_a_body_with_room_runs_to_its_end(tmp_path):
    with DiskGuard(tmp_path, floor_mb=0) as guard:
        time.sleep(1.5)
    assert guard.reason is None


@pytest.mark.cluster
def test_a_run_whose_disk_fills_stops_with_one_line_and_leaves_nothing(tmp_path):
    """The run dir on a 64 MB tmpfs of its own (a mount namespace, so nothing outlives the
    test) with a floor of 60 MB: the run stops once it has written 4 MB."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace here (needs root and unshare)")
    small, kept = tmp_path / "small-disk", tmp_path / "kept"
    small.mkdir()
    script = (
        'mount -t tmpfs -o size=64m eoschaos-small "$1" || exit 99; '
        f"{sys.executable} -m eoschaos.cli run --workload kip447 --duration 20 --records 2400 "
        '--out "$1/run"; status=$?; cp -a "$1/run" "$2"; exit $status'
    )
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", small, kept],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, MIN_FREE_ENV: "60"},
    )
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("eoschaos: error: the disk holding"), result.stderr
    assert "below the floor of 60 MB" in last and "Traceback" not in result.stderr
    assert (kept / "run.json").exists()  # what was recorded is kept
    assert processes_of(small) == []
