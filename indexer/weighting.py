"""BM25F as Whoosh computes it, with document lengths read from memory.

BM25 needs the length of the matched field in every scored document. Whoosh looks it up in
the segment's length column, a few microseconds per scored document through several layers
of Python; on common words, where block-max skipping cannot skip (every block of postings
holds some high-scoring document), that lookup was a third of a search. Here each segment's
lengths for a field are decoded once (:func:`field_lengths`, one numpy call), cached on the
(immutable) segment reader, and used by the numpy evaluator (:mod:`indexer.vector`) and by
Whoosh's scorers alike. Scores are identical.
"""

from __future__ import annotations

from typing import Any

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh import scoring
from whoosh.codec import whoosh3
from whoosh.util.numeric import byte_to_length

from indexer.columnread import column_array

_CACHE_ATTRIBUTE = "_sextant_lengths"
_LIST_ATTRIBUTE = "_sextant_length_lists"


class BM25F(scoring.BM25F):
    def scorer(self, searcher: Any, fieldname: str, text: bytes, qf: float = 1) -> Any:
        scorer = super().scorer(searcher, fieldname, text, qf=qf)
        if isinstance(scorer, scoring.WeightLengthScorer) and searcher.is_atomic():
            table = _length_list(searcher.reader(), fieldname)
            if table is not None:
                scorer.dfl = table.__getitem__
        return scorer


#: Whoosh stores a field length as one byte (a log-scale code); decoded once for all 256.
_LENGTH_OF_BYTE = numpy.asarray([byte_to_length(b) if b else 1 for b in range(256)], dtype=float)


def _length_list(reader: Any, fieldname: str) -> list[float] | None:
    """The same lengths as a list: indexing a list is cheaper than a numpy array for one
    document at a time, which is how Whoosh's scorers ask."""
    cache: dict[str, list[float] | None] | None = getattr(reader, _LIST_ATTRIBUTE, None)
    if cache is None:
        cache = {}
        setattr(reader, _LIST_ATTRIBUTE, cache)
    if fieldname not in cache:
        table = field_lengths(reader, fieldname)
        cache[fieldname] = None if table is None else table.tolist()
    return cache[fieldname]


def field_lengths(reader: Any, fieldname: str) -> numpy.ndarray | None:
    """A segment reader's lengths of ``fieldname`` per document (None: not a scored field)."""
    cache: dict[str, numpy.ndarray | None] | None = getattr(reader, _CACHE_ATTRIBUTE, None)
    if cache is None:
        cache = {}
        setattr(reader, _CACHE_ATTRIBUTE, cache)
    if fieldname not in cache:
        perdoc = getattr(reader, "_perdoc", None)
        column = None
        if perdoc is not None and hasattr(perdoc, "_cached_reader"):
            column = perdoc._cached_reader(whoosh3._lenfield(fieldname), whoosh3.LENGTHS_COLUMN)
        # Whoosh's own lookup falls back to 1 for a missing length; so does the table.
        cache[fieldname] = None if column is None else _LENGTH_OF_BYTE[column_array(column, "u1")]
    return cache[fieldname]
