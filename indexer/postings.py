"""A term's postings read from Whoosh's W3 posting file in place, whole or only where asked.

The searcher (:mod:`indexer.vector`) needs postings as numpy arrays. Stepping Whoosh's
matcher from block to block unpickles each block's info from a file object, one read() per
pickle opcode; here a block is sliced from the memory map of the segment
(:mod:`indexer.mapped`) and unpickled in place, and the document numbers of all blocks come
from one cumulative sum.

A term's block headers alone are cheap to read (under a microsecond a block, against 10-25
for decoding a block of 1,024 postings and scoring them), so a term can also be read only
in the blocks that hold some given documents (:func:`read_at`): a common word's score at
the hundred candidates of a ranking, without its 500,000 postings.

The layout relied on (whoosh-reloaded 2.7.5): a term's postings start with a 4-byte magic,
then each block is a big-endian length (negative for the last block), the block's info
pickled with protocol 2 (posting count, last document number, maximum weight,
compression, two length bytes), and the pickled (document-number deltas, weights, values)
tuple. tests/indexer/test_postings.py checks what is read against Whoosh's own matcher.
"""

from __future__ import annotations

import io
import pickle
import struct
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy
from whoosh.codec import whoosh3
from whoosh.matching import wrappers

#: The length before each posting block (negative for a term's last), as Whoosh writes it.
_BLOCK_LENGTH = struct.Struct("!i")
_STOP = ord(".")  # the last opcode of every pickle
_PROTO = 0x80  # the first opcode of a pickle of protocol 2 or later


@dataclass(frozen=True, slots=True)
class Directory:
    """Where each block of one term's postings in a segment starts, and its last document
    number (segment numbering)."""

    starts: numpy.ndarray
    last_ids: numpy.ndarray

    def __len__(self) -> int:
        return len(self.starts)


@dataclass(frozen=True, slots=True)
class Postings:
    """One segment's postings of a term: document numbers, weights (term frequencies)."""

    ids: numpy.ndarray  # int64, sorted
    weights: numpy.ndarray  # float64


def decode(leaf: Any, fieldname: str, btext: bytes, info: Any) -> tuple[Postings, Directory | None]:
    """All of one segment's postings for a term (``info``: its entry in the segment's term
    table), and the block directory (None for postings inlined in the term table, or a
    segment not read from a memory map)."""
    place = _place(leaf, info)
    if place is None:
        return _through_matcher(leaf, fieldname, btext, info), None
    buf, first = place
    starts: list[int] = []
    last_ids: list[int] = []
    deltas: list[numpy.ndarray] = []
    weights: list[numpy.ndarray] = []
    for start, header, end in _blocks(buf, first):
        starts.append(start)
        last_ids.append(header[1])
        block_deltas, block_weights = _block_data(buf, start, header, end)
        deltas.append(block_deltas)
        weights.append(block_weights)
    return Postings(_running_ids(deltas), numpy.concatenate(weights)), _directory(starts, last_ids)


def directory(leaf: Any, info: Any) -> Directory | None:
    """A term's block directory in a segment, from the block headers alone; None where
    :func:`decode` gives none."""
    place = _place(leaf, info)
    if place is None:
        return None
    buf, first = place
    starts: list[int] = []
    last_ids: list[int] = []
    for start, header, _ in _blocks(buf, first):
        starts.append(start)
        last_ids.append(header[1])
    return _directory(starts, last_ids)


def _directory(starts: list[int], last_ids: list[int]) -> Directory:
    return Directory(
        numpy.asarray(starts, dtype=numpy.int64), numpy.asarray(last_ids, dtype=numpy.int64)
    )


def blocks_holding(blocks: Directory, wanted: numpy.ndarray) -> int:
    """How many of a term's blocks could hold one of ``wanted`` (sorted segment document
    numbers): what :func:`read_at` would decode."""
    which = numpy.searchsorted(blocks.last_ids, wanted)
    return len(numpy.unique(which[which < len(blocks)]))


def read_at(leaf: Any, blocks: Directory, wanted: numpy.ndarray) -> Postings:
    """The postings of ``wanted`` (sorted segment document numbers) that the term has,
    decoding only the blocks of ``blocks`` (from :func:`directory`) that could hold them."""
    buf = _buffer(leaf)
    assert buf is not None  # a directory is only made where there is a buffer
    which = numpy.searchsorted(blocks.last_ids, wanted)
    inside = which < len(blocks)
    wanted, which = wanted[inside], which[inside]
    found_ids: list[numpy.ndarray] = []
    found_weights: list[numpy.ndarray] = []
    chosen, first_of = numpy.unique(which, return_index=True)
    bounds = [*first_of.tolist(), len(which)]
    for index, block in enumerate(chosen.tolist()):
        start = int(blocks.starts[block])
        header, end, _ = _block_at(buf, start)
        deltas, weights = _block_data(buf, start, header, end)
        ids = numpy.cumsum(deltas, dtype=numpy.int64)
        asked = wanted[bounds[index] : bounds[index + 1]]
        at = numpy.minimum(numpy.searchsorted(ids, asked), len(ids) - 1)
        hit = ids[at] == asked
        found_ids.append(asked[hit])
        found_weights.append(weights[at[hit]])
    if not found_ids:
        return Postings(numpy.empty(0, dtype=numpy.int64), numpy.empty(0))
    return Postings(numpy.concatenate(found_ids), numpy.concatenate(found_weights))


def leaf_matcher(leaf: Any, fieldname: str, btext: bytes, info: Any = None) -> Any:
    """The segment's own posting matcher for a term, from its term-table entry when the
    caller has read it already."""
    terms = getattr(leaf, "_terms", None)
    if info is not None and isinstance(terms, whoosh3.W3TermsReader):
        format_ = leaf.schema[fieldname].format
        return terms._codec.postings_reader(terms._postfile, info, format_, term=(fieldname, btext))
    matcher = leaf.postings(fieldname, btext)
    while isinstance(matcher, wrappers.FilterMatcher | wrappers.WrappingMatcher):
        matcher = matcher.child  # deletions are applied by the callers
    return matcher


def _buffer(leaf: Any) -> Any:
    """The segment's posting file as a buffer, when it is read from one (a memory map)."""
    terms = getattr(leaf, "_terms", None)
    if not isinstance(terms, whoosh3.W3TermsReader):
        return None
    return getattr(terms._postfile, "_buf", None)


def _place(leaf: Any, info: Any) -> tuple[Any, int] | None:
    """The buffer and offset of a term's first block, or None (inlined, or no buffer)."""
    if info.is_inlined():
        return None
    buf = _buffer(leaf)
    if buf is None:
        return None
    offset, _ = info.extent()
    if bytes(buf[offset : offset + len(whoosh3.WHOOSH3_HEADER_MAGIC)]) != (
        whoosh3.WHOOSH3_HEADER_MAGIC
    ):
        raise ValueError(f"no posting block at offset {offset}: the index is damaged")
    return buf, offset + len(whoosh3.WHOOSH3_HEADER_MAGIC)


def _blocks(buf: Any, start: int) -> Iterator[tuple[int, tuple[Any, ...], int]]:
    """Each block's start, unpickled info and end, from the first block at ``start``."""
    while True:
        header, end, last = _block_at(buf, start)
        yield start, header, end
        if last:
            return
        start = end


def _block_at(buf: Any, start: int) -> tuple[tuple[Any, ...], int, bool]:
    """The block at ``start``: its unpickled info, its end, and whether it is the term's
    last (Whoosh marks the last block with a negative length)."""
    (length,) = _BLOCK_LENGTH.unpack_from(buf, start)
    end = start + _BLOCK_LENGTH.size + abs(length)
    # pickle.loads stops at the info's last opcode: the data after it is not read.
    return pickle.loads(buf[start + _BLOCK_LENGTH.size : end]), end, length < 0


def _block_data(
    buf: Any, start: int, header: tuple[Any, ...], end: int
) -> tuple[numpy.ndarray, numpy.ndarray]:
    """A block's document-number deltas and weights (float64)."""
    count, _, _, compression, _, _ = header
    data = buf[_data_start(buf, start, header, end) : end]
    deltas, weights, _ = pickle.loads(zlib.decompress(data) if compression else data)
    deltas = (
        numpy.frombuffer(deltas, dtype=deltas.typecode)
        if isinstance(deltas, array)
        else (numpy.asarray(deltas, dtype=numpy.int64))
    )
    if weights is None:
        return deltas, numpy.ones(count)
    if isinstance(weights, float | int):
        return deltas, numpy.full(count, float(weights))
    return deltas, numpy.asarray(weights, dtype=numpy.float64)


def _data_start(buf: Any, start: int, header: tuple[Any, ...], end: int) -> int:
    """Where a block's data pickle starts: after its info pickle, whose length is that of the
    same tuple pickled again (Whoosh and :mod:`indexer.writer` write it with protocol 2,
    which pickles these numbers one way only). An info pickled some other way is found by
    reading it again from a stream, which says where it stopped."""
    info_start = start + _BLOCK_LENGTH.size
    at = info_start + len(pickle.dumps(header, 2))
    if at < end and buf[at - 1] == _STOP and buf[at] == _PROTO:
        return at
    stream = io.BytesIO(bytes(buf[info_start:end]))
    pickle.load(stream)
    return info_start + stream.tell()


def _running_ids(deltas: list[numpy.ndarray]) -> numpy.ndarray:
    """Document numbers from each block's deltas. A block's first delta is its first
    document number itself: one running sum over all blocks, each block's sum before it
    taken off its postings."""
    if len(deltas) == 1:
        return numpy.cumsum(deltas[0], dtype=numpy.int64)
    sums = numpy.cumsum(numpy.concatenate(deltas), dtype=numpy.int64)
    counts = numpy.fromiter(map(len, deltas), dtype=numpy.int64, count=len(deltas))
    before = numpy.zeros(len(counts), dtype=numpy.int64)
    before[1:] = sums[numpy.cumsum(counts)[:-1] - 1]
    return sums - numpy.repeat(before, counts)


def _through_matcher(leaf: Any, fieldname: str, btext: bytes, info: Any) -> Postings:
    """Postings inlined in the term table (or a segment without a buffer), from Whoosh's
    own matcher: a handful of postings, or a test's plain-file index."""
    matcher = leaf_matcher(leaf, fieldname, btext, info)
    ids: list[int] = []
    weights: list[float] = []
    while matcher.is_active():
        ids.append(matcher.id())
        weights.append(matcher.weight())
        matcher.next()
    return Postings(
        numpy.asarray(ids, dtype=numpy.int64), numpy.asarray(weights, dtype=numpy.float64)
    )
