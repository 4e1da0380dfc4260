"""Index files read from their memory map in place, not copied into the process.

A Whoosh segment is one compound file, memory-mapped by searchers; each file inside it
(postings, terms, columns) is opened as a ``BufferFile`` over a slice of the map. But
``BufferFile`` wraps its slice in ``BytesIO``, which copies it: every searcher process held
a private copy of most of the index in anonymous memory. Measured on a 100,000-page index
(856 MB on disk): 1.2-1.3 GB of anonymous memory in each capsule process, 3.6 GB PSS for
a capsule of two processes, growing with the index (the target is under 1 GB whatever its
size). With :class:`MappedFile` the pages are the map's, shared by every process and
dropped by the kernel under pressure; only the bytes a read asks for are copied.

:func:`install` puts :class:`MappedFile` where Whoosh's compound storage makes its files.
It is installed by importing :mod:`indexer` (every stage that opens an index does), and
``tests/indexer/test_whoosh_internals.py`` checks the Whoosh internals it relies on.
"""

from __future__ import annotations

import io
from typing import Any

from whoosh.filedb import compound
from whoosh.filedb.structfile import BufferFile

_FIND_CHUNK = 4096


class ViewReader:
    """``read``/``readline``/``seek``/``tell`` over a memoryview: BytesIO without the copy."""

    __slots__ = ("_position", "_view")

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._position = 0

    def read(self, size: int | None = -1) -> bytes:
        start = self._position
        end = len(self._view) if size is None or size < 0 else min(len(self._view), start + size)
        self._position = max(start, end)
        return bytes(self._view[start:end])

    def readline(self, size: int | None = -1) -> bytes:
        start = self._position
        limit = len(self._view) if size is None or size < 0 else min(len(self._view), start + size)
        end = start
        while end < limit:  # in chunks: the view is of a map, with no find() of its own
            chunk = bytes(self._view[end : min(limit, end + _FIND_CHUNK)])
            found = chunk.find(b"\n")
            if found >= 0:
                end += found + 1
                break
            end += len(chunk)
        self._position = end
        return bytes(self._view[start:end])

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = len(self._view) + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        """The view belongs to the map, which its storage closes."""


class MappedFile(BufferFile):
    """Whoosh's ``BufferFile`` reading its buffer in place."""

    def __init__(self, buf: Any, name: str | None = None, onclose: Any = None) -> None:
        super().__init__(b"", name=name, onclose=onclose)  # BytesIO of nothing: no copy
        self._buf = buf
        self.file = ViewReader(memoryview(buf))

    def subset(self, position: int, length: int, name: str | None = None) -> MappedFile:
        return MappedFile(self._buf[position : position + length], name=name or self._name)


def install() -> None:
    """Make Whoosh's compound storage open its files as :class:`MappedFile` (idempotent)."""
    compound.BufferFile = MappedFile
