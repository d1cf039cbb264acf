"""The history writer: whole JSON lines, one file per writer, flushed without being asked."""

from __future__ import annotations

import errno
import json
import os
import threading
import time

import pytest

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.history import (
    FIELDS,
    FLUSH_INTERVAL_S,
    HistoryWriter,
    await_instance_event,
    instance_name,
    recorded_events,
)
from eoschaos.contract.rundir import read_manifest, write_manifest


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_events_carry_kind_type_f_process_and_time(tmp_path):
    with HistoryWriter(tmp_path, "seeder") as writer:
        writer.record("send", "ok", "send", id=7, partition=2, offset=40)
    (event,) = lines(tmp_path / "history" / "seeder.jsonl")
    assert event["kind"] == "send" and event["type"] == "ok" and event["process"] == "seeder"
    assert (event["id"], event["partition"], event["offset"]) == (7, 2, 40)
    assert abs(event["time"] - time.time()) < 5
    assert set(event) <= set(FIELDS)


def test_null_fields_are_left_out(tmp_path):
    with HistoryWriter(tmp_path, "observer") as writer:
        writer.record("read", "ok", "poll", id=1, error=None)
    (event,) = lines(tmp_path / "history" / "observer.jsonl")
    assert "error" not in event


def test_a_field_outside_the_schema_is_refused(tmp_path):
    with HistoryWriter(tmp_path, "seeder") as writer, pytest.raises(ValueError, match="colour"):
        writer.record("send", "ok", "send", colour="red")


def test_events_reach_the_file_within_the_flush_interval_without_close(tmp_path):
    writer = HistoryWriter(tmp_path, "processor-0.0")
    try:
        writer.record("txn", "invoke", "begin", txn_seq=0)
        time.sleep(FLUSH_INTERVAL_S * 3)
        assert len(lines(writer.path)) == 1
    finally:
        writer.close()


def test_concurrent_writers_threads_produce_only_whole_lines(tmp_path):
    with HistoryWriter(tmp_path, "seeder") as writer:

        def send_many(base: int) -> None:
            for i in range(2000):
                writer.record("send", "ok", "send", id=base + i)

        threads = [threading.Thread(target=send_many, args=(n * 10_000,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    ids = [event["id"] for event in lines(tmp_path / "history" / "seeder.jsonl")]
    assert sorted(ids) == sorted(n * 10_000 + i for n in range(4) for i in range(2000))


def test_manifest_round_trips_with_the_schema_version(tmp_path):
    write_manifest(tmp_path, {"workload": "kip447", "seed": 3})
    assert read_manifest(tmp_path) == {"history_schema": 1, "workload": "kip447", "seed": 3}


def _produced(event):
    return (event["kind"], event["f"], event["type"]) == ("txn", "produce", "ok")


def _record_later(run_dir, incarnation, delay):
    def record():
        time.sleep(delay)
        with HistoryWriter(run_dir, instance_name(0, incarnation), flush_each=True) as writer:
            writer.record("txn", "invoke", "begin")
            writer.record("txn", "ok", "produce")

    thread = threading.Thread(target=record)
    thread.start()
    return thread


def test_following_an_instance_ignores_what_it_recorded_before(tmp_path):
    _record_later(tmp_path, 0, 0).join()
    assert not await_instance_event(tmp_path, 0, _produced, timeout=0.5)


def test_following_an_instance_sees_its_next_event_as_it_is_flushed(tmp_path):
    HistoryWriter(tmp_path, instance_name(0, 0)).close()
    writer = _record_later(tmp_path, 0, 0.3)
    assert await_instance_event(tmp_path, 0, _produced, timeout=5)
    writer.join()


def test_following_an_instance_moves_on_to_its_replacement(tmp_path):
    HistoryWriter(tmp_path, instance_name(0, 0)).close()
    writer = _record_later(tmp_path, 1, 0.5)
    assert await_instance_event(tmp_path, 0, _produced, timeout=5)
    writer.join()


def test_following_an_instance_does_not_mistake_another_for_it(tmp_path):
    HistoryWriter(tmp_path, instance_name(0, 0)).close()
    HistoryWriter(tmp_path, instance_name(1, 0)).close()
    writer = _record_later(tmp_path, 0, 0.3)
    assert not await_instance_event(tmp_path, 1, _produced, timeout=1)
    writer.join()


def test_an_instance_that_writes_no_history_is_not_waited_for(tmp_path):
    started = time.monotonic()
    assert not await_instance_event(tmp_path, 0, _produced, timeout=30)
    assert time.monotonic() - started < 1


def _on_a_full_disk(tmp_path) -> HistoryWriter:
    """A writer whose file is /dev/full: every write fails with ENOSPC, as on a full disk."""
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "seeder.jsonl").symlink_to("/dev/full")
    return HistoryWriter(tmp_path, "seeder")


def test_a_full_disk_keeps_the_events_pending_and_says_so(tmp_path):
    writer = _on_a_full_disk(tmp_path)
    for n in range(3):
        writer.record("send", "ok", "send", id=n)
    with pytest.raises(OSError) as raised:
        writer.flush()
    assert raised.value.errno == errno.ENOSPC and writer.error is raised.value
    room = tmp_path / "room.jsonl"  # the disk has room again: the same descriptor now writes
    os.dup2(os.open(room, os.O_WRONLY | os.O_CREAT | os.O_APPEND), writer._fd)
    writer.close()
    assert [event["id"] for event in lines(room)] == [0, 1, 2]


def test_closing_on_a_full_disk_is_one_line_naming_the_file(tmp_path):
    writer = _on_a_full_disk(tmp_path)
    writer.record("send", "ok", "send", id=1)
    with pytest.raises(EoschaosError, match=r"seeder\.jsonl: .*No space left on device"):
        writer.close()


def test_a_finished_runs_events_are_read_back_per_writer_in_order_and_none_if_it_wrote_none(
    tmp_path,
):
    with HistoryWriter(tmp_path, "seeder") as writer:
        writer.record("send", "ok", "send", id=1)
        writer.record("send", "ok", "send", id=2)
    assert [event["id"] for event in recorded_events(tmp_path, "seeder")] == [1, 2]
    assert recorded_events(tmp_path, "observer") == []
