"""Names carried through a Spark pass as small integer codes, and back.

A pass packs a read's topic (and reader) into a long place or a narrow column: shuffling a
code costs a few bits where a name costs a string per row. Both directions are literal
lookups (a map, an array) that Spark folds into the plan, however many names a run has.
`looked_up` is that map for any small mapping a pass consults per row (a group's committed
offsets, a partition's last stable offset).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F


def looked_up(key: Column, mapping: Mapping[Any, Any], value_type: str) -> Column:
    """`mapping`'s value for the row's `key`, as a literal map in the plan (a few entries: no
    join to plan or broadcast); null for a key it lacks, and for every key when it is empty
    (an empty map literal has no key type to look anything up in)."""
    if not mapping:
        return F.lit(None).cast(value_type)
    return F.create_map(*[F.lit(part) for pair in mapping.items() for part in pair])[key]


def code_of(column: str, codes: Mapping[str, int]) -> Column:
    """The code of the row's `column` value; null for a value `codes` does not name."""
    return looked_up(F.col(column), codes, "int")


def name_of(code: Column, names: Sequence[str]) -> Column:
    """The name whose code (its index in `names`) the row holds."""
    return F.element_at(F.array(*[F.lit(name) for name in names]), code.cast("int") + 1)
