"""Phrases deferred by the query compiler, checked on the searcher's candidates.

The bulk of a search runs on whole posting lists (:mod:`indexer.vector`); positions are read
only for the candidates that matter, from the posting blocks that hold them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy

from indexer.querylang import PhraseCheck
from indexer.vector import VectorIndex


def verify_phrases(
    index: VectorIndex, docnums: Sequence[int], phrases: Sequence[PhraseCheck]
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
            passed = numpy.union1d(passed, index.holding(field, list(sequence), pending))
        holding = numpy.intersect1d(holding, passed, assume_unique=True)
    return set(holding.tolist())
