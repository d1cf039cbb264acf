"""Runs kept in `--eoschaos-runs` survive the next pytest session that keeps runs there."""

from __future__ import annotations

from eoschaos.pytest_plugin import unused_run_dir


def test_a_run_dir_an_earlier_session_kept_is_neither_reused_nor_an_error(tmp_path):
    earlier = unused_run_dir(tmp_path, "run-0-eos-s11")
    (earlier / "kept.txt").write_text("kept\n")
    later = unused_run_dir(tmp_path, "run-0-eos-s11")
    assert later == tmp_path / "run-0-eos-s11.2"
    assert list(later.iterdir()) == []
    assert (earlier / "kept.txt").read_text() == "kept\n"


def test_the_runs_folder_is_created_when_missing(tmp_path):
    assert unused_run_dir(tmp_path / "runs", "run-1-eos-s2") == tmp_path / "runs" / "run-1-eos-s2"
