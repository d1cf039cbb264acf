"""What a run's history holds, declared by its workload and recorded in run.json.

Checks decide by capability, never by a workload's name: each check says what it needs (in
eoschaos.checkers.verdict), and one that needs what the history lacks is "not applicable", with
the reason. A new workload declares its capabilities once and every check follows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MANIFEST_KEY = "capabilities"
# Runs recorded before workloads declared their failure exits: the Streams app has exited 1
# when its stream thread died (or it did not close in time) since it was written.
LEGACY_FAILURE_EXITS: dict[str, tuple[int, ...]] = {"streams": (1,)}


@dataclass(frozen=True)
class Capabilities:
    transactions: bool  # the pipeline commits its output (and offsets) in transactions
    transaction_history: bool  # its instances record each transaction's steps (`txn` events)
    output_is_copies: bool  # each output record is a copy of one input record, not a result
    assigned_transactional_ids: bool  # eoschaos gives each instance its transactional.id
    # each transaction commits the offsets of the input it consumed (KIP-98/447), not a
    # checkpoint of the pipeline's own (Flink keeps its offsets in its checkpoints)
    offsets_in_transactions: bool = True
    # the exit statuses with which an instance says it failed on its own (a client's fatal
    # error), beside those it leaves when stopped, killed by a fault or fenced; empty: the
    # workload declares none and its instances' failures are not judged
    failure_exits: tuple[int, ...] = ()

    def to_manifest(self) -> dict[str, Any]:
        return {MANIFEST_KEY: asdict(self)}

    @classmethod
    def of_manifest(cls, manifest: dict[str, Any]) -> Capabilities:
        """A run's capabilities; run dirs recorded before capabilities were (history schema 1
        all the same) get them from the workload and mode they name, as judged then; so do
        the failure exits of runs recorded before workloads declared them."""
        workload = manifest.get("workload")
        legacy_failure_exits = LEGACY_FAILURE_EXITS.get(workload, ())
        if MANIFEST_KEY in manifest:
            recorded = manifest[MANIFEST_KEY]
            failure_exits = tuple(recorded.get("failure_exits", legacy_failure_exits))
            return cls(**{**recorded, "failure_exits": failure_exits})
        transactions = manifest.get("mode") != "alos"
        return cls(
            transactions=transactions,
            transaction_history=workload not in ("streams", "spark", "copier", "byo", "flink"),
            output_is_copies=not manifest.get("expect"),
            assigned_transactional_ids=transactions and workload not in ("streams", "flink"),
            offsets_in_transactions=workload != "flink",
            failure_exits=legacy_failure_exits,
        )
