"""Phrases deferred by the query compiler, checked on the searcher's candidates.

The bulk of a search runs on whole posting lists (:mod:`indexer.vector`); every candidate is
first tested against its pair filter (:func:`may_hold_phrases`, cheap), and positions are read
only for the best of the survivors. Both check the search's budget between phrases and (in
:meth:`~indexer.vector.VectorIndex.holding`) every few candidates, and raise
:class:`~indexer.budget.BudgetExhausted` when it is gone: the searcher keeps the batches of
candidates verified before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy

from indexer.budget import Budget
from indexer.querylang import PhraseCheck
from indexer.schema import TEXT_FIELD
from indexer.vector import VectorIndex


def verify_phrases(
    index: VectorIndex,
    docnums: Sequence[int],
    phrases: Sequence[PhraseCheck],
    budget: Budget | None = None,
) -> set[int]:
    """The documents among ``docnums`` (ascending) where every phrase holds (any of its
    alternatives: field and term sequence, one per language form)."""
    holding = numpy.asarray(sorted(docnums), dtype=numpy.int64)
    for check in phrases:
        passed = numpy.empty(0, dtype=numpy.int64)
        for field, sequence in check.alternatives:
            pending = numpy.setdiff1d(holding, passed, assume_unique=True)
            if len(pending) == 0:
                break
            held = index.holding(field, list(sequence), pending, budget)
            passed = numpy.union1d(passed, held)
        holding = numpy.intersect1d(holding, passed, assume_unique=True)
    return set(holding.tolist())


def may_hold_phrases(
    index: VectorIndex,
    docnums: numpy.ndarray,
    phrases: Sequence[PhraseCheck],
    budget: Budget | None = None,
) -> numpy.ndarray:
    """Which of ``docnums`` (sorted) may hold every phrase, by the ``text`` pair filters
    alone: all that do, and a few percent of the others. Alternatives in other fields
    (``intitle:``) are not filtered and keep every document."""
    keep = numpy.ones(len(docnums), dtype=bool)
    for check in phrases:
        passed = numpy.zeros(len(docnums), dtype=bool)
        if budget is not None:
            budget.check()
        for field, sequence in check.alternatives:
            if field != TEXT_FIELD:
                passed[:] = True
                break
            passed |= index.may_hold(list(sequence), docnums)
        keep &= passed
    return keep
