"""BM25F as Whoosh computes it, with document lengths read from memory.

BM25 needs the length of the matched field in every scored document. Whoosh looks it up in
the segment's length column, a few microseconds per scored document through several layers
of Python; on common words, where block-max skipping cannot skip (every block of postings
holds some high-scoring document), that lookup was a third of the search. Here each
segment's lengths for a field are decoded once into a list, cached on the (immutable)
segment reader, and the scorer indexes into it. Scores are identical.
"""

from __future__ import annotations

from typing import Any

from whoosh import scoring
from whoosh.codec import whoosh3
from whoosh.util.numeric import byte_to_length

_CACHE_ATTRIBUTE = "_sextant_lengths"


class BM25F(scoring.BM25F):
    def scorer(self, searcher: Any, fieldname: str, text: bytes, qf: float = 1) -> Any:
        scorer = super().scorer(searcher, fieldname, text, qf=qf)
        if isinstance(scorer, scoring.WeightLengthScorer) and searcher.is_atomic():
            table = field_lengths(searcher.reader(), fieldname)
            if table is not None:
                scorer.dfl = table.__getitem__
        return scorer


def field_lengths(reader: Any, fieldname: str) -> list[int] | None:
    """A segment reader's lengths of ``fieldname`` per document (None: not a scored field)."""
    cache: dict[str, list[int] | None] | None = getattr(reader, _CACHE_ATTRIBUTE, None)
    if cache is None:
        cache = {}
        setattr(reader, _CACHE_ATTRIBUTE, cache)
    if fieldname not in cache:
        perdoc = getattr(reader, "_perdoc", None)
        column = None
        if perdoc is not None and hasattr(perdoc, "_cached_reader"):
            column = perdoc._cached_reader(whoosh3._lenfield(fieldname), whoosh3.LENGTHS_COLUMN)
        # Whoosh's own lookup falls back to 1 for a missing length; so does the table.
        cache[fieldname] = (
            None if column is None else [byte_to_length(b) if b else 1 for b in column]
        )
    return cache[fieldname]
