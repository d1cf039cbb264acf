"""What a run's history holds, declared by its workload and recorded in run.json.

Checks decide by capability, never by a workload's name: each check says what it needs (in
eoschaos.checkers.verdict), and one that needs what the history lacks is "not applicable", with
the reason. A new workload declares its capabilities once and every check follows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MANIFEST_KEY = "capabilities"


@dataclass(frozen=True)
class Capabilities:
    transactions: bool  # the pipeline commits its output (and offsets) in transactions
    transaction_history: bool  # its instances record each transaction's steps (`txn` events)
    output_is_copies: bool  # each output record is a copy of one input record, not a result
    assigned_transactional_ids: bool  # eoschaos gives each instance its transactional.id
    # each transaction commits the offsets of the input it consumed (KIP-98/447), not a
    # checkpoint of the pipeline's own (Flink keeps its offsets in its checkpoints)
    offsets_in_transactions: bool = True

    def to_manifest(self) -> dict[str, Any]:
        return {MANIFEST_KEY: asdict(self)}

    @classmethod
    def of_manifest(cls, manifest: dict[str, Any]) -> Capabilities:
        """A run's capabilities; run dirs recorded before capabilities were (history schema 1
        all the same) get them from the workload and mode they name, as judged then."""
        if MANIFEST_KEY in manifest:
            return cls(**manifest[MANIFEST_KEY])
        transactions = manifest.get("mode") != "alos"
        workload = manifest.get("workload")
        return cls(
            transactions=transactions,
            transaction_history=workload not in ("streams", "spark", "copier", "byo", "flink"),
            output_is_copies=not manifest.get("expect"),
            assigned_transactional_ids=transactions and workload not in ("streams", "flink"),
            offsets_in_transactions=workload != "flink",
        )
