"""``size:`` (and ``after:``/``before:``) as Whoosh queries answered from a per-document column
instead of index terms.

Whoosh's ``NumericRange`` expands a range into a union of many tiered terms; on a 20,000-page
index ``size:>4K word`` took 400 ms, almost all of it in that union. Sizes live in a column
instead (8 bytes per page), read once per segment reader into a numpy array; the query's
matcher is the sorted list of matching document numbers, with a binary-search ``skip_to``, so
an intersection with a few hundred word matches costs a few hundred bisections. Indexing
also gets cheaper: no tiered terms per page.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh import matching
from whoosh.query import qcore

from indexer.columnread import segment_column

SIZE_COLUMN = "sizes"
#: Any column read here holds non-negative values, and this for "unknown".
UNKNOWN = -1
UNKNOWN_SIZE = UNKNOWN


class ColumnRange(qcore.Query):
    """Pages whose value in :attr:`column` (a 64-bit numeric column, -1 unknown) is within
    the range (``None`` = unbounded). Subclasses name the column; dates use it too
    (:mod:`indexer.dates`)."""

    column = SIZE_COLUMN

    def __init__(
        self,
        low: int | None,
        high: int | None,
        *,
        low_exclusive: bool = False,
        high_exclusive: bool = False,
        boost: float = 1.0,
    ) -> None:
        self.low = low
        self.high = high
        self.low_exclusive = low_exclusive
        self.high_exclusive = high_exclusive
        self.boost = boost

    def _key(self) -> tuple[Any, ...]:
        return (self.low, self.high, self.low_exclusive, self.high_exclusive)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ColumnRange)
            and type(other) is type(self)
            and self._key() == other._key()
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, *self._key()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self._key()!r}"

    def is_leaf(self) -> bool:
        return True

    def estimate_size(self, ixreader: Any) -> int:
        return len(self._matching(ixreader))

    def matcher(self, searcher: Any, context: Any = None) -> Any:
        ids = self._matching(searcher.reader())
        if len(ids) == 0:
            return matching.NullMatcher()
        return _SortedIdsMatcher(ids.tolist())

    def _matching(self, reader: Any) -> numpy.ndarray:
        if not reader.is_atomic():
            # Whoosh hands every query one segment reader at a time; a multi-segment reader
            # arrives only through estimate_size.
            parts = [self._matching(leaf) + offset for leaf, offset in reader.leaf_readers()]
            return numpy.concatenate(parts) if parts else numpy.empty(0, dtype=numpy.int64)
        sizes = column_values(reader, self.column)
        mask = sizes >= 0
        if self.low is not None:
            mask &= sizes > self.low if self.low_exclusive else sizes >= self.low
        if self.high is not None:
            mask &= sizes < self.high if self.high_exclusive else sizes <= self.high
        return numpy.nonzero(mask)[0]


class SizeRange(ColumnRange):
    """Pages whose size in bytes is within the range."""

    column = SIZE_COLUMN


def column_values(reader: Any, column: str) -> numpy.ndarray:
    """The segment's values of ``column``, deleted documents marked unknown; cached on the
    reader object (a reader is a fixed view of one segment, so the array never goes stale)."""
    attribute = f"_sextant_{column}"
    cached = getattr(reader, attribute, None)
    if cached is not None:
        return cached
    count = reader.doc_count_all()
    if count and column in reader.schema and reader.has_column(column):
        values = segment_column(reader, column, numpy.int64)
    else:
        values = numpy.full(count, UNKNOWN, dtype=numpy.int64)
    if reader.has_deletions():
        deleted = numpy.fromiter(reader.deleted_docs_set, dtype=numpy.int64)
        values[deleted] = UNKNOWN
    setattr(reader, attribute, values)
    return values


class _SortedIdsMatcher(matching.ListMatcher):
    """Whoosh's list matcher with a binary-search ``skip_to`` (its own walks the list)."""

    _i: int  # the current position, set up by Whoosh's untyped base class

    def __init__(self, ids: list[int], position: int = 0) -> None:
        super().__init__(ids, position=position, all_weights=0.0)

    def copy(self) -> _SortedIdsMatcher:
        return _SortedIdsMatcher(self._ids, self._i)

    def skip_to(self, id: int) -> None:
        if not self.is_active():
            raise matching.ReadTooFar
        if id > self._ids[self._i]:
            self._i = bisect_left(self._ids, id, self._i)
