"""Which documents might hold a phrase: a Bloom filter of each document's neighbouring terms.

Checking a phrase on positions means decoding a document's positions column (zlib, then a
term lookup): about 75 µs a candidate, 15 ms for the 200 best candidates of a phrase whose
words are common but rarely next to each other, as most phrases people try are. A phrase can
only hold where every pair of its neighbouring terms stands side by side, so each document
also gets a fixed-size Bloom filter of its neighbouring term pairs (:data:`FILTER_BYTES`,
:data:`HASHES` bits a pair), and every candidate is tested against it at once with numpy
before any positions are decoded. It never rules out a document that holds the phrase; of the
others it lets through a share that grows with the document's distinct pairs (measured, see
the tests: 0.1% of 300-word pages, 0.8% at 600 words, 3% at 1,000, 14% at 2,000; past about
5,000 words the filter is full and rules out nothing). On disk that is 1 KB a document.

Terms are hashed with CRC-32 (stable across processes and versions, unlike ``hash``); a pair
is the two hashes in one 64-bit key, mixed by a multiplication, whose top bits give the bit
numbers.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy

#: Bytes of filter per document: 8,192 bits.
FILTER_BYTES = 1024
#: Bits set per pair.
HASHES = 3
#: A document without a filter (indexed before filters existed) may hold any phrase.
UNKNOWN = b"\xff" * FILTER_BYTES
#: A document without neighbouring terms holds none.
NOTHING = bytes(FILTER_BYTES)

_BITS = FILTER_BYTES * 8
_SHIFT = _BITS.bit_length() - 1  # bits per bit number: 12
_MIX = numpy.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio, odd


def term_hashes(terms: Sequence[str]) -> numpy.ndarray:
    """CRC-32 of each term's UTF-8. One encode of the joined terms and a C-level split and map
    cost two thirds of encoding and hashing term by term from a generator; no term holds a
    NUL (terms are word characters), and if one did ``count`` would refuse the result."""
    encoded = "\x00".join(terms).encode("utf-8").split(b"\x00") if terms else []
    return numpy.fromiter(map(zlib.crc32, encoded), dtype=numpy.uint64, count=len(terms))


def bit_numbers(first: numpy.ndarray, second: numpy.ndarray) -> numpy.ndarray:
    """The filter bits of the pairs ``(first[i], second[i])`` (term hashes): ``HASHES`` rows."""
    key = (first << numpy.uint64(32)) | second
    mixed = key * _MIX  # wraps around, as multiplicative hashing wants
    return numpy.stack(
        [
            (mixed >> numpy.uint64(64 - _SHIFT * (row + 1))) & numpy.uint64(_BITS - 1)
            for row in range(HASHES)
        ]
    ).astype(numpy.int64)


def encode(terms: Sequence[str], primary: numpy.ndarray, secondary: numpy.ndarray | None) -> bytes:
    """The filter of one document, from its positions as :mod:`indexer.schema` encodes them:
    the number of the term at each position (-1 for none), and a second term at positions
    that have two (CJK text). Every term at a position is paired with every term at the next."""
    if not terms or len(primary) < 2:
        return NOTHING
    hashes = term_hashes(terms)
    layers = [primary] if secondary is None else [primary, secondary]
    bits = numpy.zeros(_BITS, dtype=bool)
    for left in layers:
        for right in layers:
            here, there = left[:-1], right[1:]
            both = (here >= 0) & (there >= 0)
            if both.any():
                bits[bit_numbers(hashes[here[both]], hashes[there[both]]).ravel()] = True
    return numpy.packbits(bits, bitorder="little").tobytes()


def may_hold(reader: Any, rows: numpy.ndarray, sequence: Sequence[str]) -> numpy.ndarray:
    """Which of ``rows`` (sorted document numbers of one segment) may hold ``sequence`` at
    consecutive positions, by the segment's filter column (a Whoosh ``FixedBytesColumn``
    reader)."""
    result = numpy.ones(len(rows), dtype=bool)
    if len(sequence) < 2 or len(rows) == 0:
        return result
    # Whoosh internals (the column reader's fields, the mapped file's buffer), checked by
    # tests/indexer/test_whoosh_internals.py.
    stored = rows < reader._count  # the rest have the default filter, which rules out nothing
    wanted = rows[stored]
    buffer = getattr(reader._dbfile, "_buf", None)
    if buffer is not None:
        result[stored] = filters_hold(_mapped(reader, buffer), wanted, sequence)
    else:  # a segment Whoosh did not map: read just these documents' filters
        table = numpy.frombuffer(b"".join(reader[int(row)] for row in wanted), dtype=numpy.uint8)
        table = table.reshape(len(wanted), FILTER_BYTES)
        result[stored] = filters_hold(table, numpy.arange(len(wanted)), sequence)
    return result


def filters_hold(
    filters: numpy.ndarray, rows: numpy.ndarray, sequence: Sequence[str]
) -> numpy.ndarray:
    """Whether each of ``rows`` of ``filters`` (one filter per row) has every neighbouring
    pair of ``sequence``; only the bytes those pairs need are read."""
    if len(sequence) < 2:
        return numpy.ones(len(rows), dtype=bool)
    hashes = term_hashes(sequence)
    bits = bit_numbers(hashes[:-1], hashes[1:]).ravel()
    wanted = numpy.left_shift(1, bits & 7).astype(numpy.uint8)
    found = filters[rows[:, None], (bits >> 3)[None, :]] & wanted
    return numpy.all(found != 0, axis=1)


def _mapped(reader: Any, buffer: Any) -> numpy.ndarray:
    """The stored filters as one ``(documents, FILTER_BYTES)`` array over the segment file
    Whoosh mapped (no copy). A view like this keeps the mapping from closing, so it is made
    for each check and dropped with it, never kept."""
    raw = numpy.frombuffer(
        buffer, dtype=numpy.uint8, count=reader._count * FILTER_BYTES, offset=reader._basepos
    )
    return raw.reshape(reader._count, FILTER_BYTES)
