"""Synthetic histories: a correct eos run written as formulas, with anomalies planted on purpose.

Every check must be shown failing on the anomaly it claims to catch and passing on a correct
history, with exact counts. Real runs cannot plant anomalies with known counts, so this module
writes histories that are correct by construction and then breaks them in precisely counted
ways. Every regular event is a formula of a record or transaction number, so one Spark plan
(spark.range + SQL expressions) writes 10M-record histories straight to Parquet, and small
ones are the same plan collected into JSON-lines files, one per writer as a real run has them.

The correct run is eoschaos.testing.model's (RunShape).
Anomalies that need extra records (lost, duplicate, phantom, duplicate-input, zombie-write) are
written by extra transactions after the last slot; unseen records are sent last, at the end
of the last input partition, and never consumed (the group's committed offset stays at the
first); the ones about what a reader saw edit the observer's reads of chosen slots, one slot
per planted anomaly so that plants never interact.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from eoschaos.checkers.history_io import event_schema, write_parquet
from eoschaos.contract.capabilities import Capabilities
from eoschaos.contract.checks import CATALOGUE, GROUP_OFFSETS, INT_POLL_SKIP
from eoschaos.contract.history import (
    CONSUMER_OFFSETS_TOPIC,
    END_AGGREGATES,
    END_STATE,
    FINAL_COMMITTED,
    FINAL_UNCOMMITTED,
    HUNG_ERROR_PREFIX,
    INSTANCE_KIND,
    LOG_ABORTED,
    LOG_BATCH,
    LOG_BATCH_KIND,
    LOG_BATCHES,
    NEMESIS,
    OBSERVER,
    OFFSET_COMMIT,
    SEEDER,
    SUPERVISOR,
    TRANSACTION_STATE_TOPIC,
    TXN_STATE,
)
from eoschaos.contract.rundir import HISTORY_DIR, PARQUET_DIR, write_manifest
from eoschaos.testing.model import RunShape, choose, div

INPUT_TOPIC = "input-topic"
PREPARED_AT = 0.55  # fraction of the slot: inside the client's commit or abort call
# With broker_logs, fractions of the slot too: the transaction's first coordinator record (just
# after begin returned), its output batches (when produce returned), its markers and the
# coordinator's Complete record (after the decision, before the client's call returns).
ONGOING_AT, BATCH_AT, MARKER_AT, COMPLETED_AT = 0.05, 0.1, 0.57, 0.58
PRODUCER_ID_BASE = 1000  # instance i's producer id
OUTPUT_TOPIC = "output-topic"
GROUP = "eoschaos-group"
SYNTHETIC_WORKLOAD = "synthetic"  # judged as a kip447 run, whose capabilities it has
FAILURE_EXIT = 1  # the status with which the synthetic workload's instances say they failed
ZOMBIE_PRODUCER_ID = 999  # the planted commit's producer: no instance's (PRODUCER_ID_BASE + i)
JSONL_MAX_RECORDS = 200_000  # above this, write Parquet: collecting to the driver stops being cheap
SCAN_STEP = 1e-6  # seconds between two records of one partition in a final scan
MS_NUDGE = 0.01  # ms: above a float's error at epoch times (0.24 us), below the model's steps


@dataclass(frozen=True)
class Plants:
    """How many of each anomaly to plant; each is caught by the check named in PLANT_CHECKS."""

    lost: int = 0
    duplicate: int = 0
    phantom: int = 0
    duplicate_input: int = 0
    aborted_read: int = 0
    uncommitted_read: int = 0
    fractured_read: int = 0
    order_backwards: int = 0
    order_skip: int = 0
    inconsistent_offsets: int = 0
    zombie_write: int = 0
    open_transaction: int = 0
    lso_behind: int = 0
    group_offsets_behind: int = 0
    unseen: int = 0  # input records at the end of the last partition, never consumed
    nonmonotonic_send: int = 0  # pairs of input records, each pair's second one sent first
    # Inside one transaction: its last two records' sources swapped (read 0..n-3, n-1, n-2),
    # its first two sends to output partition 0 landed swapped, and a transaction's last
    # source swapped with the first of the next slot on its input partition (each skips one).
    int_poll_reorder: int = 0
    int_send_reorder: int = 0
    int_poll_skip: int = 0
    aggregate_mismatch: int = 0
    stale_commit: int = 0
    input_committed_twice: int = 0
    # incarnations that exited with the workload's failure status (FAILURE_EXIT) before their
    # restart: an instance whose client died of a fatal error
    instance_failure: int = 0
    # Not anomalies, counted informationally: attempts fencing rejected (ILLEGAL_GENERATION),
    # and client calls that blocked past their timeout until the process gave up (hung).
    fenced_attempts: int = 0
    hung_calls: int = 0

    def expected(self, shape: RunShape) -> dict[str, int]:
        """Check name -> the count it must report. A skipped slot is txn_size skipped records."""
        expected: dict[str, int] = {}
        for plant, check in [*CAUGHT_BY, *ALSO_CAUGHT_BY]:
            count = getattr(self, plant) * PER_PLANT.get(plant, 1)
            if plant == "order_skip":
                count *= shape.txn_size
            if plant == "unseen" and check == GROUP_OFFSETS.name:
                # counted by partition: the unseen records' one, unless already behind
                count = int(bool(self.unseen) and self.group_offsets_behind < shape.partitions)
            if count:
                expected[check] = expected.get(check, 0) + count
        return expected


# Each plant and the check that must catch it, from the checks' specs (contract.checks).
PLANT_CHECKS = {plant: spec.name for spec in CATALOGUE.values() for plant in spec.plants}
# Every check that must catch a plant: its own, and the checks its own implies (a read of an
# aborted record is also an offset the final committed scan skipped).
CAUGHT_BY = [
    (plant, name)
    for spec in CATALOGUE.values()
    for plant in spec.plants
    for name in (spec.name, *spec.implies)
]
# Plants that another check catches too, in Jepsen's terms: a transaction that reads 0, 1, 3,
# 2 stepped from 1 over 2 (int-poll-skip) before it went back (int-nonmonotonic-poll).
ALSO_CAUGHT_BY = [("int_poll_reorder", INT_POLL_SKIP.name)]
# Anomalies one plant makes: a swap of sources between two slots makes each of them skip one.
PER_PLANT = {"int_poll_skip": 2}
TRANSACTIONAL_PLANTS = (
    "aborted_read",
    "uncommitted_read",
    "fractured_read",
    "zombie_write",
    "open_transaction",
    "stale_commit",
    "fenced_attempts",
    "hung_calls",
    "int_poll_reorder",
    "int_send_reorder",
    "int_poll_skip",
)


@dataclass
class SyntheticRun:
    """What was written: the run dir, the counts each check must report, and the planted records."""

    run_dir: Path
    shape: RunShape
    plants: Plants
    expected: dict[str, int]
    planted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass
class _Targets:
    """The slots (k) and records (r = k * S + j) each observer plant edits."""

    fractured: int = 0  # slots 0..n-1 lose their records on output partition 0
    aborted_read: list[int] = field(default_factory=list)  # r of aborted attempts
    uncommitted_read: list[int] = field(default_factory=list)
    backwards: list[int] = field(default_factory=list)  # r of j=0; swapped with j=Q
    skip: list[int] = field(default_factory=list)  # k: the observer misses the whole slot
    inconsistent: list[int] = field(default_factory=list)
    duplicate_ids: list[int] = field(default_factory=list)
    duplicate_input_ids: list[int] = field(default_factory=list)
    poll_reorder: list[int] = field(default_factory=list)  # k: its last two sources swapped
    send_reorder: list[int] = field(default_factory=list)  # k: its sends j=0 and j=Q swapped
    poll_skip: list[int] = field(default_factory=list)  # k: last source swapped with k+P's first


def generate(
    spark: SparkSession,
    run_dir: Path,
    shape: RunShape | None = None,
    plants: Plants | None = None,
    *,
    seed: int = 0,
    parquet: bool | None = None,
) -> SyntheticRun:
    """Write a synthetic run dir (run.json + history) and say what the checks must report.

    parquet=None picks JSON lines for small shapes and Parquet (history.parquet) for large ones.
    """
    shape = shape or RunShape()
    plants = plants or Plants()
    if shape.mode == "alos" and any(getattr(plants, name) for name in TRANSACTIONAL_PLANTS):
        raise ValueError(f"alos histories have no transactions to plant {TRANSACTIONAL_PLANTS}")
    if shape.broker_logs and plants != Plants():
        raise ValueError("broker_logs are written for the regular attempts only: plant nothing")
    if (plants.order_backwards or plants.int_send_reorder) and shape.per_partition < 2:
        raise ValueError("order_backwards swaps two records of one slot: per_partition >= 2")
    if plants.int_poll_reorder and shape.txn_size < 3:
        raise ValueError("int_poll_reorder swaps the last two of 3 or more sources: txn_size >= 3")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    targets = _choose_targets(shape, plants, random.Random(seed))
    tail = _Tail(shape, plants, targets)
    events = _regular_events(spark, shape, targets, tail.end_time).unionByName(
        tail.dataframe(spark)
    )
    if parquet is None:
        parquet = shape.records > JSONL_MAX_RECORDS
    if parquet:
        # generated rows mix writers in every task: group them as a run's files would be
        write_parquet(events.repartition("kind", "process"), run_dir / PARQUET_DIR)
    else:
        _write_jsonl(events, run_dir / HISTORY_DIR, shape)
    write_manifest(run_dir, _manifest(shape, seed, tail.end_time))
    return SyntheticRun(run_dir, shape, plants, plants.expected(shape), tail.planted(targets))


def _choose_targets(shape: RunShape, plants: Plants, rng: random.Random) -> _Targets:
    """One slot per observer plant, none on the first or last slots so reads surround each."""
    if plants.fractured_read >= shape.slots // 2:
        raise ValueError("fractured_read must be below half the slots")
    pool = list(range(plants.fractured_read + 1, shape.slots - 1))
    rng.shuffle(pool)
    aborting = [k for k in pool if shape.aborts(k)]
    if plants.aborted_read > len(aborting):
        raise ValueError("not enough aborted attempts for aborted_read: use more records")
    aborted = aborting[: plants.aborted_read]
    rest = [k for k in pool if k not in set(aborted)]
    wanted = (
        plants.uncommitted_read
        + plants.order_backwards
        + plants.order_skip
        + plants.inconsistent_offsets
        + plants.duplicate
        + plants.duplicate_input
        + plants.int_poll_reorder
        + plants.int_send_reorder
        + 2 * plants.int_poll_skip
    )
    if wanted > len(rest):
        raise ValueError(f"{wanted} planted slots do not fit in {len(rest)}: use more records")

    def take(n: int) -> list[int]:
        chosen, rest[:n] = rest[:n], []
        return chosen

    def take_with_next(n: int) -> list[int]:
        """n slots k whose next slot on the same input partition, k + P, is free too."""
        chosen = []
        for k in sorted(rest):
            if len(chosen) < n and k in rest and k + shape.partitions in rest:
                chosen.append(k)
                rest.remove(k)
                rest.remove(k + shape.partitions)
        if len(chosen) < n:
            raise ValueError("int_poll_skip needs free pairs of slots: use more records")
        return chosen

    size = shape.txn_size
    return _Targets(
        fractured=plants.fractured_read,
        aborted_read=[k * size for k in aborted],
        uncommitted_read=[k * size for k in take(plants.uncommitted_read)],
        backwards=[k * size for k in take(plants.order_backwards)],
        skip=take(plants.order_skip),
        inconsistent=[k * size for k in take(plants.inconsistent_offsets)],
        duplicate_ids=[shape.input_id(k, 1 % size) for k in take(plants.duplicate)],
        duplicate_input_ids=[shape.input_id(k, 0) for k in take(plants.duplicate_input)],
        poll_reorder=take(plants.int_poll_reorder),
        send_reorder=take(plants.int_send_reorder),
        poll_skip=take_with_next(plants.int_poll_skip),
    )


def _member(column: str, values: list[int]) -> Column:
    return F.col(column).isin(values) if values else F.lit(False)


def _conform(df: DataFrame, spark_schema: StructType) -> DataFrame:
    """Every history column in schema order; the ones a part does not set are typed nulls."""
    return df.select(
        *[
            (F.col(f.name) if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in spark_schema.fields
        ]
    )


def _regular_events(
    spark: SparkSession, shape: RunShape, targets: _Targets, end_time: float
) -> DataFrame:
    schema = event_schema()
    parts = [
        _sends(spark, shape),
        _input_scans(spark, shape, end_time),
        _transactions(spark, shape),
        _output_reads(spark, shape, targets, end_time),
    ]
    if shape.broker_logs:
        parts += [_coordinator_records(spark, shape), _output_batches(spark, shape)]
    elif shape.mode == "eos":
        parts.append(_coordinator_states(spark, shape))
    parts.append(_offset_commits(spark, shape))
    result = _conform(parts[0], schema)
    for part in parts[1:]:
        result = result.unionByName(_conform(part, schema))
    return result


def _sends(spark: SparkSession, shape: RunShape) -> DataFrame:
    step = shape.slot_seconds / shape.txn_size
    return (
        spark.range(shape.records)
        .select(F.col("id").alias("i"), F.explode(F.array(F.lit("invoke"), F.lit("ok"))))
        .selectExpr(
            "'send' AS kind",
            "col AS type",
            "'send' AS f",
            "'seeder' AS process",
            f"{shape.start} + i * {step} + IF(col = 'ok', {step / 2}, 0) AS time",
            "i AS id",
            f"'{INPUT_TOPIC}' AS topic",
            f"i % {shape.partitions} AS partition",
            f"IF(col = 'ok', i div {shape.partitions}, NULL) AS offset",
        )
    )


def _scan_start(end_time: float, reader: str) -> float:
    return end_time + (1.0 if reader == FINAL_COMMITTED else 20.0)


def _input_scans(spark: SparkSession, shape: RunShape, end_time: float) -> DataFrame:
    p = shape.partitions
    readers = F.array(
        *[
            F.struct(F.lit(name).alias("reader"), F.lit(_scan_start(end_time, name)).alias("t0"))
            for name in (FINAL_COMMITTED, FINAL_UNCOMMITTED)
        ]
    )
    return (
        spark.range(shape.records)
        .select(F.col("id").alias("i"), F.explode(readers).alias("r"))
        .selectExpr(
            "'read' AS kind",
            "'ok' AS type",
            "'poll' AS f",
            "r.reader AS process",
            f"r.t0 + (i div {p}) * {SCAN_STEP} AS time",
            "i AS id",
            f"'{INPUT_TOPIC}' AS topic",
            f"i % {p} AS partition",
            f"i div {p} AS offset",
            "IF(r.reader = 'final-committed', 'read_committed', 'read_uncommitted') AS isolation",
        )
    )


def _attempts(spark: SparkSession, shape: RunShape, rows: int, per_slot: int) -> DataFrame:
    """Columns k, j (record in slot when per_slot > 1), u, aborted: one row per attempt."""
    k, j = F.col("k"), F.col("j")
    base = spark.range(rows).select(
        div(F.col("id"), per_slot).alias("k"), (F.col("id") % per_slot).alias("j")
    )
    attempts = choose(shape.aborts(k), F.array(F.lit(True), F.lit(False)), F.array(F.lit(False)))
    return (
        base.select("k", "j", F.explode(attempts).alias("aborted"))
        .withColumn("u", shape.attempt(k, F.col("aborted")))
        .withColumn("r", k * per_slot + j)
    )


def _txn_columns(shape: RunShape) -> list[Column]:
    k, instance = F.col("k"), shape.instance(F.col("k"))
    txn_id = F.concat(F.lit("eoschaos-txn-"), instance) if shape.mode == "eos" else F.lit(None)
    return [
        instance.alias("instance"),
        F.lit(1).alias("incarnation"),
        txn_id.alias("txn_id"),
        shape.txn_seq(k, F.col("aborted")).alias("txn_seq"),
        shape.generation(k).alias("generation"),
    ]


# (f, type, fraction of the slot, for which outcome) of one transaction attempt.
EOS_STEPS = [
    ("begin", "invoke", 0.0, "any"),
    ("begin", "ok", 0.05, "any"),
    ("produce", "ok", 0.1, "any"),
    ("send-offsets", "invoke", 0.2, "any"),
    ("send-offsets", "ok", 0.3, "any"),
    ("commit", "invoke", 0.5, "commit"),
    ("commit", "ok", 0.6, "commit"),
    ("abort", "invoke", 0.5, "abort"),
    ("abort", "ok", 0.6, "abort"),
]
OFFSET_STEPS = ("produce", "send-offsets", "commit-offsets")  # the steps that carry offsets
ALOS_STEPS = [
    ("produce", "ok", 0.1, "any"),
    ("commit-offsets", "invoke", 0.5, "any"),
    ("commit-offsets", "ok", 0.6, "any"),
]


def _transactions(spark: SparkSession, shape: RunShape) -> DataFrame:
    steps = EOS_STEPS if shape.mode == "eos" else ALOS_STEPS
    step_array = F.array(
        *[
            F.struct(
                F.lit(f).alias("f"),
                F.lit(t).alias("type"),
                F.lit(dt).alias("dt"),
                F.lit(outcome).alias("outcome"),
            )
            for f, t, dt, outcome in steps
        ]
    )
    k, f = F.col("k"), F.col("s.f")
    # the position after the slot's records: what its offset commit says it consumed
    consumed = F.array(
        F.struct(
            shape.input_partition(k).alias("partition"),
            shape.input_offset(k, shape.txn_size).alias("offset"),
        )
    )
    no_txn = shape.mode != "eos"
    return (
        _attempts(spark, shape, shape.slots, 1)
        .select("*", F.explode(step_array).alias("s"))
        .filter("s.outcome = 'any' OR (s.outcome = 'abort') = aborted")
        .select(
            F.lit("txn").alias("kind"),
            F.col("s.type").alias("type"),
            f.alias("f"),
            F.concat(F.lit("processor-"), shape.instance(k), F.lit(".1")).alias("process"),
            (shape.slot_time(F.col("u")) + F.col("s.dt") * shape.slot_seconds).alias("time"),
            *_txn_columns(shape),
            F.when(f == "begin", F.when(F.col("aborted"), "abort").otherwise("commit"))
            .when(F.lit(no_txn) & (f == "produce"), "none")
            .alias("fate"),
            F.when(f == "produce", F.lit(shape.txn_size)).alias("count"),
            F.when(f.isin(*OFFSET_STEPS), consumed).alias("offsets"),
        )
    )


def _coordinator_state(state: str) -> str:
    """The params of a txn-state row as the run records them (docs/history.md)."""
    return json.dumps({"producer_epoch": 0, "state": state, "node": 1}, sort_keys=True)


def _coordinator_states(spark: SparkSession, shape: RunShape) -> DataFrame:
    """The coordinator's PrepareCommit or PrepareAbort of each attempt, inside its call."""
    return _attempts(spark, shape, shape.slots, 1).select(
        F.lit(LOG_BATCH_KIND).alias("kind"),
        F.lit("ok").alias("type"),
        F.lit(TXN_STATE).alias("f"),
        F.lit(LOG_BATCHES).alias("process"),
        _slot_time(shape, PREPARED_AT).alias("time"),
        F.concat(F.lit("eoschaos-txn-"), shape.instance(F.col("k"))).alias("txn_id"),
        F.lit(TRANSACTION_STATE_TOPIC).alias("topic"),
        F.lit(0).alias("partition"),
        F.col("u").alias("offset"),
        F.when(F.col("aborted"), _coordinator_state("PrepareAbort"))
        .otherwise(_coordinator_state("PrepareCommit"))
        .alias("params"),
    )


def _slot_time(shape: RunShape, at: float | Column) -> Column:
    """The time at fraction `at` of attempt u's slot."""
    return shape.slot_time(F.col("u")) + at * shape.slot_seconds


def _ms(shape: RunShape, at: float) -> Column:
    """_slot_time in whole milliseconds, as the brokers stamp their records (a clock truncates;
    the nudge keeps a time stated in decimals, 0.081 s, from truncating to 80 ms in binary)."""
    return F.floor(_slot_time(shape, at) * 1000 + MS_NUDGE)


def _log_row(f: Column, time: Column, topic: str, partition: Column, offset: Column) -> list:
    """The columns every row of the `log-batches` writer has."""
    return [
        F.lit(LOG_BATCH_KIND).alias("kind"),
        F.lit("ok").alias("type"),
        f.alias("f"),
        F.lit(LOG_BATCHES).alias("process"),
        time.alias("time"),
        F.lit(topic).alias("topic"),
        partition.cast("int").alias("partition"),
        offset.cast("long").alias("offset"),
    ]


def _coordinator_records(spark: SparkSession, shape: RunShape) -> DataFrame:
    """The coordinator's whole record of every attempt (Ongoing, its decision, Complete), after
    one session (Empty) per instance, as `__transaction_state` holds them (broker_logs)."""
    partitions = F.array(
        *[F.lit(f"{OUTPUT_TOPIC}-{q}") for q in range(shape.output_partitions)],
        F.lit(f"{CONSUMER_OFFSETS_TOPIC}-0"),
    )
    decision = F.when(F.col("aborted"), "Abort").otherwise("Commit")
    steps = [
        (ONGOING_AT, F.lit("Ongoing")),
        (PREPARED_AT, F.concat(F.lit("Prepare"), decision)),
        (COMPLETED_AT, F.concat(F.lit("Complete"), decision)),
    ]
    step = F.array(
        *[
            F.struct(F.lit(n).alias("n"), F.lit(at).alias("at"), state.alias("state"))
            for n, (at, state) in enumerate(steps)
        ]
    )
    attempts = (
        _attempts(spark, shape, shape.slots, 1)
        .select("*", F.explode(step).alias("s"))
        .select(
            shape.instance(F.col("k")).alias("instance"),
            _slot_time(shape, F.col("s.at")).alias("time"),
            F.col("s.state").alias("state"),
            (shape.instances + 3 * F.col("u") + F.col("s.n")).alias("offset"),
        )
    )
    sessions = spark.range(shape.instances).select(
        F.col("id").cast("int").alias("instance"),
        F.lit(shape.start).alias("time"),
        F.lit("Empty").alias("state"),
        F.col("id").alias("offset"),
    )
    params = F.struct(
        (PRODUCER_ID_BASE + F.col("instance")).alias("producer_id"),
        F.lit(0).alias("producer_epoch"),
        F.col("state"),
        F.when(F.col("state") != "Empty", partitions).alias("partitions"),
        F.expr("CAST(time * 1000 AS BIGINT)").alias("last_update_ms"),
        F.lit(1).alias("node"),
    )
    return attempts.unionByName(sessions).select(
        *_log_row(
            F.lit(TXN_STATE), F.col("time"), TRANSACTION_STATE_TOPIC, F.lit(0), F.col("offset")
        ),
        F.concat(F.lit("eoschaos-txn-"), F.col("instance")).alias("txn_id"),
        F.to_json(params).alias("params"),
    )


def _output_batches(spark: SparkSession, shape: RunShape) -> DataFrame:
    """Each attempt's output as the brokers wrote it (broker_logs): per output partition one
    batch of its records and its marker, and for an aborted attempt the `.txnindex` range."""
    m = shape.per_partition
    base = F.col("u") * (m + 1)
    kinds = F.array(F.lit("data"), F.lit("marker"), F.when(F.col("aborted"), F.lit("aborted")))
    rows = (
        _attempts(spark, shape, shape.slots, 1)
        .select("*", F.explode(F.sequence(F.lit(0), F.lit(shape.output_partitions - 1))).alias("q"))
        .select("*", F.explode(F.array_compact(kinds)).alias("row"))
    )
    data, marker = F.col("row") == "data", F.col("row") == "marker"
    producer_id = PRODUCER_ID_BASE + shape.instance(F.col("k"))
    batch = F.struct(
        F.when(data, base + m - 1).otherwise(base + m).alias("last_offset"),
        producer_id.alias("producer_id"),
        F.lit(0).alias("producer_epoch"),
        F.when(data, F.col("u") * m).otherwise(F.lit(-1)).alias("base_sequence"),
        F.when(data, F.col("u") * m + m - 1).otherwise(F.lit(-1)).alias("last_sequence"),
        F.lit(True).alias("transactional"),
        marker.alias("control"),
        F.when(data, _ms(shape, BATCH_AT)).otherwise(_ms(shape, MARKER_AT)).alias("create_time"),
        F.lit(1).alias("node"),
    )
    aborted_range = F.struct(
        producer_id.alias("producer_id"), (base + m).alias("last_offset"), F.lit(1).alias("node")
    )
    return rows.select(
        *_log_row(
            F.when(F.col("row") == "aborted", LOG_ABORTED).otherwise(LOG_BATCH),
            F.when(data, _slot_time(shape, BATCH_AT)).otherwise(_slot_time(shape, MARKER_AT)),
            OUTPUT_TOPIC,
            F.col("q"),
            F.when(marker, base + m).otherwise(base),
        ),
        F.when(marker, 1).otherwise(F.when(data, m)).alias("count"),
        F.when(F.col("row") == "aborted", F.to_json(aborted_range))
        .otherwise(F.to_json(batch))
        .alias("params"),
    )


def _offset_commit(
    eos: bool, log_offset: Any, producer_id: Any, marker: Any, marker_time: Any = None
) -> dict[str, Any]:
    """The params of an offset-commit row as the run records them (docs/history.md): values,
    or Columns for the bulk rows. In eos the commit is its producer's, resolved by the marker
    that follows it in the log (written at `marker_time`, ms, where the logs are written); in
    alos a plain one."""
    params = {
        "group": GROUP,
        "log_partition": 0,
        "log_offset": log_offset,
        "producer_id": producer_id,
        "producer_epoch": 0,
        "transactional": eos,
    }
    if eos:
        params |= {"marker": marker, "marker_offset": log_offset + 1}
    if marker_time is not None:
        params["marker_time"] = marker_time
    return params


def _offset_commits(spark: SparkSession, shape: RunShape) -> DataFrame:
    """Each attempt's offset commit as the group coordinator logged it: in eos its producer's
    transactional commit resolved by the attempt's marker, in alos a plain commit."""
    k = F.col("k")
    params = _offset_commit(
        shape.mode == "eos",
        2 * F.col("u"),
        PRODUCER_ID_BASE + shape.instance(k),
        F.when(F.col("aborted"), "ABORT").otherwise("COMMIT"),
        _ms(shape, MARKER_AT) if shape.broker_logs else None,
    )
    as_json = F.to_json(
        F.struct(*[(v if isinstance(v, Column) else F.lit(v)).alias(k) for k, v in params.items()])
    )
    return _attempts(spark, shape, shape.slots, 1).select(
        F.lit(LOG_BATCH_KIND).alias("kind"),
        F.lit("ok").alias("type"),
        F.lit(OFFSET_COMMIT).alias("f"),
        F.lit(LOG_BATCHES).alias("process"),
        _slot_time(shape, 0.3).alias("time"),
        F.lit(INPUT_TOPIC).alias("topic"),
        shape.input_partition(k).alias("partition"),
        shape.input_offset(k, shape.txn_size).alias("offset"),
        as_json.alias("params"),
    )


def _observer_time(shape: RunShape, record: Column) -> Column:
    """When the observer reads record `record` of attempt u: just after the attempt's commit
    (observer_lag later for a slow reader: every read is delayed alike, so none reorders)."""
    span = 0.25 * shape.slot_seconds / shape.txn_size
    return _slot_time(shape, 0.7) + record * span + shape.observer_lag


def _output_reads(
    spark: SparkSession, shape: RunShape, targets: _Targets, end_time: float
) -> DataFrame:
    q = shape.output_partitions
    attempts = _attempts(spark, shape, shape.slots * shape.txn_size, shape.txn_size)
    observed = (
        ~F.col("aborted")
        & ~_member("k", targets.skip)
        & ~((F.col("k") < targets.fractured) & (F.col("j") % q == 0))
    ) | (F.col("aborted") & _member("r", targets.aborted_read))
    readers = F.array_compact(
        F.array(
            F.when(observed, F.lit(OBSERVER)),
            F.when(~F.col("aborted"), F.lit(FINAL_COMMITTED)),
            F.lit(FINAL_UNCOMMITTED),
        )
    )
    # Backwards: the observer reads j=0 and j=Q (consecutive offsets of partition 0) swapped.
    swapped = F.when(_member("r", targets.backwards), F.col("j") + q).when(
        _member("r", [r + q for r in targets.backwards]), F.col("j") - q
    )
    # int-* plants: which slot's record each record copies (src_k, src_j) and its send place
    last, k, j, p = shape.txn_size - 1, F.col("k"), F.col("j"), shape.partitions
    reordered, send_swapped = _member("k", targets.poll_reorder), _member("k", targets.send_reorder)
    skips_out = _member("k", targets.poll_skip) & (j == last)
    skips_in = _member("k", [x + p for x in targets.poll_skip]) & (j == 0)
    src_k = F.when(skips_out, k + p).when(skips_in, k - p).otherwise(k)
    src_j = (
        F.when(reordered & (j >= last - 1), 2 * last - 1 - j)
        .when(send_swapped & (j == 0), F.lit(q))
        .when(send_swapped & (j == q), F.lit(0))
        .when(skips_out, F.lit(0))
        .when(skips_in, F.lit(last))
        .otherwise(j)
    )
    src = F.col("src_k"), F.col("src_j")
    early = _member("r", targets.uncommitted_read)
    observer_time = F.when(early, _slot_time(shape, 0.4)).otherwise(
        _observer_time(shape, F.col("read_j"))
    )
    final_time = F.expr(f"{_scan_start(end_time, FINAL_COMMITTED)} + offset * {SCAN_STEP}")
    reference_time = F.expr(f"{_scan_start(end_time, FINAL_UNCOMMITTED)} + offset * {SCAN_STEP}")
    id_column = shape.input_id(*src)
    return (
        attempts.select("*", F.explode(readers).alias("process"))
        .withColumn("read_j", F.coalesce(swapped, F.col("j")))
        .withColumn("src_k", src_k)
        .withColumn("src_j", src_j)
        .withColumn("offset", shape.output_offset(F.col("u"), j))
        .select(
            F.lit("read").alias("kind"),
            F.lit("ok").alias("type"),
            F.lit("poll").alias("f"),
            "process",
            F.when(F.col("process") == OBSERVER, observer_time)
            .when(F.col("process") == FINAL_COMMITTED, final_time)
            .otherwise(reference_time)
            .alias("time"),
            F.when(
                (F.col("process") == OBSERVER) & _member("r", targets.inconsistent), -1 - id_column
            )
            .otherwise(id_column)
            .alias("id"),
            F.lit(OUTPUT_TOPIC).alias("topic"),
            (F.col("j") % q).alias("partition"),
            "offset",
            shape.input_partition(k).alias("src_partition"),
            shape.input_offset(*src).alias("src_offset"),
            *_txn_columns(shape),
            F.lit(shape.txn_size).alias("txn_size"),
            F.when(send_swapped, F.col("src_j"))
            .otherwise(F.col("j"))
            .cast("int")
            .alias("txn_index")
            if shape.mode == "eos"
            else F.lit(None).cast("int").alias("txn_index"),
            F.expr("IF(aborted, 'abort', 'commit')" if shape.mode == "eos" else "'none'").alias(
                "fate"
            ),
            F.when(F.col("process") == FINAL_UNCOMMITTED, F.lit("read_uncommitted"))
            .otherwise(F.lit("read_committed"))
            .alias("isolation"),
        )
    )


class _Tail:
    """Everything after the last slot, built row by row (it is small): extra transactions for
    the record-level plants, zombies, the small bookkeeping writers and the end state."""

    def __init__(self, shape: RunShape, plants: Plants, targets: _Targets) -> None:
        self.shape, self.plants, self.targets = shape, plants, targets
        self.rows: list[dict[str, Any]] = []
        self.input_end = [shape.records // shape.partitions] * shape.partitions
        self.output_end = [shape.attempts * (shape.per_partition + 1)] * shape.output_partitions
        self.next_id = shape.records
        self.next_seq = 2 * (shape.slots // shape.instances + 1) + 1
        self.lost_ids: list[int] = []
        self.extra_input_ids: list[int] = []  # input records beyond the model's 0..N-1
        self.phantom_ids: list[int] = []
        self.zombies: list[dict[str, Any]] = []
        self.stale_commits: list[dict[str, Any]] = []
        self.u = shape.attempts  # next slot in time
        self._bookkeeping()
        self._extra_transaction()
        for z in range(plants.zombie_write):
            self._zombie(z)
        refused = [
            ("send-offsets", "fail", {"error": "ILLEGAL_GENERATION"}),
            ("abort", "invoke", {}),
            ("abort", "ok", {}),
        ]
        for _ in range(plants.fenced_attempts):
            self._stale_attempt(refused)
        hung = [("send-offsets", "info", {"error": f"{HUNG_ERROR_PREFIX} send-offsets"})]
        for _ in range(plants.hung_calls):
            self._stale_attempt(hung)
        for _ in range(plants.stale_commit):
            self._stale_commit()
        self.recommitted: list[dict[str, int]] = []
        for n in range(plants.input_committed_twice):
            self._input_committed_twice(n)
        self._last_records_delivered()
        self.sent_out_of_order: list[int] = []
        self._sends_reordered()
        self.unseen: list[dict[str, int]] = []
        for _ in range(plants.unseen):
            id_ = self._fresh_id()
            place = self._input_record(id_, shape.partitions - 1, sent=True)
            self.unseen.append({"id": id_, **place})
        self.end_time = shape.slot_time(self.u + 1)
        self._end_state()

    def _event(self, kind: str, type_: str, f: str, process: str, time: float, **more: Any) -> None:
        self.rows.append(
            {"kind": kind, "type": type_, "f": f, "process": process, "time": time, **more}
        )

    def _bookkeeping(self) -> None:
        s = self.shape
        first_gen2 = s.slot_time(s.attempt(s.slots // 2)) - 0.1 * s.slot_seconds
        for i in range(s.instances):
            proc = f"processor-{i}.1"
            owned = [p for p in range(s.partitions) if p % s.instances == i]
            ident = {"instance": i, "incarnation": 1}
            self._event("instance", "ok", "start", SUPERVISOR, s.start, **ident)
            if s.mode == "eos":
                ident["txn_id"] = f"eoschaos-txn-{i}"
                for t in ("invoke", "ok"):
                    self._event("txn", t, "init", proc, s.start + 0.01, **ident)
            for gen, at in ((1, s.start + 0.02), (2, first_gen2)):
                self._event("rebalance", "ok", "assign", proc, at, partitions=owned, generation=gen)
        killed, healed = s.slot_time(s.attempts / 3), s.slot_time(2 * s.attempts / 3)
        self._event("fault", "invoke", "kill", NEMESIS, killed, target="broker-2", params="{}")
        self._event("fault", "ok", "kill", NEMESIS, healed, target="broker-2")

    def _input_record(
        self, id_: int, partition: int, sent: bool, sent_later: float = 0.0
    ) -> dict[str, int]:
        offset = self.input_end[partition]
        self.input_end[partition] += 1
        self.extra_input_ids.append(id_)
        t = self.shape.slot_time(self.u - 0.5) + sent_later
        if sent:
            place = {"id": id_, "topic": INPUT_TOPIC, "partition": partition}
            self._event("send", "invoke", "send", SEEDER, t, **place)
            self._event("send", "ok", "send", SEEDER, t + 0.001, **place, offset=offset)
        for reader in (FINAL_COMMITTED, FINAL_UNCOMMITTED):
            self._scan(reader, INPUT_TOPIC, partition, offset, id=id_)
        return {"partition": partition, "offset": offset}

    def _scan(self, reader: str, topic: str, partition: int, offset: int, **more: Any) -> None:
        isolation = "read_uncommitted" if reader == FINAL_UNCOMMITTED else "read_committed"
        # Final scans run after end_time, which is not known yet: patched in dataframe().
        self._event(
            "read",
            "ok",
            "poll",
            reader,
            offset * SCAN_STEP,
            topic=topic,
            partition=partition,
            offset=offset,
            isolation=isolation,
            **more,
        )

    def _last_records_delivered(self) -> None:
        """One committed transaction consuming and copying a fresh record at the end of each
        partition that group_offsets_behind leaves uncommitted: the group stops one record
        short of a record that was delivered, which is behind but neither lost nor unseen."""
        s, behind = self.shape, self.plants.group_offsets_behind
        if behind > s.partitions:
            raise ValueError(f"group_offsets_behind must be <= {s.partitions} partitions")
        if not behind:
            return
        ids = [self._fresh_id() for _ in range(behind)]
        consumed = [self._input_record(id_, p, sent=True) for p, id_ in enumerate(ids)]
        outputs = [{"id": id_, **_source(c)} for id_, c in zip(ids, consumed, strict=True)]
        self._transaction(0, s.generation(s.slots - 1), consumed, outputs)

    def _sends_reordered(self) -> None:
        """Pairs of input records in one partition whose send calls came in the other order:
        the second record of each pair was sent first, so the first one, sent after it,
        landed at a lower offset. One committed transaction copies them all."""
        pairs = self.plants.nonmonotonic_send
        if not pairs:
            return
        partition, consumed, outputs = 0, [], []
        for pair in range(pairs):
            for sent_later in (pair * 0.001 + 0.0002, pair * 0.001 + 0.0001):
                id_ = self._fresh_id()
                consumed.append(self._input_record(id_, partition, True, sent_later))
                outputs.append({"id": id_, **_source(consumed[-1])})
            self.sent_out_of_order.append(consumed[-2]["offset"])
        self._transaction(0, self.shape.generation(self.shape.slots - 1), consumed, outputs)

    def _fresh_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def _extra_transaction(self) -> None:
        """One committed transaction after the last slot carrying lost, duplicate, phantom and
        duplicate-input: it consumes the new input records and writes the odd outputs."""
        s, plants = self.shape, self.plants
        if not (plants.lost or plants.duplicate or plants.phantom or plants.duplicate_input):
            return
        consumed = []
        for x in range(plants.lost):
            self.lost_ids.append(self._fresh_id())
            consumed.append(self._input_record(self.lost_ids[-1], x % s.partitions, sent=True))
        outputs = [
            {"id": id_, "src_partition": id_ % s.partitions, "src_offset": id_ // s.partitions}
            for id_ in self.targets.duplicate_ids
        ]
        for id_ in self.targets.duplicate_input_ids:
            # The pipeline is not at fault: it reflects the second copy once, like any record.
            copy = self._input_record(id_, id_ % s.partitions, sent=False)
            consumed.append(copy)
            outputs.append(
                {"id": id_, "src_partition": copy["partition"], "src_offset": copy["offset"]}
            )
        for _ in range(plants.phantom):
            self.phantom_ids.append(self._fresh_id())
            outputs.append({"id": self.phantom_ids[-1], "src_partition": 0, "src_offset": 10**12})
        self._transaction(0, s.generation(s.slots - 1), consumed, outputs)

    def _zombie(self, z: int) -> None:
        """Generation 1's owner of a partition commits after generation 2 committed there."""
        s = self.shape
        partition = z % s.partitions
        id_ = self._fresh_id()
        source = self._input_record(id_, partition, sent=True)
        output = {"id": id_, "src_partition": partition, "src_offset": source["offset"]}
        seq = self._transaction(partition % s.instances, 1, [source], [output])
        self.zombies.append({"instance": partition % s.instances, "txn_seq": seq})

    def _stale_attempt(self, outcome: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Instance 0 begins a transaction under a stale generation and sends its offsets;
        `outcome` is what followed (refused and aborted, or a call that never returned)."""
        s = self.shape
        seq, self.next_seq = self.next_seq, self.next_seq + 2
        txn = {"instance": 0, "incarnation": 1, "txn_id": "eoschaos-txn-0", "txn_seq": seq}
        t0, proc = s.slot_time(self.u), "processor-0.1"
        steps = [
            ("begin", "invoke", {"fate": "commit"}),
            ("begin", "ok", {}),
            ("send-offsets", "invoke", {}),
            *outcome,
        ]
        for n, (f, type_, more) in enumerate(steps):
            self._event(
                "txn", type_, f, proc, t0 + 0.1 * n * s.slot_seconds, **txn, generation=1, **more
            )
        self.u += 1

    def _prepared(self, txn_id: str, time: float) -> None:
        """The coordinator's PrepareCommit of `txn_id` at `time`."""
        self._event(
            LOG_BATCH_KIND,
            "ok",
            TXN_STATE,
            LOG_BATCHES,
            time,
            txn_id=txn_id,
            topic=TRANSACTION_STATE_TOPIC,
            partition=0,
            offset=self.u,
            params=_coordinator_state("PrepareCommit"),
        )

    def _stale_commit(self) -> None:
        """Instance 0's coordinator prepares a commit in a slot where instance 0 has no commit
        call in flight: a stale EndTxn landing (KAFKA-17754)."""
        t = self.shape.slot_time(self.u) + 0.3 * self.shape.slot_seconds
        self._prepared("eoschaos-txn-0", t)
        self.stale_commits.append({"txn_id": "eoschaos-txn-0", "prepared_at": t})
        self.u += 1

    def _input_committed_twice(self, n: int) -> None:
        """A commit that takes effect after every slot's, at an offset of input partition
        n % P's first slot, below what its last slot committed: a zombie's, or a consumer
        that started from an old offset."""
        s = self.shape
        partition, offset = n % s.partitions, s.txn_size
        params = _offset_commit(s.mode == "eos", 2 * self.u, ZOMBIE_PRODUCER_ID, "COMMIT")
        self._event(
            LOG_BATCH_KIND,
            "ok",
            OFFSET_COMMIT,
            LOG_BATCHES,
            s.slot_time(self.u),
            topic=INPUT_TOPIC,
            partition=partition,
            offset=offset,
            params=json.dumps(params, sort_keys=True),
        )
        self.recommitted.append({"partition": partition, "offset": offset})
        self.u += 1

    def _transaction(
        self, instance: int, generation: int, consumed: list[dict], outputs: list[dict]
    ) -> int:
        s = self.shape
        seq, self.next_seq = self.next_seq, self.next_seq + 2
        t0 = s.slot_time(self.u)
        txn_id = f"eoschaos-txn-{instance}" if s.mode == "eos" else None
        txn = {
            "instance": instance,
            "incarnation": 1,
            "txn_id": txn_id,
            "txn_seq": seq,
            "generation": generation,
        }
        positions = {}
        for c in consumed:
            positions[c["partition"]] = max(positions.get(c["partition"], 0), c["offset"] + 1)
        offsets = [{"partition": p, "offset": o} for p, o in sorted(positions.items())]
        proc = f"processor-{instance}.1"
        steps = EOS_STEPS if s.mode == "eos" else ALOS_STEPS
        for f, type_, dt, outcome in steps:
            if outcome in ("any", "commit"):
                more: dict[str, Any] = {}
                if f == "begin":
                    more["fate"] = "commit"
                if f == "produce":
                    more["count"] = len(outputs)
                    more["fate"] = None if s.mode == "eos" else "none"
                if f in OFFSET_STEPS:
                    more["offsets"] = offsets
                t = t0 + dt * s.slot_seconds
                self._event("txn", type_, f, proc, t, **txn, **more)
        if txn_id is not None:
            self._prepared(txn_id, t0 + PREPARED_AT * s.slot_seconds)
        touched = set()
        for n, out in enumerate(outputs):
            partition = n % s.output_partitions
            touched.add(partition)
            offset = self.output_end[partition]
            self.output_end[partition] += 1
            header = {
                **txn,
                **out,
                "txn_size": len(outputs),
                "fate": "commit" if s.mode == "eos" else "none",
            }
            t = t0 + (0.7 + 0.001 * n) * s.slot_seconds + s.observer_lag
            place = {"topic": OUTPUT_TOPIC, "partition": partition, "offset": offset}
            self._event(
                "read", "ok", "poll", OBSERVER, t, **place, **header, isolation="read_committed"
            )
            for reader in (FINAL_COMMITTED, FINAL_UNCOMMITTED):
                self._scan(reader, OUTPUT_TOPIC, partition, offset, **header)
        for partition in touched:  # the commit marker
            self.output_end[partition] += 1
        self.u += 1
        return seq

    def _aggregates(self) -> dict[int, dict[str, int]]:
        """count, sum, min, max of the input ids per key (id mod buckets), as a correct
        stateful pipeline computes them: the model's ids 0..N-1 in closed form, then every
        extra input record (lost, duplicate-input, zombie sources)."""
        b, n = self.shape.aggregate_buckets, self.shape.records
        if not b:
            return {}
        if b > self.shape.records:
            raise ValueError("aggregate_buckets must not exceed records")
        if self.plants.aggregate_mismatch > b:
            raise ValueError(f"aggregate_mismatch must be <= {b} keys")
        result = {}
        for key in range(b):
            count = (n - key + b - 1) // b
            last = key + (count - 1) * b
            result[key] = {
                "count": count,
                "sum": count * (key + last) // 2,
                "min": key,
                "max": last,
            }
        for id_ in self.extra_input_ids:
            agg = result[id_ % b]
            agg.update(
                count=agg["count"] + 1,
                sum=agg["sum"] + id_,
                min=min(agg["min"], id_),
                max=max(agg["max"], id_),
            )
        return result

    def _end_state(self) -> None:
        s, plants = self.shape, self.plants
        t = self.end_time + 40.0
        ends = [(OUTPUT_TOPIC, p, e) for p, e in enumerate(self.output_end)]
        ends += [(INPUT_TOPIC, p, e) for p, e in enumerate(self.input_end)]
        if plants.lso_behind > len(ends):
            raise ValueError(f"lso_behind must be <= {len(ends)} partitions")
        self.lso_behind = ends[: plants.lso_behind]
        for n, (topic, p, end) in enumerate(ends):
            lso = end - 1 if n < plants.lso_behind else end
            self._event(
                "end",
                "ok",
                "log-end",
                END_STATE,
                t,
                topic=topic,
                partition=p,
                offset=end,
                lso=lso,
            )
        first_unseen = {u["partition"]: u["offset"] for u in reversed(self.unseen)}
        for p, end in enumerate(self.input_end):
            committed = end - 1 if p < plants.group_offsets_behind else end
            committed = min(committed, first_unseen.get(p, end))
            self._event(
                "end",
                "ok",
                "group-offset",
                END_STATE,
                t,
                topic=INPUT_TOPIC,
                partition=p,
                offset=committed,
            )
        for key, value in self._aggregates().items():
            if key < plants.aggregate_mismatch:
                value = {**value, "count": value["count"] + 1}  # one update applied twice
            params = json.dumps({"key": str(key), "buckets": s.aggregate_buckets, "value": value})
            self._event("end", "ok", "aggregate", END_AGGREGATES, t, params=params)
        for x in range(plants.open_transaction):
            params = json.dumps({"state": "Ongoing", "producer_id": 9000 + x})
            self._event(
                "end", "ok", "open-txn", END_STATE, t, txn_id=f"eoschaos-open-{x}", params=params
            )
        for x in range(plants.instance_failure):
            self._event(
                INSTANCE_KIND,
                "info",
                "exit",
                SUPERVISOR,
                t - 40 - x,
                instance=x % s.instances,
                incarnation=0,
                error=str(FAILURE_EXIT),
            )
        for i in range(s.instances):
            self._event(
                INSTANCE_KIND,
                "info",
                "exit",
                SUPERVISOR,
                t - 30,
                instance=i,
                incarnation=1,
                error="0",
            )

    def dataframe(self, spark: SparkSession) -> DataFrame:
        schema = event_schema()
        names = schema.fieldNames()
        rows = []
        for row in self.rows:
            if row["kind"] == "read" and row["process"] != OBSERVER:
                row = {**row, "time": _scan_start(self.end_time, row["process"]) + row["time"]}
            rows.append(tuple(row.get(name) for name in names))
        return spark.createDataFrame(rows, schema)

    def planted(self, targets: _Targets) -> dict[str, list[dict[str, Any]]]:
        """The planted records, in the terms the checks' examples use."""
        s = self.shape
        q = s.output_partitions

        def at(r: int, aborted: bool = False) -> dict[str, int]:
            k, j = divmod(r, s.txn_size)
            return {"partition": j % q, "offset": s.output_offset(s.attempt(k, aborted), j)}

        return {
            "lost": [{"id": i} for i in self.lost_ids],
            "duplicate": [{"id": i} for i in targets.duplicate_ids],
            "phantom": [{"id": i} for i in self.phantom_ids],
            "duplicate_input": [{"id": i} for i in targets.duplicate_input_ids],
            "aborted_read": [at(r, aborted=True) for r in targets.aborted_read],
            "uncommitted_read": [at(r) for r in targets.uncommitted_read],
            "fractured_read": [
                {"instance": s.instance(k), "txn_seq": s.txn_seq(k)}
                for k in range(targets.fractured)
            ],
            "order_backwards": [at(r) for r in targets.backwards],
            "order_skip": [at(k * s.txn_size + j) for k in targets.skip for j in range(s.txn_size)],
            "inconsistent_offsets": [at(r) for r in targets.inconsistent],
            "zombie_write": self.zombies,
            "open_transaction": [
                {"txn_id": f"eoschaos-open-{x}"} for x in range(self.plants.open_transaction)
            ],
            "lso_behind": [{"topic": t, "partition": p} for t, p, _ in self.lso_behind],
            "group_offsets_behind": [
                {"partition": p} for p in range(self.plants.group_offsets_behind)
            ],
            "unseen": self.unseen,
            "aggregate_mismatch": [
                {"key": str(key)} for key in range(self.plants.aggregate_mismatch)
            ],
            "stale_commit": self.stale_commits,
            "input_committed_twice": self.recommitted,
            "nonmonotonic_send": [
                {"partition": 0, "offset": offset} for offset in self.sent_out_of_order
            ],
            "int_poll_reorder": [at(k * s.txn_size + s.txn_size - 1) for k in targets.poll_reorder],
            "int_send_reorder": [at(k * s.txn_size) for k in targets.send_reorder],
            "int_poll_skip": [at(k * s.txn_size + s.txn_size - 1) for k in targets.poll_skip],
            "instance_failure": [
                {"instance": x % s.instances, "incarnation": 0, "status": FAILURE_EXIT}
                for x in reversed(range(self.plants.instance_failure))
            ],
        }


def _write_jsonl(events: DataFrame, directory: Path, shape: RunShape) -> None:
    if shape.records > JSONL_MAX_RECORDS:
        raise ValueError(f"JSON lines are for small histories (<= {JSONL_MAX_RECORDS} records)")
    directory.mkdir(parents=True, exist_ok=True)
    lines = (
        events.select("process", "time", F.to_json(F.struct(*events.columns)).alias("line"))
        .orderBy("process", "time")
        .collect()
    )
    by_process: dict[str, list[str]] = {}
    for row in lines:
        by_process.setdefault(row["process"], []).append(row["line"] + "\n")
    for process, process_lines in by_process.items():
        (directory / f"{process}.jsonl").write_text("".join(process_lines))


def _manifest(shape: RunShape, seed: int, end_time: float) -> dict[str, Any]:
    judged_as = {"workload": SYNTHETIC_WORKLOAD, "mode": shape.mode}
    capabilities = replace(Capabilities.of_manifest(judged_as), failure_exits=(FAILURE_EXIT,))
    return {
        **judged_as,
        **capabilities.to_manifest(),
        "seed": seed,
        "faults": [{"f": "kill", "target": "broker-2"}],
        "records": shape.records,
        "instances": shape.instances,
        "partitions": shape.partitions,
        "output_partitions": shape.output_partitions,
        "input_topic": INPUT_TOPIC,
        "output_topic": OUTPUT_TOPIC,
        "kafka_version": "synthetic",
        "backend": "synthetic",
        "command": f"eoschaos.testing.generate(seed={seed})",
        "shape": asdict(shape),
        "start": shape.start,
        "end": end_time + 60.0,
    }


def _source(consumed: dict[str, int]) -> dict[str, int]:
    """An output record's lineage fields for the input record it copies."""
    return {"src_partition": consumed["partition"], "src_offset": consumed["offset"]}
