"""A transaction's identity in the lineage: (instance, incarnation, txn_seq), as Spark columns
for whole-history plans and as "i.n.s" node names for the few rows that reach Python."""

from __future__ import annotations

import functools
import operator

from pyspark.sql import Column
from pyspark.sql import functions as F

TXN_KEY_FIELDS = ("instance", "incarnation", "txn_seq")  # txn_seq restarts per incarnation
TXN_LONG_BITS = (15, 16, 32)  # txn_long's bits per field: 63, so the long stays positive


def txn_known() -> Column:
    instance, incarnation, seq = (F.col(name).isNotNull() for name in TXN_KEY_FIELDS)
    return instance & incarnation & seq


def txn_column() -> Column:
    """An event's transaction as a struct of its three integers, null unless all are known.

    Whole-history plans compare and count these structs; the "i.n.s" text is built only for
    the few rows that reach Python.
    """
    return F.when(txn_known(), F.struct(*TXN_KEY_FIELDS))


def txn_fits_long() -> Column:
    """Each of the transaction's fields fits its bits in txn_long (null unless all are known).

    The harness's instances and incarnations are small counters and txn_seq counts one
    incarnation's transactions, so they always fit; a pipeline's own output headers may not."""
    fits = [
        F.col(name).between(0, (1 << bits) - 1)
        for name, bits in zip(TXN_KEY_FIELDS, TXN_LONG_BITS, strict=True)
    ]
    return functools.reduce(operator.and_, fits)


def txn_long() -> Column:
    """txn_column packed in one long, for a plan that shuffles and groups every output read by
    its transaction: a long costs less than a struct to shuffle, hash and compare. Two
    transactions share a long only if one does not fit (txn_fits_long): use it only on a
    history where every one does."""
    packed, shift = F.lit(0).cast("long"), sum(TXN_LONG_BITS)
    for name, bits in zip(TXN_KEY_FIELDS, TXN_LONG_BITS, strict=True):
        shift -= bits
        packed = packed + F.shiftleft(F.col(name).cast("long"), shift)
    return F.when(txn_known(), packed)


def txn_text(prefix: str = "") -> Column:
    return F.concat_ws(".", *(F.col(f"{prefix}{name}") for name in TXN_KEY_FIELDS))


def txn_of(row: dict) -> tuple[int, int, int] | None:
    values = tuple(row.get(name) for name in TXN_KEY_FIELDS)
    return None if None in values else values


def txn_key(row: dict) -> str | None:
    """A transaction's node name: "instance.incarnation.txn_seq"."""
    txn = txn_of(row)
    return None if txn is None else ".".join(map(str, txn))
