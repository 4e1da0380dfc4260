"""Per-document checks with Whoosh's posting matchers: phrase positions and field scores.

The bulk of a search runs on whole posting lists (:mod:`indexer.vector`); what needs a
document's positions, or a score in a field the query did not match on, is asked of a small
set of candidates. Both walk each posting list once, forward, over the candidates in
document order, so the cost follows the number of candidates, not the size of the index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from whoosh.reading import TermNotFound

from indexer.querylang import PhraseCheck


def verify_phrases(
    searcher: Any, docnums: Sequence[int], phrases: Sequence[PhraseCheck]
) -> set[int]:
    """The documents among ``docnums`` (ascending) where every phrase holds."""
    holding = set(docnums)
    for check in phrases:
        passed: set[int] = set()
        for field, sequence in check.alternatives:
            pending = [docnum for docnum in docnums if docnum in holding and docnum not in passed]
            if not pending:
                break
            passed |= sequence_at(searcher, field, sequence, pending)
        holding &= passed
    return holding


def sequence_at(
    searcher: Any, field: str, sequence: Sequence[str], docnums: Sequence[int]
) -> set[int]:
    """Which of ``docnums`` (ascending) hold ``sequence`` at consecutive positions.

    Terms are visited rarest first, so a document missing a rare term costs one skip, and
    positions are decoded only for documents that hold every term.
    """
    reader = searcher.reader()
    order = sorted(range(len(sequence)), key=lambda i: reader.doc_frequency(field, sequence[i]))
    matchers: list[tuple[int, Any]] = []
    for offset in order:
        try:
            matchers.append((offset, searcher.postings(field, sequence[offset])))
        except TermNotFound:
            return set()
    found: set[int] = set()
    for docnum in docnums:
        present = True
        for _, matcher in matchers:
            if matcher.is_active() and matcher.id() < docnum:
                matcher.skip_to(docnum)
            if not matcher.is_active():
                return found
            if matcher.id() != docnum:
                present = False
                break
        if not present:
            continue
        starts: set[int] | None = None
        for offset, matcher in matchers:
            positions = {position - offset for position in matcher.value_as("positions")}
            starts = positions if starts is None else starts & positions
            if not starts:
                break
        if starts:
            found.add(docnum)
    return found


def term_scores(
    searcher: Any, docnums: Sequence[int], pairs: Sequence[tuple[str, str, float]]
) -> dict[int, float]:
    """Sum of ``weight × BM25(field, term)`` for each of ``docnums`` (ascending)."""
    reader = searcher.reader()
    scores: dict[int, float] = {}
    for field, term, weight in pairs:
        if (field, term) not in reader:
            continue
        matcher = searcher.postings(field, term)
        for docnum in docnums:
            if not matcher.is_active():
                break
            if matcher.id() < docnum:
                matcher.skip_to(docnum)
                if not matcher.is_active():
                    break
            if matcher.id() == docnum:
                scores[docnum] = scores.get(docnum, 0.0) + weight * matcher.score()
    return scores
