"""The driver JVM's class archive: written once at a JVM's exit, mapped by every later start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from eoschaos.checkers.class_archive import (
    ABANDONED_PART_S,
    CLASS_ARCHIVE_ENV,
    DYNAMIC_ARCHIVE_MAGIC,
    adopt_finished_parts,
    archive_directory,
    archive_path,
    java_options,
)

# A fresh interpreter, so that spark_session starts the driver JVM (and its archive options).
START_SPARK = """
import sys
from eoschaos.checkers.spark import spark_session
spark = spark_session("local[1]", java_options=sys.argv[1])
assert spark.range(10).count() == 10
spark.stop()
"""


def _start_spark(cache: Path, extra_java_options: str = "") -> None:
    env = {**os.environ, "EOSCHAOS_CACHE": str(cache)}
    subprocess.run(
        [sys.executable, "-c", START_SPARK, extra_java_options], env=env, check=True, timeout=180
    )


def _wait_for(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the JVM did not finish writing its class archive"
        time.sleep(0.2)


def test_the_archive_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(CLASS_ARCHIVE_ENV, "off")
    assert archive_directory() is None
    assert java_options() == ""


def test_archives_live_in_eoschaos_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(CLASS_ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("EOSCHAOS_CACHE", str(tmp_path))
    assert archive_directory() == tmp_path / "spark"


def test_another_jvm_build_gets_another_archive(monkeypatch, tmp_path):
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    before = archive_path(tmp_path)
    os.utime(java_home / "bin" / "java", ns=(0, 0))
    assert archive_path(tmp_path) != before


def test_without_an_archive_the_jvm_is_asked_to_write_one_at_exit(monkeypatch, tmp_path):
    monkeypatch.delenv(CLASS_ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("EOSCHAOS_CACHE", str(tmp_path))
    part = f"{archive_path(tmp_path / 'spark')}.{os.getpid()}.part"
    assert f"-XX:ArchiveClassesAtExit={part}" in java_options()


def test_a_finished_part_becomes_the_archive(tmp_path):
    archive = tmp_path / "spark.jsa"
    (tmp_path / "spark.jsa.41.part").write_bytes(DYNAMIC_ARCHIVE_MAGIC + b"regions")
    adopt_finished_parts(archive)
    assert archive.read_bytes() == DYNAMIC_ARCHIVE_MAGIC + b"regions"
    assert list(tmp_path.iterdir()) == [archive]


def test_a_part_still_being_written_is_left_alone(tmp_path):
    archive = tmp_path / "spark.jsa"
    writing = tmp_path / "spark.jsa.42.part"
    writing.write_bytes(bytes(4) + b"regions, header not yet written")
    adopt_finished_parts(archive)
    assert not archive.exists()
    assert writing.exists()


def test_a_part_abandoned_by_a_killed_jvm_is_removed(tmp_path):
    abandoned = tmp_path / "spark.jsa.43.part"
    abandoned.write_bytes(bytes(4))
    long_ago = time.time() - ABANDONED_PART_S - 1
    os.utime(abandoned, (long_ago, long_ago))
    adopt_finished_parts(tmp_path / "spark.jsa")
    assert list(tmp_path.iterdir()) == []


def test_a_second_finished_part_is_removed_once_there_is_an_archive(tmp_path):
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(DYNAMIC_ARCHIVE_MAGIC + b"first")
    (tmp_path / "spark.jsa.44.part").write_bytes(DYNAMIC_ARCHIVE_MAGIC + b"second")
    adopt_finished_parts(archive)
    assert list(tmp_path.iterdir()) == [archive]
    assert archive.read_bytes() == DYNAMIC_ARCHIVE_MAGIC + b"first"


def test_the_next_driver_jvm_loads_sparks_classes_from_the_archive_the_first_wrote(tmp_path):
    archives = tmp_path / "spark"
    _start_spark(tmp_path)
    _wait_for(lambda: any(_finished_parts(archives)))

    class_log = tmp_path / "class-load.log"
    _start_spark(tmp_path, f"-Xlog:class+load=info:file={class_log}")

    assert [path.name for path in archives.iterdir()] == [archive_path(archives).name]
    spark_context = [
        line
        for line in class_log.read_text().splitlines()
        if "org.apache.spark.SparkContext " in line
    ]
    assert spark_context, "the driver JVM did not load SparkContext at all"
    assert all("shared objects file (top)" in line for line in spark_context), spark_context


def _finished_parts(archives: Path) -> list[Path]:
    return [part for part in archives.glob("*.part") if _header_of(part) == DYNAMIC_ARCHIVE_MAGIC]


def _header_of(path: Path) -> bytes:
    with path.open("rb") as file:
        return file.read(len(DYNAMIC_ARCHIVE_MAGIC))
