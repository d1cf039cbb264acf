"""Names carried through a Spark pass as small integer codes, and back.

A pass packs a read's topic (and reader) into a long place or a narrow column: shuffling a
code costs a few bits where a name costs a string per row. Both directions are literal
lookups (a map, an array) that Spark folds into the plan, however many names a run has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F


def code_of(column: str, codes: Mapping[str, int]) -> Column:
    """The code of the row's `column` value; null for a value `codes` does not name."""
    if not codes:  # an empty map literal has no key type to look a string up in
        return F.lit(None).cast("int")
    return F.create_map(*[F.lit(part) for pair in codes.items() for part in pair])[F.col(column)]


def name_of(code: Column, names: Sequence[str]) -> Column:
    """The name whose code (its index in `names`) the row holds."""
    return F.element_at(F.array(*[F.lit(name) for name in names]), code.cast("int") + 1)
