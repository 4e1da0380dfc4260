"""Prefix search (``sol*``): a word's beginning stands for the words of the index it starts.

A prefix is matched against the indexed terms of ``text`` (folded and stemmed in each page's
language), so ``sol*`` finds *solar* and *solstice*, and ``kartof*`` finds *Kartoffeln*. Its
cost is what bounds it: every term it stands for is a posting list to load and add up, and a
short prefix of a large index stands for thousands. So a prefix needs at least
:data:`MIN_PREFIX_CHARS` letters, at most :data:`MAX_SCANNED` terms of the index are looked
at (in alphabetical order, the budget checked along the way), and of those the
:data:`MAX_EXPANSIONS` held by the most pages are searched: the words people mean by a
prefix are the common ones, and a rare misspelling sharing it adds nothing to the results.
"""

from __future__ import annotations

from typing import Any

from whoosh import query as wq

from indexer.budget import Budget, paced

MIN_PREFIX_CHARS = 3
MAX_EXPANSIONS = 64
MAX_SCANNED = 4096
#: Terms looked at between two budget checks.
SCAN_CHECKS = 64


class WordPrefix(wq.Prefix):
    """The words of ``fieldname`` starting with ``text``, scored like an OR of them
    (evaluated by :mod:`indexer.vector`, which expands it with :func:`expand`)."""


def expand(reader: Any, fieldname: str, prefix: str, budget: Budget) -> list[str]:
    """The terms ``prefix`` stands for: of the first :data:`MAX_SCANNED` terms of
    ``fieldname`` starting with it, the :data:`MAX_EXPANSIONS` most documents hold (ties
    in alphabetical order)."""
    if fieldname not in reader.schema:
        return []
    found: list[tuple[int, bytes]] = []
    scanned = reader.expand_prefix(fieldname, prefix)
    for count, btext in enumerate(paced(scanned, budget, SCAN_CHECKS)):
        if count >= MAX_SCANNED:
            break
        found.append((-reader.doc_frequency(fieldname, btext), btext))
    found.sort()
    return [btext.decode("utf-8") for _, btext in found[:MAX_EXPANSIONS]]
