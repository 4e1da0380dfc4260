"""The posting pool of :class:`indexer.writer.TunedSegmentWriter`: bounded, spilling by term.

Whoosh's pool keeps a five-tuple per posting (about 160 bytes with its objects) and sorts them
all at the end; when it outgrows ``limitmb`` it pickles every posting on its own into sorted
runs and heap-merges them back posting by posting, which made a 3,000-page build 40% slower
when forced. So this project used to size the pool from physical memory to avoid spilling at
all, and a worker's pool grew with its share of the corpus (558 MB for the largest process at
20,000 pages, 894 MB at 40,000).

Here each term holds three arrays: document numbers and weights as machine numbers, values
as references (a term's single position is a shared cached ``bytes``): about a sixth of
Whoosh's memory. The pool holds at most ``max_postings``; when full it writes itself out as
a *run* in (field, term) order, one pickled record per term whose document numbers and
weights are whole arrays, and empties. At the end the runs and what is left in memory are
merged term by term, not posting by posting: documents arrive in increasing document number,
so a term's postings from a later run simply follow those of an earlier one and merging a
term is concatenating its arrays. Memory is then the bound plus one term's postings.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import operator
import pickle
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.writing import PostingPool

#: Bytes a pooled posting takes in memory, measured with tracemalloc on the benchmark's
#: documents; turns ``limitmb`` into a posting count.
POSTING_BYTES = 80

Posting = tuple[str, bytes, int, float, bytes]
#: One term's postings: field, term, document numbers ("I"), weights ("f"), encoded values
#: (none for a format without values: Whoosh writes no empty value either).
TermPostings = tuple[str, bytes, array, array, list[bytes]]
_FREQUENCY = operator.itemgetter(1)


class BoundedPool(PostingPool):
    """Postings grouped by field and term in compact arrays, never more than ``max_postings``
    of them in memory (see the module docstring)."""

    def __init__(self, tempstore: Any, segment: Any, limitmb: int) -> None:
        super().__init__(tempstore, segment, limitmb=limitmb)
        self.runs: list[str] = []  # Whoosh's, untyped: the paths of the runs written
        self.max_postings = max(1, limitmb * 1024 * 1024 // POSTING_BYTES)
        self._fields: dict[str, dict[bytes, tuple[array, array, list[bytes]]]] = {}
        self._unordered: set[tuple[str, bytes]] = set()
        self._count = 0
        #: The largest document number pooled: a field for a later one cannot be out of order.
        self._last_doc = -1
        #: The most postings ever held at once, and how many runs were written (for tests).
        self.peak_postings = 0
        self.spills = 0

    def add(self, item: Posting) -> None:
        fieldname, tbytes, docnum, weight, vbytes = item
        terms = self._fields.get(fieldname)
        if terms is None:
            terms = self._fields[fieldname] = {}
            self.fieldnames.add(fieldname)
        postings = terms.get(tbytes)
        if postings is None:
            postings = terms[tbytes] = (array("I"), array("f"), [])
        ids, weights, values = postings
        if ids and docnum < ids[-1]:  # merged segments can arrive out of order
            self._unordered.add((fieldname, tbytes))
        ids.append(docnum)
        weights.append(weight)
        if vbytes:
            values.append(vbytes)
        if docnum > self._last_doc:
            self._last_doc = docnum
        self._count += 1
        if self._count > self.peak_postings:  # inline: once per posting of every merge
            self.peak_postings = self._count
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

        :meth:`add` for a whole field at once: the field's terms are looked up once, not per
        posting, which was a tenth of the build's CPU. The bound holds exactly: a field that
        fills the pool spills it mid-field and goes on in a fresh one. The room and the order
        are checked once per chunk that fits, not posting by posting."""
        if not isinstance(items, list):
            items = list(items)
        length: int = sum(map(_FREQUENCY, items))
        self.fieldnames.add(fieldname)
        out_of_order = docnum < self._last_doc
        self._last_doc = max(self._last_doc, docnum)
        start = 0
        while start < len(items):
            room = self.max_postings - self._count
            chunk = items if start == 0 and len(items) < room else items[start : start + room]
            start += len(chunk)
            if out_of_order:  # sorting a term already in order is harmless, and rare
                self._unordered.update((fieldname, item[0]) for item in chunk)
            terms = self._fields.setdefault(fieldname, {})
            get = terms.get
            for tbytes, _, weight, vbytes in chunk:
                postings = get(tbytes)
                if postings is None:
                    postings = terms[tbytes] = (array("I"), array("f"), [])
                postings[0].append(docnum)
                postings[1].append(weight * boost)
                if vbytes:
                    postings[2].append(vbytes)
            self._count += len(chunk)
            self._note_peak()
            if self._count >= self.max_postings:
                self.save()
        return length

    def _note_peak(self) -> None:
        if self._count > self.peak_postings:
            self.peak_postings = self._count

    def _sorted_terms(self) -> Iterator[TermPostings]:
        """What the pool holds, term by term in (field, term) order, each term's postings
        in document order."""
        for fieldname, tbytes in self._unordered:
            terms = self._fields[fieldname]
            terms[tbytes] = _in_order(*terms[tbytes])
        self._unordered.clear()
        for fieldname in sorted(self._fields):
            terms = self._fields[fieldname]
            for tbytes in sorted(terms):
                yield (fieldname, tbytes, *terms[tbytes])

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
