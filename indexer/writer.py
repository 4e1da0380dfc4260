"""A Whoosh segment writer with the per-posting overheads we measured taken out.

Whoosh turns every (term, document) pair into a posting and spends most of an index build on
them (about 440 per page here). Profiling a 3,000-page build showed three costs that do not
depend on what is indexed, and this writer removes them:

* **Field-length lookups.** While writing postings, Whoosh asks the per-document reader for the
  length of the posting's field in its document, once per posting, through a column reader
  (about 4 µs each: 14% of the build). :class:`_Lengths` reads each field's length column once
  into a list and answers from it.
* **The posting pool.** Whoosh's pool estimates every posting's memory size (a dozen
  arithmetic operations per posting), keeps a five-tuple per posting and sorts them all at the
  end. :class:`indexer.pool.BoundedPool` groups postings by term as they arrive, within a
  fixed bound (see there). :meth:`TunedSegmentWriter.add_document` hands it a field's
  postings in one call, not one call per posting.

It also writes posting blocks for the way searches read them: whole posting lists decoded
into numpy arrays (:mod:`indexer.vector`), not skipped through posting by posting. A block
holds 1,024 postings instead of 128, and its document-number deltas and weights are machine
arrays pickled in the current protocol instead of tuples of Python numbers in protocol 2, so
numpy reads them in place. Whoosh's own reader reads these blocks as it reads its own.

(Whoosh's codec option to store short posting lists inline in the term table, ``inlinelimit``
above 1, would save more, but it fails in whoosh-reloaded 2.7.5: ``W3TermInfo`` has no
``set_inline``.)
"""

from __future__ import annotations

import itertools
import operator
import pickle
import zlib
from array import array
from collections.abc import Iterable
from typing import Any

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.codec import whoosh3
from whoosh.filedb.structfile import StructFile
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import SegmentWriter

from indexer.pool import BoundedPool, TermPostings
from indexer.termtable import CompactTermTable

#: zlib level for posting blocks; 0 stores them uncompressed. Whoosh keeps a block's document
#: numbers, weights and positions in one compressed pickle, so skipping through the postings
#: of a common word decompresses all of its positions, block after block (about 100 µs a
#: block for "the"). Measured on 20,000 pages: level 0 gives builds 23% faster than Whoosh's
#: level 3 and query p99 30% lower, for an index twice the size (about 21 KB per page).
COMPRESSION = 0
#: Postings per block (Whoosh writes 128). Searches decode a term's whole posting list into
#: numpy arrays (:mod:`indexer.vector`) rather than skipping through it, and each block costs
#: them a seek, an unpickling and two array conversions on top of its postings.
BLOCK_POSTINGS = 1024
#: From this many postings a block's statistics and deltas are taken with numpy (a few µs a
#: call, then nanoseconds a posting); below it Python's loops over the arrays cost less.
NUMPY_POSTINGS = 64


class _PostingsWriter(whoosh3.W3PostingsWriter):
    """Whoosh's postings writer, given a term's postings whole (:meth:`add_term_postings`)
    and writing blocks of machine arrays (:meth:`_write_block`)."""

    # Whoosh's per-block state, which its untyped base class sets up.
    _maxweight: float
    _minlength: int | None
    _maxlength: int

    def add_term_postings(
        self, ids: array, weights: array, values: list[bytes], lengths: array | None
    ) -> None:
        """A whole term's postings at once, block by block, as Whoosh's ``add_posting`` one
        by one would write them: the same blocks, statistics and bytes (the last block is left
        buffered for ``finish_postings``, as there).

        ``values`` is empty for formats without values; ``lengths`` is the field's length
        of every document of the segment (0: none), None for an unscored field. Writing a
        20,000-page segment posting by posting through Whoosh's field writer was a quarter
        of a build's CPU: five Python calls and a dozen comparisons for each of 8.7 million
        postings, where a block's statistics are one ``max`` and one ``min`` over arrays.
        """
        limit = self._blocklimit
        for start in range(0, len(ids), limit):
            if start:
                self._write_block()
            block = ids[start : start + limit]
            self._ids = block
            self._weights = weights[start : start + limit]
            self._values = values[start : start + limit]
            self._maxweight = max(0.0, max(self._weights))
            if lengths is None:
                continue
            if len(block) < NUMPY_POSTINGS:
                present = [length for length in map(lengths.__getitem__, block) if length]
                if present:
                    self._minlength = min(present)
                    self._maxlength = max(present)
            else:
                found = numpy.frombuffer(lengths, dtype=numpy.uint32)[_numbers(block)]
                found = found[found > 0]
                if len(found):
                    self._minlength = int(found.min())
                    self._maxlength = int(found.max())

    def _write_block(self, last: bool = False) -> None:
        """Whoosh's block layout (length, pickled block info, pickled data), with the data
        pickled in the current protocol rather than protocol 2: under protocol 2 a machine
        array pickles as a list of Python numbers and bytes as a latin-1 string."""
        if not self._blockcount:
            self._postfile.write(whoosh3.WHOOSH3_HEADER_MAGIC)
        self._terminfo.add_block(self)
        data = pickle.dumps(
            (self._mini_ids(), self._mini_weights(), self._mini_values()),
            pickle.HIGHEST_PROTOCOL,
        )
        if self._compression:
            data = zlib.compress(data, self._compression)
        ids = self._ids
        info = pickle.dumps(
            (
                len(ids),
                ids[-1],
                self._maxweight,
                self._compression,
                length_to_byte(self._minlength),
                length_to_byte(self._maxlength),
            ),
            2,
        )
        length = len(info) + len(data)
        self._postfile.write_int(-length if last else length)  # negative: the last block
        self._postfile.write(info)
        self._postfile.write(data)
        self._blockcount += 1
        self._new_block()

    def _mini_ids(self) -> array:
        """Document-number deltas as a machine array of the narrowest type that holds them.

        Whoosh pickles a tuple of Python ints, which unpickles one int object at a time and
        is then copied into numpy element by element: most of what decoding a block cost a
        search (:func:`indexer.postings.decode`). An array unpickles as one copy of
        its bytes and numpy reads it in place; Whoosh's own reader iterates it like the
        tuple.
        """
        ids = self._ids
        if len(ids) >= NUMPY_POSTINGS:
            spread = numpy.diff(_numbers(ids), prepend=numpy.uint32(0))
            code = _narrowest(int(spread.max()))
            return array(code, spread.astype(_DTYPES[code]).tobytes())
        deltas = array("I", map(operator.sub, ids, itertools.chain((0,), ids)))
        code = _narrowest(max(deltas))
        return deltas if code == "I" else array(code, deltas)

    def _mini_weights(self) -> array | float | None:
        """The weights (term frequencies) as the machine array they are kept in, for the same
        reason; a block of equal weights stays one number, as Whoosh writes it."""
        weights = self._weights
        first = weights[0]
        if len(weights) >= NUMPY_POSTINGS:
            same = bool((numpy.frombuffer(weights, dtype=numpy.float32) == first).all())
        else:
            same = all(weight == first for weight in weights)
        if same:
            return None if first == 1.0 else first
        return weights


#: The array type codes of block deltas, narrowest first, with their numpy types.
_DTYPES: dict[str, type[numpy.unsignedinteger[Any]]] = {
    "B": numpy.uint8,
    "H": numpy.uint16,
    "I": numpy.uint32,
}
_LARGEST = [(code, int(numpy.iinfo(dtype).max)) for code, dtype in _DTYPES.items()]


def _narrowest(widest: int) -> str:
    """The type code of the narrowest unsigned array that holds numbers up to ``widest``."""
    return next(code for code, largest in _LARGEST if widest <= largest)


def _numbers(ids: array) -> numpy.ndarray:
    """Document numbers (an ``array("I")``) as numpy reads them in place."""
    return numpy.frombuffer(ids, dtype=numpy.uint32)


class _CountingFile(StructFile):
    """A written file that knows its position without asking the operating system.

    A buffered file's ``tell()`` is an ``lseek`` system call each time, and a segment's
    postings and term files are asked for theirs three times a term (where its postings
    start and end, where its entry goes): 4.5 % of a 20,000-page build's CPU.
    """

    def __init__(self, made: StructFile) -> None:
        super().__init__(made.file, name=made._name, onclose=made.onclose)
        self._at: int = made.file.tell()

    def write(self, data: Any) -> int:
        written: int = self.file.write(data)
        self._at += written
        return written

    def tell(self) -> int:
        return self._at

    def seek(self, *args: Any) -> int:
        moved: int = self.file.seek(*args)
        self._at = self.file.tell()
        return moved

    def write_array(self, arry: Any) -> None:
        super().write_array(arry)  # may write through the file itself, not write()
        self._at = self.file.tell()


class _FieldWriter(whoosh3.W3FieldWriter):
    """Whoosh's field writer with the term table of :mod:`indexer.termtable`, writing
    through :class:`_CountingFile`."""

    _tindex: Any  # Whoosh's, untyped

    def __init__(self, codec: Any, storage: Any, segment: Any) -> None:
        super().__init__(codec, storage, segment)
        self._tindex = CompactTermTable(self._tindex)

    def _create_file(self, ext: str) -> StructFile:
        return _CountingFile(super()._create_file(ext))


class _Codec(whoosh3.W3Codec):
    def field_writer(self, storage: Any, segment: Any) -> Any:
        return _FieldWriter(self, storage, segment)

    def postings_writer(self, dbfile: Any, byteids: bool = False) -> Any:
        if byteids:  # term vectors; not used by our schema
            return super().postings_writer(dbfile, byteids)
        return _PostingsWriter(
            dbfile,
            blocklimit=self._blocklimit,
            compression=self._compression,
            inlinelimit=self._inlinelimit,
        )


def codec() -> whoosh3.W3Codec:
    return _Codec(blocklimit=BLOCK_POSTINGS, compression=COMPRESSION)


class _Lengths:
    """Field lengths of every document of the segment being written, read once per field.

    One machine array per field, 4 bytes a document, held while the segment's postings are
    written (a worker's peak): a list of Python ints held an int object of its own for each
    length over 256 (five fields of a 100,000-document segment: 7.2 MB as lists, 2.1 MB as
    arrays).
    """

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._tables: dict[str, array | None] = {}

    def doc_field_length(self, docnum: int, fieldname: str, default: int = 0) -> int | None:
        table = self.table(fieldname)
        if table is None:
            return default
        return table[docnum] or None

    def table(self, fieldname: str) -> array | None:
        """Every document's length in ``fieldname`` (0: none), or None for an unscored field."""
        if fieldname not in self._tables:
            self._tables[fieldname] = self._load(fieldname)
        return self._tables[fieldname]

    def _load(self, fieldname: str) -> array | None:
        column = self._reader._cached_reader(whoosh3._lenfield(fieldname), whoosh3.LENGTHS_COLUMN)
        if column is None:
            return None
        # Same mapping as W3PerDocReader.doc_field_length: byte 0 means "no length" (None).
        return array("I", (byte_to_length(value) if value else 0 for value in column))


class TunedSegmentWriter(SegmentWriter):
    """``SegmentWriter`` with the pool and length lookups above."""

    def __init__(self, ix: Any, *, limitmb: int, lock: bool = True) -> None:
        super().__init__(ix, _lk=lock, limitmb=limitmb, codec=codec())
        self.pool = BoundedPool(self._tempstorage, self.newsegment, limitmb)

    def add_document(self, **fields: Any) -> None:
        """Whoosh's ``SegmentWriter.add_document`` for the fields of our schema, handing each
        field's postings to the pool in one :meth:`indexer.pool.BoundedPool.add_terms` call
        instead of one call per posting. Same documents, lengths, stored values and columns;
        spelling and term-vector fields, which our schema does not use, go through Whoosh's
        own method."""
        self._check_state()
        schema = self.schema
        fieldnames = sorted(name for name in fields if not name.startswith("_"))
        self._check_fields(schema, fieldnames)
        if any(schema[name].separate_spelling() or schema[name].vector for name in fieldnames):
            super().add_document(**fields)
            return
        perdocwriter = self.perdocwriter
        docnum = self.docnum
        docboost = self._doc_boost(fields)
        add_terms = self.pool.add_terms
        add_columns = self.pool.add_columns
        perdocwriter.start_doc(docnum)
        try:
            for fieldname in fieldnames:
                value = fields.get(fieldname)
                if value is None:
                    continue
                field = schema[fieldname]
                length = 0
                if field.indexed:
                    boost = self._field_boost(fields, fieldname, docboost)
                    columns = getattr(field, "columns", None)
                    found = columns(value) if columns is not None else None
                    if found is not None:
                        terms, counts = found
                        added = add_columns(fieldname, docnum, terms, counts, boost)
                    else:
                        added = add_terms(fieldname, docnum, field.index(value), boost)
                    if field.scorable:
                        length = added
                customval = fields.get(f"_stored_{fieldname}", value)
                perdocwriter.add_field(
                    fieldname, field, customval if field.stored else None, length
                )
                column = field.column_type
                if column and customval is not None:
                    perdocwriter.add_column_value(
                        fieldname, column, field.to_column_value(customval)
                    )
        except Exception:
            perdocwriter.cancel_doc()
            raise
        perdocwriter.finish_doc()
        self._added = True
        self.docnum += 1

    def _flush_segment(self) -> None:
        self.perdocwriter.close()
        reader = self.per_document_reader()
        try:
            _write_terms(self.fieldwriter, self.schema, _Lengths(reader), self.pool.iter_terms())
        finally:
            self.fieldwriter.close()
            reader.close()


def _write_terms(
    fieldwriter: Any, schema: Any, lengths: _Lengths, terms: Iterable[TermPostings]
) -> None:
    """Whoosh's ``FieldWriter.add_postings`` a term at a time instead of a posting at a time
    (:meth:`_PostingsWriter.add_term_postings`): the pool already holds each term's postings
    as arrays, in (field, term) order."""
    current = None
    table: array | None = None
    for fieldname, tbytes, ids, weights, values in terms:
        if fieldname != current:
            if current is not None:
                fieldwriter.finish_field()
            fieldwriter.start_field(fieldname, schema[fieldname])
            current = fieldname
            table = lengths.table(fieldname)
        fieldwriter.start_term(tbytes)
        fieldwriter._postwriter.add_term_postings(ids, weights, values, table)
        fieldwriter.finish_term()
    if current is not None:
        fieldwriter.finish_field()
