"""Reading a run directory's history into Spark, and compacting it into Parquet.

A run killed mid-write may leave the last line of a history file cut short: that is expected
damage (the writer flushes whole lines, so only the last one can be partial) and the check
runs on the rest, flagged incomplete. Any other damage means the history cannot be trusted,
so it stops the check with one line naming the file and the fix.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from eoschaos.contract.errors import EoschaosError
from eoschaos.contract.history import ADDED_FIELDS, SCHEMA_DDL
from eoschaos.contract.rundir import HISTORY_DIR, PARQUET_DIR, SCHEMA_VERSION, read_manifest
from eoschaos.contract.topics import RunTopics

CORRUPT = "_corrupt_record"
DAMAGE_NOTE = "_damage.json"  # inside history.parquet: what compaction skipped
MAX_CORRUPT_SHOWN = 1000  # corrupt lines fetched to classify; more is damage anyway
TAIL_BYTES = 1 << 20  # a history line is far shorter than this
JSON_PARTITION_BYTES = 64 << 20


@functools.cache
def event_schema() -> StructType:
    """SCHEMA_DDL as a StructType (parsing DDL needs a running Spark, hence not at import)."""
    return StructType.fromDDL(SCHEMA_DDL)


@dataclass
class History:
    """One run's events as a DataFrame, with the manifest and what had to be skipped."""

    manifest: dict[str, Any]
    events: DataFrame
    complete: bool
    damage: list[str] = field(default_factory=list)
    cached: DataFrame | None = None  # the parsed JSON lines, kept for every check

    def release(self) -> None:
        """Drop the cached lines. Spark would serve a later read of the same files from this
        cache, stale if they changed since (a run dir re-checked in one session), and a long
        session (a matrix) would keep every run's lines."""
        if self.cached is not None:
            self.cached.unpersist()

    def kind(self, kind: str) -> DataFrame:
        """Events of one kind; on Parquet this reads only that kind's directory."""
        return self.events.filter(F.col("kind") == kind)

    @functools.cached_property
    def topics(self) -> RunTopics:
        """The run's topics by role (one input and one output, unless byo named more)."""
        return RunTopics.of_manifest(self.manifest)

    @property
    def input_topic(self) -> str:
        """The first input topic: the only one, unless byo named more."""
        return self.topics.inputs[0]

    @property
    def output_topic(self) -> str:
        """The first output topic: the only one, unless byo named more."""
        return self.topics.outputs[0]

    @property
    def mode(self) -> str | None:
        return self.manifest.get("mode")


def load_history(spark: SparkSession, run_dir: Path) -> History:
    """The history of RUN_DIR: history.parquet if its compaction completed, else the JSON lines."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    parquet = run_dir / PARQUET_DIR
    cached = None
    if (parquet / "_SUCCESS").exists():
        events, damage = _read_parquet(spark, parquet, run_dir)
    else:
        events, damage, cached = _read_jsonl(spark, run_dir / HISTORY_DIR)
    return History(manifest, events, complete=not damage, damage=damage, cached=cached)


def compact_history(spark: SparkSession, run_dir: Path) -> None:
    """history/*.jsonl -> history.parquet partitioned by kind, replacing any earlier compaction.

    One pass: the JSON is parsed once, by the write, which counts the lines that did not parse
    as it goes (an observed metric). Only when it found some are they fetched and classified,
    in a second pass. (Caching the parsed lines to ask about them first costs more than the
    parse itself.)

    Written beside the target and renamed into place, with the damage notes inside, so a
    crash or refused damage never leaves a history.parquet that claims to be complete.
    """
    run_dir = Path(run_dir)
    read_manifest(run_dir)
    directory = run_dir / HISTORY_DIR
    lines = _jsonl_lines(spark, directory)  # split as Spark splits files: no coalesce
    target = run_dir / PARQUET_DIR
    staging = run_dir / f"{PARQUET_DIR}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    unparsed = Observation("unparsed")
    parsed = lines.observe(unparsed, F.count(CORRUPT).alias("lines")).filter(
        F.col(CORRUPT).isNull()
    )
    try:
        write_parquet(parsed.select(*event_schema().fieldNames()), staging)
        damage = _damage_in(spark, directory) if unparsed.get["lines"] else []
    except (PySparkException, Py4JJavaError, EoschaosError) as error:
        shutil.rmtree(staging, ignore_errors=True)
        if not isinstance(error, EoschaosError):
            _raise_if_executors_cannot_read(error, directory)
        raise
    if damage:
        (staging / DAMAGE_NOTE).write_text(json.dumps(damage) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def write_parquet(events: DataFrame, path: Path) -> None:
    """Events as Parquet partitioned by kind, each task's events sorted by writer and place: a
    plan that wants one reader's reads skips the other readers' row groups by their min/max
    statistics instead of filtering every row.

    No shuffle: a run's JSON lines are one file per writer and Spark reads a big file in
    splits of its own, so the big writers' events land in files of their own anyway; small
    files read together are only sorted by writer. Grouping them exactly by a shuffle cost
    more than it saved (docs/benchmarks.md)."""
    (
        events.sortWithinPartitions("kind", "process", "topic", "partition", "offset")
        .write.mode("overwrite")
        .partitionBy("kind")
        .parquet(str(path))
    )


def _read_parquet(spark: SparkSession, path: Path, run_dir: Path) -> tuple[DataFrame, list[str]]:
    fix = f"remove {path} to check the JSON-lines history in {run_dir / HISTORY_DIR} instead"
    try:
        found = spark.read.parquet(str(path))
    except (PySparkException, Py4JJavaError) as error:
        raise EoschaosError(f"{path}: unreadable Parquet ({_first_line(error)}); {fix}") from None
    schema = event_schema()
    wrong = [
        f"{f.name} {f.dataType.simpleString()}"
        for f in schema.fields
        if (f.name not in found.columns and f.name not in ADDED_FIELDS)
        or (
            f.name in found.columns
            and found.schema[f.name].dataType.simpleString() != f.dataType.simpleString()
        )
    ]
    if wrong:
        raise EoschaosError(
            f"{path}: columns missing or of another type than history schema "
            f"v{SCHEMA_VERSION}: {', '.join(wrong)}; {fix}"
        )
    try:
        found.count()  # reads every file's footer: a damaged file surfaces here, as one line
    except (PySparkException, Py4JJavaError) as error:
        _raise_if_executors_cannot_read(error, path)
        raise EoschaosError(f"{path}: unreadable Parquet ({_first_line(error)}); {fix}") from None
    note = path / DAMAGE_NOTE
    damage = json.loads(note.read_text()) if note.exists() else []
    columns = [
        F.col(f.name) if f.name in found.columns else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]
    return found.select(*columns), damage


def _read_jsonl(spark: SparkSession, directory: Path) -> tuple[DataFrame, list[str], DataFrame]:
    raw = _raw_jsonl(spark, directory)
    # parsed once for every check that reads it, into few partitions: the whole is small
    # enough to check without compaction
    raw = raw.coalesce(_partitions_for(spark, _size(directory))).cache()
    try:
        damage = _damage(raw)
    except (PySparkException, Py4JJavaError) as error:
        raw.unpersist()
        _raise_if_executors_cannot_read(error, directory)
        raise
    return raw.filter(F.col(CORRUPT).isNull()).select(*event_schema().fieldNames()), damage, raw


def _jsonl_lines(spark: SparkSession, directory: Path) -> DataFrame:
    """Every line of the history files, with the text of those that did not parse as an event
    of the schema (in CORRUPT)."""
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise EoschaosError(
            f"{directory}: no history files (*.jsonl); the run recorded nothing to check"
        )
    return (
        spark.read.schema(f"{SCHEMA_DDL}, {CORRUPT} STRING")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json([str(f) for f in files])
    )


def _raw_jsonl(spark: SparkSession, directory: Path) -> DataFrame:
    """_jsonl_lines with the file each line came from, which a damage note names. Only where
    damage is looked for: the column is not pruned from a write that never reads it, and on a
    large history it makes compaction measurably slower (docs/benchmarks.md)."""
    return _jsonl_lines(spark, directory).select("*", F.col("_metadata.file_path").alias("_file"))


def _damage_in(spark: SparkSession, directory: Path) -> list[str]:
    """_damage of DIRECTORY's lines, parsed again: compaction asks only when its write counted
    lines that did not parse, which is rare (a writer killed mid-line)."""
    raw = _raw_jsonl(spark, directory).cache()
    try:
        return _damage(raw)
    finally:
        raw.unpersist()


def _size(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.jsonl"))


def _damage(raw: DataFrame) -> list[str]:
    """Damage notes for the lines of RAW (cached: Spark refuses to query the corrupt column of
    raw JSON, and a cache is parsed with every column, so a wrong type is caught too) that
    did not parse; EoschaosError for damage that is more than a cut-short last line."""
    corrupt = (
        raw.filter(F.col(CORRUPT).isNotNull()).select("_file", CORRUPT).limit(MAX_CORRUPT_SHOWN)
    )
    return _classify_corrupt_lines([(row["_file"], row[CORRUPT]) for row in corrupt.collect()])


def _partitions_for(spark: SparkSession, size: int) -> int:
    """One partition per JSON_PARTITION_BYTES, at most one per core: a run's JSON lines are
    many small files, and a task per file would cost more than parsing them."""
    cores = spark.sparkContext.defaultParallelism
    return max(1, min(cores, math.ceil(size / JSON_PARTITION_BYTES)))


def _classify_corrupt_lines(corrupt: list[tuple[str, str]]) -> list[str]:
    """Damage notes for cut-short last lines; EoschaosError for any other broken line."""
    by_file: dict[Path, list[str]] = {}
    for uri, text in corrupt:
        by_file.setdefault(Path(unquote(urlparse(uri).path)), []).append(text)
    damage = []
    for path, texts in sorted(by_file.items()):
        last_line, ends_with_newline = _last_line(path)
        if len(texts) == 1 and not ends_with_newline and texts[0] == last_line:
            damage.append(
                f"{path.name}: last line cut short ({len(last_line)} bytes), skipped: "
                "its writer was killed mid-write"
            )
            continue
        bad = next(t for t in texts if ends_with_newline or t != last_line)
        line_number = _line_number(path, bad)
        raise EoschaosError(
            f"{path}:{line_number}: not a history v{SCHEMA_VERSION} event ({bad[:80]!r}); "
            "the file is damaged before its last line: restore it from the run's copy or "
            "re-run the workload"
        )
    return damage


def _last_line(path: Path) -> tuple[str, bool]:
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - TAIL_BYTES))
        tail = handle.read()
    ends_with_newline = tail.endswith(b"\n")
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return last.decode("utf-8", errors="replace"), ends_with_newline


def _line_number(path: Path, text: str) -> int | str:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if line.rstrip("\n") == text:
                return number
    return "?"


def _raise_if_executors_cannot_read(error: Exception, path: Path) -> None:
    """A file this process listed that a task did not find: on a cluster, the executors do not
    see the run directory (it is not on a filesystem they share with this machine). Without
    this, the user would get a JVM stack trace about a file that plainly exists."""
    text = str(error)
    if "FILE_NOT_EXIST" in text or "java.io.FileNotFoundException" in text:
        raise EoschaosError(
            f"{path}: Spark's executors cannot read it, though this process can; put the run "
            "directory on a filesystem every executor mounts at the same path, or check it "
            "on a local master (docs/scale.md)"
        ) from None


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
