"""Whoosh per-document columns read whole into numpy arrays.

Whoosh reads a numeric column one document at a time (a file read and a ``struct`` unpack
each: half a second for three 100,000-document columns). Its numeric columns are fixed-width
big-endian values, so a segment's column is one byte string that numpy reads in one call.
Other column types fall back to Whoosh's own iteration.
"""

from __future__ import annotations

from typing import Any

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.columns import NumericColumn


def segment_column(segment: Any, name: str, dtype: Any) -> numpy.ndarray:
    """A segment's column ``name``, one value per document, as ``dtype``.

    Opened untranslated: Whoosh's default wraps the reader in a translator (an identity for
    our ``COLUMN`` fields), which hid it from :func:`column_array`'s one-call path and read
    the column value by value instead: 200-320 ms against about 1 ms for a 100,000-document
    column, paid for two columns each time a searcher opens a snapshot.
    """
    return column_array(segment.column_reader(name, translate=False), dtype)


def column_array(reader: Any, dtype: Any) -> numpy.ndarray:
    """The values of a segment's column reader, one per document, as ``dtype``."""
    count = reader._doccount if hasattr(reader, "_doccount") else len(reader)
    if isinstance(reader, NumericColumn.Reader) and not reader._reverse:
        stored = reader._count
        raw = reader._dbfile.get(reader._basepos, stored * reader._fixedlen)
        values = numpy.frombuffer(raw, dtype=numpy.dtype(reader._typecode).newbyteorder(">"))
        result = numpy.full(count, reader._default, dtype=dtype)
        result[: min(stored, count)] = values[:count]
        return result
    return numpy.fromiter(reader, dtype=dtype, count=count)
