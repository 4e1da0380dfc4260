"""Reading many rows without holding them all: the store is read in chunks everywhere here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Select
from sqlalchemy.orm import Session

CHUNK = 50_000

#: A select of any columns (SQLAlchemy 2.1 types a select by the tuple of its columns).
AnySelect = Select[*tuple[Any, ...]]


def chunks(session: Session, statement: AnySelect, size: int = CHUNK) -> Iterator[Sequence[Any]]:
    """The rows of ``statement`` a chunk at a time (``yield_per``: a server-side cursor on
    PostgreSQL), in the session's transaction, so every read sees the same moment."""
    # Core execution on the session's connection: without the ORM's per-row result
    # processing, which more than doubles the time to read a million links.
    result = session.connection().execute(statement.execution_options(yield_per=size))
    yield from result.partitions()
