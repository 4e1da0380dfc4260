"""A segment's term table, written in Whoosh's format from machine arrays.

Whoosh's term-table writer (``filetables.OrderedHashWriter``) keeps every term's hash and
file position as a tuple of two Python ints, in one of 256 lists, until the segment closes:
about 125 bytes a term. A segment has a ``pid`` and a ``url`` term for every page it holds,
so that memory followed the corpus, and it peaked when a build's workers were at their
largest, writing their segments at the end: at 600,000 pages each worker's segment has 1.07
million terms, about 130 MB of tuples. Here a bucket's hashes and positions are two machine
arrays (12 bytes a term) and its hash table is built from them one bucket at a time; the file
is byte for byte the one Whoosh writes (tests/indexer/test_termtable.py).
"""

from __future__ import annotations

from array import array

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.filedb import filetables

#: One slot of a bucket's hash table as Whoosh writes it (``filetables._pointer``, "!Iq").
_SLOT = numpy.dtype([("hash", ">u4"), ("position", ">i8")])
_BUCKETS = 256


class CompactTermTable(filetables.OrderedHashWriter):
    """An ``OrderedHashWriter`` whose pending hash-table entries are machine arrays."""

    lastkey: bytes  # Whoosh's, untyped

    def __init__(self, fresh: filetables.OrderedHashWriter) -> None:
        """Take over ``fresh``, a Whoosh writer that has written its header and no key yet
        (the codec's field writer makes its own; its ``extras`` stay the same object)."""
        if len(fresh.index):
            raise ValueError("a term table can only be taken over before its first key")
        self.__dict__.update(fresh.__dict__)
        self.buckets: list[list[tuple[int, int]]] = []  # Whoosh's tuples: never filled here
        self._hashes = [array("I") for _ in range(_BUCKETS)]
        self._positions = [array("q") for _ in range(_BUCKETS)]

    def add(self, key: bytes, value: bytes) -> None:
        if key <= self.lastkey:
            raise ValueError(f"Keys must increase: {self.lastkey!r}..{key!r}")
        dbfile = self.dbfile
        position = dbfile.tell()
        self.index.append(position)
        dbfile.write(filetables._lengths.pack(len(key), len(value)))
        dbfile.write(key)
        dbfile.write(value)
        hashed = self.hashfn(key)
        bucket = hashed & (_BUCKETS - 1)
        self._hashes[bucket].append(hashed)
        self._positions[bucket].append(position)
        self.lastkey = key

    def _write_hashes(self) -> None:
        """Whoosh's tables: twice as many slots as entries, linear probing from
        ``(hash >> 8) % slots`` in the order the keys came, an empty slot all zeros (no key
        sits at position 0, the header does)."""
        dbfile = self.dbfile
        for bucket in range(_BUCKETS):
            hashes, positions = self._hashes[bucket], self._positions[bucket]
            slots = 2 * len(hashes)
            self.directory.append((dbfile.tell(), slots))
            if not slots:
                continue
            slot_hashes = array("I", bytes(4 * slots))
            slot_positions = array("q", bytes(8 * slots))
            for hashed, position in zip(hashes, positions, strict=True):
                slot = (hashed >> 8) % slots
                while slot_positions[slot]:
                    slot = (slot + 1) % slots
                slot_hashes[slot] = hashed
                slot_positions[slot] = position
            table = numpy.empty(slots, dtype=_SLOT)
            table["hash"] = numpy.frombuffer(slot_hashes, dtype=numpy.uint32)
            table["position"] = numpy.frombuffer(slot_positions, dtype=numpy.int64)
            dbfile.write(table.tobytes())
            # Freed as soon as written: the next bucket's table takes their place.
            self._hashes[bucket], self._positions[bucket] = array("I"), array("q")
