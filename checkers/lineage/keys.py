"""A transaction's identity in the lineage: (instance, incarnation, txn_seq), as Spark columns
for whole-history plans and as "i.n.s" node names for the few rows that reach Python."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

TXN_KEY_FIELDS = ("instance", "incarnation", "txn_seq")  # txn_seq restarts per incarnation


def txn_known() -> Column:
    instance, incarnation, seq = (F.col(name).isNotNull() for name in TXN_KEY_FIELDS)
    return instance & incarnation & seq


def txn_column() -> Column:
    """An event's transaction as a struct of its three integers, null unless all are known.

    Whole-history plans compare and count these structs; the "i.n.s" text is built only for
    the few rows that reach Python.
    """
    return F.when(txn_known(), F.struct(*TXN_KEY_FIELDS))


def txn_text(prefix: str = "") -> Column:
    return F.concat_ws(".", *(F.col(f"{prefix}{name}") for name in TXN_KEY_FIELDS))


def txn_of(row: dict) -> tuple[int, int, int] | None:
    values = tuple(row.get(name) for name in TXN_KEY_FIELDS)
    return None if None in values else values


def txn_key(row: dict) -> str | None:
    """A transaction's node name: "instance.incarnation.txn_seq"."""
    txn = txn_of(row)
    return None if txn is None else ".".join(map(str, txn))
