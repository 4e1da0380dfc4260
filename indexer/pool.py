"""The posting pool of :class:`indexer.writer.TunedSegmentWriter`: bounded, spilling by term.

Whoosh's pool keeps a five-tuple per posting (about 160 bytes with its objects) and sorts them
all at the end; when it outgrows ``limitmb`` it pickles every posting on its own into sorted
runs and heap-merges them back posting by posting, which made a 3,000-page build 40% slower
when forced. So this project used to size the pool from physical memory to avoid spilling at
all, and a worker's pool grew with its share of the corpus (558 MB for the largest process at
20,000 pages, 894 MB at 40,000).

Here each field holds three flat arrays in arrival order (a term number, a document number,
a weight per posting; values, for a format with values, in a list beside them), and a dict
numbering its terms: about 20 bytes a posting, an eighth of Whoosh's. Per-term arrays, as
before, needed a Python step per posting (a lookup and two appends); flat arrays take a
whole field at C speed (one ``map`` over the numbering, three ``extend``), and the postings
are put in (term, document) order once, by numpy, when the pool is written. The pool holds at most
``max_postings``; when full it writes itself out as a *run* in (field, term) order, one
pickled record per term whose document numbers and weights are whole arrays, and empties.
At the end the runs and what is left in memory are merged term by term, not posting by
posting: documents arrive in increasing document number, so a term's postings from a later
run simply follow those of an earlier one and merging a term is concatenating its arrays.
Memory is then the bound plus one term's postings.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import operator
import pickle
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.writing import PostingPool

#: Bytes a pooled posting takes in memory; turns ``limitmb`` into a posting count. Measured
#: with tracemalloc for per-term arrays (80, since 34); the flat arrays take about 20 and
#: briefly 28 more while sorted for a run, so the bound is kept where it was.
POSTING_BYTES = 80

Posting = tuple[str, bytes, int, float, bytes]
#: One term's postings: field, term, document numbers ("I"), weights ("f"), encoded values
#: (none for a format without values: Whoosh writes no empty value either).
TermPostings = tuple[str, bytes, array, array, list[bytes]]


class _TermNumbers(dict[bytes, int]):
    """Term → its number in a field's pool, numbered in arrival order on first sight, so that
    ``map(numbers.__getitem__, terms)`` numbers a whole field at C speed."""

    __slots__ = ()

    def __missing__(self, term: bytes) -> int:
        number = self[term] = len(self)
        return number


class _TextNumbers(dict[str, int]):
    """The same numbering looked up by a term as text: a term sequence's terms are interned
    strings, which keep their hash and compare by identity, so one lookup here costs less
    than encoding the term and looking up its bytes (done once, on first sight)."""

    __slots__ = ("_numbers",)

    def __init__(self, numbers: _TermNumbers) -> None:
        super().__init__()
        self._numbers = numbers

    def __missing__(self, term: str) -> int:
        number = self[term] = self._numbers[term.encode("utf-8")]
        return number


class _FieldPostings:
    """One field's pooled postings, flat, in arrival order: a term number, a document number
    and a weight per posting (and a value, for a format with values). See the module
    docstring for why flat."""

    __slots__ = ("docs", "numbers", "terms", "texts", "values", "weights")

    def __init__(self) -> None:
        self.numbers = _TermNumbers()
        self.texts = _TextNumbers(self.numbers)
        self.terms = array("I")
        self.docs = array("I")
        self.weights = array("f")
        self.values: list[bytes] = []

    def add(
        self,
        docnum: int,
        terms: Sequence[bytes] | Sequence[str],
        weights: Sequence[float],
        values: Sequence[bytes],
    ) -> None:
        """Terms as bytes (a field's own encoding) or as text (UTF-8, :meth:`add_columns`)."""
        if self.values or any(values):
            self._align_values()
            self.values.extend(values or itertools.repeat(b"", len(terms)))
        if not terms:
            return
        numbers: dict[Any, int] = self.texts if isinstance(terms[0], str) else self.numbers
        self.terms.extend(map(numbers.__getitem__, terms))
        self.docs.extend(itertools.repeat(docnum, len(terms)))
        self.weights.extend(weights)

    def add_one(self, docnum: int, term: bytes, weight: float, value: bytes) -> None:
        if value or self.values:
            self._align_values()
            self.values.append(value)
        self.terms.append(self.numbers[term])
        self.docs.append(docnum)
        self.weights.append(weight)

    def _align_values(self) -> None:
        """Values are kept for every posting once one has a value (b"" for those without)."""
        missing = len(self.terms) - len(self.values)
        if missing:
            self.values.extend(itertools.repeat(b"", missing))

    def sorted_terms(self, fieldname: str) -> Iterator[TermPostings]:
        """The postings term by term in term order, each term's in document order."""
        keys = list(self.numbers)  # in number order: a dict keeps its insertion order
        order = sorted(range(len(keys)), key=keys.__getitem__)
        rank = numpy.empty(len(keys), dtype=numpy.int64)
        rank[order] = numpy.arange(len(keys), dtype=numpy.int64)
        ranks = rank[numpy.frombuffer(self.terms, dtype=numpy.uint32)]
        docs = numpy.frombuffer(self.docs, dtype=numpy.uint32)
        permutation = numpy.argsort((ranks << 32) | docs, kind="stable")
        ids = array("I", docs[permutation].tobytes())
        weights = array(
            "f", numpy.frombuffer(self.weights, dtype=numpy.float32)[permutation].tobytes()
        )
        values = [self.values[i] for i in permutation.tolist()] if self.values else []
        ends = numpy.cumsum(numpy.bincount(ranks, minlength=len(keys))).tolist()
        start = 0
        for number, end in zip(order, ends, strict=True):
            term_values = values[start:end]
            if term_values and not any(term_values):
                term_values = []  # as for a format without values: Whoosh writes none
            yield fieldname, keys[number], ids[start:end], weights[start:end], term_values
            start = end


class BoundedPool(PostingPool):
    """Postings grouped by field in flat arrays, never more than ``max_postings`` of them in
    memory (see the module docstring)."""

    def __init__(self, tempstore: Any, segment: Any, limitmb: int) -> None:
        super().__init__(tempstore, segment, limitmb=limitmb)
        self.runs: list[str] = []  # Whoosh's, untyped: the paths of the runs written
        self.max_postings = max(1, limitmb * 1024 * 1024 // POSTING_BYTES)
        self._fields: dict[str, _FieldPostings] = {}
        self._count = 0
        #: The most postings ever held at once, and how many runs were written (for tests).
        self.peak_postings = 0
        self.spills = 0

    def _field(self, fieldname: str) -> _FieldPostings:
        postings = self._fields.get(fieldname)
        if postings is None:
            postings = self._fields[fieldname] = _FieldPostings()
            self.fieldnames.add(fieldname)
        return postings

    def add(self, item: Posting) -> None:
        fieldname, tbytes, docnum, weight, vbytes = item
        self._field(fieldname).add_one(docnum, tbytes, weight, vbytes)
        self._count += 1
        self._note_peak()
        if self._count >= self.max_postings:
            self.save()

    def add_terms(
        self,
        fieldname: str,
        docnum: int,
        items: Iterable[tuple[bytes, int, float, bytes]],
        boost: float,
    ) -> int:
        """Pool one document's postings for one field, as ``field.index`` yields them
        (term, frequency, weight, value); return the field's length (the frequencies' sum).

        :meth:`add` for a whole field at once, its columns taken apart by ``zip`` and added
        at C speed. The bound holds exactly: a field that fills the pool spills it mid-field
        and goes on in a fresh one."""
        if not isinstance(items, list):
            items = list(items)
        self.fieldnames.add(fieldname)
        if not items:
            return 0
        terms, frequencies, weights, values = zip(*items, strict=True)
        if boost != 1.0:
            weights = tuple(weight * boost for weight in weights)
        self._add_field(fieldname, docnum, terms, weights, values)
        return sum(frequencies)

    def add_columns(
        self, fieldname: str, docnum: int, terms: list[str], counts: list[int], boost: float
    ) -> int:
        """:meth:`add_terms` for a field given as columns (``LangText.columns``): terms as
        text, each the term whose bytes are its UTF-8, and their frequencies, which are also
        their weights; no values."""
        self.fieldnames.add(fieldname)
        weights: Sequence[float] = counts if boost == 1.0 else [n * boost for n in counts]
        self._add_field(fieldname, docnum, terms, weights, ())
        return sum(counts)

    def _add_field(
        self,
        fieldname: str,
        docnum: int,
        terms: Sequence[bytes] | Sequence[str],
        weights: Sequence[float],
        values: Sequence[bytes],
    ) -> None:
        """Pool a field's postings in as many chunks as the room left needs, spilling when
        full: the bound holds exactly. ``values`` empty: the postings have none."""
        start = 0
        while start < len(terms):
            end = min(len(terms), start + self.max_postings - self._count)
            postings = self._field(fieldname)
            if start == 0 and end == len(terms):
                postings.add(docnum, terms, weights, values)
            else:
                postings.add(docnum, terms[start:end], weights[start:end], values[start:end])
            self._count += end - start
            self._note_peak()
            if self._count >= self.max_postings:
                self.save()
            start = end

    def _note_peak(self) -> None:
        if self._count > self.peak_postings:
            self.peak_postings = self._count

    def _sorted_terms(self) -> Iterator[TermPostings]:
        """What the pool holds, term by term in (field, term) order, each term's postings
        in document order."""
        for fieldname in sorted(self._fields):
            yield from self._fields[fieldname].sorted_terms(fieldname)

    def save(self) -> None:
        """Write what the pool holds as one run and empty it."""
        if not self._count:
            return
        path, handle = self._new_run()
        try:
            for fieldname, tbytes, ids, weights, values in self._sorted_terms():
                record = (fieldname, tbytes, ids.tobytes(), weights.tobytes(), values)
                pickle.dump(record, handle, pickle.HIGHEST_PROTOCOL)
        finally:
            handle.close()
        self._add_run(path)
        self._fields = {}
        self._count = 0
        self.spills += 1

    def _read_run(self, path: str) -> Iterator[TermPostings]:
        handle: BinaryIO = self._open_run(path)
        try:
            while True:
                try:
                    fieldname, tbytes, ids, weights, values = pickle.load(handle)
                except EOFError:
                    return
                yield fieldname, tbytes, array("I", ids), array("f", weights), values
        finally:
            handle.close()
            self._remove_run(path)

    def iter_terms(self) -> Iterator[TermPostings]:
        """Every term's postings in (field, term) order, each in document order."""
        if not self.runs:
            return self._sorted_terms()
        sources: list[Iterable[TermPostings]] = [self._read_run(path) for path in self.runs]
        sources.append(self._sorted_terms())  # the newest postings: the last run
        self.runs = []
        return _merge_terms(sources)

    def iter_postings(self) -> Iterator[Posting]:
        """Every posting in (field, term, document) order, as Whoosh's field writer takes them."""
        return _flatten(self.iter_terms())

    def cleanup(self) -> None:
        # Whoosh's own cleanup removes run paths from the working directory, not the
        # temporary storage the runs are in.
        for path in self.runs:
            with contextlib.suppress(OSError):
                self._remove_run(path)
        self.runs = []


def _merge_terms(sources: list[Iterable[TermPostings]]) -> Iterator[TermPostings]:
    """Merge runs (oldest first) into one (field, term) sequence, a term's postings from the
    runs concatenated in run order."""
    # The run's position breaks ties, so equal terms come out oldest run first.
    keyed = (
        ((record[0], record[1], position, record) for record in source)
        for position, source in enumerate(sources)
    )
    merged = heapq.merge(*keyed)
    for (fieldname, tbytes), group in itertools.groupby(merged, key=operator.itemgetter(0, 1)):
        records = [entry[3] for entry in group]
        if len(records) == 1:
            yield records[0]
            continue
        ids, weights, values = array("I"), array("f"), []
        ordered = True
        for _, _, more_ids, more_weights, more_values in records:
            if ids and more_ids and more_ids[0] < ids[-1]:
                ordered = False
            ids.extend(more_ids)
            weights.extend(more_weights)
            values.extend(more_values)
        if not ordered:
            ids, weights, values = _in_order(ids, weights, values)
        yield fieldname, tbytes, ids, weights, values


def _in_order(ids: array, weights: array, values: list[bytes]) -> tuple[array, array, list[bytes]]:
    """A term's postings sorted by document number (stable)."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    return (
        array("I", (ids[i] for i in order)),
        array("f", (weights[i] for i in order)),
        [values[i] for i in order] if values else values,
    )


def _flatten(terms: Iterable[TermPostings]) -> Iterator[Posting]:
    for fieldname, tbytes, ids, weights, values in terms:
        every = values or itertools.repeat(b"", len(ids))
        for docnum, weight, vbytes in zip(ids, weights, every, strict=True):
            yield fieldname, tbytes, docnum, weight, vbytes
