"""Long id lists cut into pieces one ``IN (...)`` each can carry.

SQLite caps the parameters of one statement (32,766 since 3.32, 999 before) and PostgreSQL
plans a long ``IN`` list worse than several short ones; 500 values is well under both
limits and large enough that the round trips do not show. Every part of the project that
binds a list of ids or keys goes through this one helper, so the bound is set once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

IN_BATCH = 500

T = TypeVar("T")


def in_batches(values: Sequence[T], size: int = IN_BATCH) -> Iterator[Sequence[T]]:
    """``values`` in consecutive slices of at most ``size``, in order."""
    for start in range(0, len(values), size):
        yield values[start : start + size]
