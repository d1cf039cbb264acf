"""The correct run a synthetic history is made of, as formulas of a record or transaction number.

The model (numbers are fields of RunShape; S = per_partition * output_partitions):
- the seeder sends ids 0..N-1; id i lands on input partition i % P at offset i div P;
- slot k (0 .. N/S-1) is one transaction consuming S consecutive records of input partition
  k % P, run by instance (k % P) % K; the first half of the slots runs in group generation 1,
  the second half in generation 2;
- every abort_every-th slot first runs an attempt that aborts, then the same records commit;
- attempt u (time order) writes `per_partition` records and a marker to every output
  partition: record j lands on output partition j % Q at offset u * (per_partition + 1) + j div Q;
- the observer reads every committed record just after its commit (observer_lag later), the
  final scans read both topics afterwards, the end state is stable and fully consumed;
- the coordinator prepares each attempt's commit or abort while its client's call is in flight;
- with broker_logs, the brokers' logs of every attempt are written too, as a run reads them
  (docs/history.md): its output batches, markers and aborted ranges, the coordinator's whole
  record of it (a session per instance, then Ongoing, Prepare and Complete), and its offset
  commit resolved by its marker. Instance i is producer 1000 + i at epoch 0.

Each formula is stated once and takes Python ints (rows built one by one) or Spark Columns (rows
generated in bulk), so the two kinds of rows cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

Num = Any  # an int (float for times) or a Column: what the model's formulas take and give


@dataclass(frozen=True)
class RunShape:
    """The size and layout of the correct run the plants are made in."""

    records: int = 512
    partitions: int = 2
    output_partitions: int = 2
    instances: int = 2
    per_partition: int = 2  # records one transaction writes to each output partition
    abort_every: int = 3  # every n-th slot has an aborted attempt first; 0: none
    mode: str = "eos"  # "eos" or "alos" (no transactions: produce + plain offset commits)
    aggregate_buckets: int = 4  # keys of the final aggregates (id mod this); 0: none recorded
    start: float = 1_700_000_000.0
    slot_seconds: float = 0.01
    broker_logs: bool = False  # also write the brokers' logs of every attempt (eos only)
    observer_lag: float = 0.0  # seconds more the observer takes to read each committed record

    def __post_init__(self) -> None:
        if self.mode not in ("eos", "alos"):
            raise ValueError(f"mode must be eos or alos, got {self.mode!r}")
        if self.broker_logs and self.mode != "eos":
            raise ValueError("broker_logs are the logs of transactions: mode must be eos")
        if self.mode == "alos" and self.abort_every:
            raise ValueError("alos has no transactions to abort: set abort_every=0")
        if self.partitions % self.instances:
            raise ValueError("partitions must be a multiple of instances")
        if self.records % (self.partitions * self.txn_size) or self.slots < 2 * self.partitions:
            raise ValueError(
                f"records must be a multiple of partitions * txn_size "
                f"({self.partitions * self.txn_size}) and give >= 2 slots per partition"
            )

    @property
    def txn_size(self) -> int:
        return self.per_partition * self.output_partitions

    @property
    def slots(self) -> int:
        return self.records // self.txn_size

    @property
    def attempts(self) -> int:
        return self.attempt(self.slots - 1) + 1

    # The formulas of the model, stated once: each takes Python ints (the rows built one by
    # one) or Spark Columns (the bulk rows), and means the same for both.
    def aborts(self, k: Num) -> Num:
        a = self.abort_every
        return a > 0 and k % a == a - 1

    def attempt(self, k: Num, aborted: Num = False) -> Num:
        earlier_aborts = div(k, self.abort_every) if self.abort_every else 0
        return k + earlier_aborts + choose(_both(self.aborts(k), _not(aborted)), 1, 0)

    def input_partition(self, k: Num) -> Num:
        return _int(k % self.partitions)

    def input_offset(self, k: Num, j: Num) -> Num:
        return div(k, self.partitions) * self.txn_size + j

    def input_id(self, k: Num, j: Num) -> Num:
        return self.input_offset(k, j) * self.partitions + k % self.partitions

    def output_offset(self, u: Num, j: Num) -> Num:
        return u * (self.per_partition + 1) + div(j, self.output_partitions)

    def instance(self, k: Num) -> Num:
        return _int(k % self.partitions % self.instances)

    def txn_seq(self, k: Num, aborted: Num = False) -> Num:
        return 2 * div(k, self.instances) + choose(aborted, 0, 1)

    def generation(self, k: Num) -> Num:
        return choose(k < self.slots // 2, 1, 2)

    def slot_time(self, u: Num) -> Num:
        return self.start + (2 * self.partitions + u) * self.slot_seconds


def div(x: Num, n: int) -> Num:
    """x div n of a non-negative x."""
    return F.floor(x / n) if isinstance(x, Column) else x // n


def choose(condition: Num, then: Num, otherwise: Num) -> Num:
    """then where condition holds, else otherwise."""
    if isinstance(condition, Column):
        return F.when(condition, then).otherwise(otherwise)
    return then if condition else otherwise


def _both(a: Num, b: Num) -> Num:
    return a & b if isinstance(a, Column) or isinstance(b, Column) else a and b


def _not(x: Num) -> Num:
    return ~x if isinstance(x, Column) else not x


def _int(x: Num) -> Num:
    return x.cast("int") if isinstance(x, Column) else x
