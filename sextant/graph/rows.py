"""Reading many rows without holding them all: the store is read in chunks everywhere here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

import numpy
from sqlalchemy import Connection, Select
from sqlalchemy.orm import Session

CHUNK = 50_000

#: A select of any columns (SQLAlchemy 2.1 types a select by the tuple of its columns).
AnySelect = Select[*tuple[Any, ...]]


def chunks(
    reader: Session | Connection, statement: AnySelect, size: int = CHUNK
) -> Iterator[Sequence[Any]]:
    """The rows of ``statement`` a chunk at a time (``yield_per``: a server-side cursor on
    PostgreSQL), in the session's (or connection's) transaction, so every read sees the same
    moment."""
    # Core execution on the session's connection: without the ORM's per-row result
    # processing, which more than doubles the time to read a million links.
    connection = reader.connection() if isinstance(reader, Session) else reader
    result = connection.execute(statement.execution_options(yield_per=size))
    yield from result.partitions()


def int_column(reader: Session | Connection, statement: AnySelect) -> numpy.ndarray:
    """The first column of ``statement`` as int64, one small array per chunk of rows: a
    list of a million rows handed to numpy costs seconds (it probes each for an array
    interface) and a Python object per row."""
    parts = [
        numpy.fromiter((row[0] for row in rows), numpy.int64, len(rows))
        for rows in chunks(reader, statement)
    ]
    return join(parts, numpy.int64)


def int_pairs(
    reader: Session | Connection, statement: AnySelect
) -> Iterator[tuple[numpy.ndarray, numpy.ndarray]]:
    """The two integer columns of ``statement``, as a pair of int64 arrays per chunk of rows
    (views of one array the chunk is read into)."""
    for rows in chunks(reader, statement):
        pairs = numpy.fromiter(chain.from_iterable(rows), numpy.int64, 2 * len(rows))
        yield pairs[0::2], pairs[1::2]


def join(parts: list[numpy.ndarray], dtype: type) -> numpy.ndarray:
    """The chunks' arrays as one (an empty one of ``dtype`` for none)."""
    return numpy.concatenate(parts).astype(dtype, copy=False) if parts else numpy.empty(0, dtype)
