"""load_history and compact_history: a cut-short last line is tolerated and flagged; any other
damage is refused with one line naming the file and the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eoschaos.checkers.history_io import compact_history, load_history
from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.history import ADDED_FIELDS, HistoryWriter
from eoschaos.contract.rundir import write_manifest


def write_run(run_dir: Path, reads: int = 5) -> Path:
    """A tiny run: a manifest, a seeder and an observer with a few events each."""
    write_manifest(run_dir, {"workload": "test", "mode": "eos"})
    with HistoryWriter(run_dir, "seeder") as seeder:
        for i in range(3):
            seeder.record("send", "ok", "send", id=i, topic="input-topic", partition=0, offset=i)
    with HistoryWriter(run_dir, "observer") as observer:
        for i in range(reads):
            observer.record(
                "read",
                "ok",
                "poll",
                id=i,
                topic="output-topic",
                partition=0,
                offset=i,
                isolation="read_committed",
            )
    return run_dir


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def test_intact_history_is_complete_with_every_event(spark, tmp_path):
    history = load_history(spark, write_run(tmp_path))
    assert (history.complete, history.damage, history.events.count()) == (True, [], 8)
    assert history.kind("read").count() == 5


def test_cut_short_last_line_is_skipped_and_the_history_flagged_incomplete(spark, tmp_path):
    run_dir = write_run(tmp_path)
    append(run_dir / "history" / "observer.jsonl", '{"kind":"read","type":"ok","id":9')
    history = load_history(spark, run_dir)
    assert (history.complete, history.events.count()) == (False, 8)
    assert history.damage[0].startswith("observer.jsonl: last line cut short")


def test_garbage_before_the_last_line_names_the_file_and_line(spark, tmp_path):
    run_dir = write_run(tmp_path)
    path = run_dir / "history" / "observer.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:2], "not json\n", *lines[2:]]))
    with pytest.raises(EoschaosError, match=r"observer\.jsonl:3: not a history v1 event"):
        load_history(spark, run_dir)


def test_a_field_of_the_wrong_type_is_damage_not_a_null(spark, tmp_path):
    run_dir = write_run(tmp_path)
    append(run_dir / "history" / "seeder.jsonl", '{"kind":"send","partition":"zero"}\n')
    with pytest.raises(EoschaosError, match=r"seeder\.jsonl:4"):
        load_history(spark, run_dir)


def test_a_broken_last_line_that_was_written_whole_is_damage(spark, tmp_path):
    run_dir = write_run(tmp_path)
    append(run_dir / "history" / "observer.jsonl", "{broken}\n")
    with pytest.raises(EoschaosError, match="damaged before its last line"):
        load_history(spark, run_dir)


def test_unknown_schema_version_is_refused(spark, tmp_path):
    run_dir = write_run(tmp_path)
    manifest = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**manifest, "history_schema": 2}))
    with pytest.raises(EoschaosError, match="history schema version 2 is not supported"):
        load_history(spark, run_dir)


def test_missing_manifest_is_refused(spark, tmp_path):
    run_dir = write_run(tmp_path)
    (run_dir / "run.json").unlink()
    with pytest.raises(EoschaosError, match=r"run\.json: missing; .* is not an eoschaos run"):
        load_history(spark, run_dir)


def test_run_without_history_files_is_refused(spark, tmp_path):
    write_manifest(tmp_path, {"workload": "test"})
    with pytest.raises(EoschaosError, match="no history files"):
        load_history(spark, tmp_path)


def test_compaction_keeps_every_event_partitioned_by_kind(spark, tmp_path):
    run_dir = write_run(tmp_path)
    before = sorted(load_history(spark, run_dir).events.collect())
    compact_history(spark, run_dir)
    assert {p.name for p in (run_dir / "history.parquet").glob("kind=*")} == {
        "kind=send",
        "kind=read",
    }
    history = load_history(spark, run_dir)
    assert (history.complete, sorted(history.events.collect())) == (True, before)


def test_compaction_of_a_cut_short_history_stays_incomplete(spark, tmp_path):
    run_dir = write_run(tmp_path)
    append(run_dir / "history" / "observer.jsonl", '{"kind":"re')
    compact_history(spark, run_dir)
    history = load_history(spark, run_dir)
    assert (history.complete, history.events.count()) == (False, 8)
    assert "observer.jsonl" in history.damage[0]


def test_compaction_refuses_a_wrong_type_and_leaves_no_parquet(spark, tmp_path):
    run_dir = write_run(tmp_path)
    append(run_dir / "history" / "seeder.jsonl", '{"kind":"send","partition":"zero"}\n')
    with pytest.raises(EoschaosError, match=r"seeder\.jsonl:4"):
        compact_history(spark, run_dir)
    assert sorted(p.name for p in run_dir.iterdir()) == ["history", "run.json"]


def test_parquet_of_another_schema_is_refused_with_the_way_back(spark, tmp_path):
    run_dir = write_run(tmp_path)
    spark.range(3).write.parquet(str(run_dir / "history.parquet"))
    with pytest.raises(EoschaosError, match=r"columns missing .*; remove .*history\.parquet"):
        load_history(spark, run_dir)


def test_parquet_recorded_before_a_field_was_added_reads_it_as_null(spark, tmp_path):
    run_dir = write_run(tmp_path)
    compact_history(spark, run_dir)
    parquet = run_dir / "history.parquet"
    older = spark.read.parquet(str(parquet)).drop(*ADDED_FIELDS)
    older.write.partitionBy("kind").parquet(str(tmp_path / "older"))
    shutil.rmtree(parquet)
    (tmp_path / "older").rename(parquet)
    events = load_history(spark, run_dir).events
    assert events.where(events.txn_index.isNotNull()).count() == 0
    assert events.count() == 8


def test_unreadable_parquet_is_refused(spark, tmp_path):
    run_dir = write_run(tmp_path)
    compact_history(spark, run_dir)
    for part in (run_dir / "history.parquet").rglob("*.parquet"):
        part.write_bytes(b"not parquet at all")
    with pytest.raises(EoschaosError, match=r"history\.parquet.*unreadable"):
        load_history(spark, run_dir)
