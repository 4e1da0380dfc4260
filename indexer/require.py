"""Whoosh's ``Require`` query (match both, score only the first) with a bug fixed.

``Require(text, filter)`` is how filters restrict a text query without adding to its score
while Whoosh's block-max skipping keeps working on the text. In whoosh-reloaded 2.7.5,
``RequireMatcher.skip_to_quality`` moves the scored matcher and then asks the inner
intersection to realign, whose ``_find_next`` asserts the two matchers are *not* on the same
document, which they are whenever the skip lands on a document the filter also holds: an
``AssertionError`` mid-search (or, under ``python -O``, a document counted twice).
"""

from __future__ import annotations

from typing import Any

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh import query as wq
from whoosh.matching.wrappers import RequireMatcher


class _FixedRequireMatcher(RequireMatcher):
    def skip_to_quality(self, minquality: float) -> int:
        skipped: int = self.a.skip_to_quality(minquality)
        if self.a.is_active() and self.b.is_active() and self.a.id() != self.b.id():
            self.child._find_next()
        return skipped

    def replace(self, minquality: float = 0) -> Any:
        replaced = super().replace(minquality)
        if isinstance(replaced, RequireMatcher) and not isinstance(replaced, _FixedRequireMatcher):
            return _FixedRequireMatcher(replaced.a, replaced.b)
        return replaced


class Require(wq.Require):
    """``whoosh.query.Require`` producing the fixed matcher."""

    def matcher(self, searcher: Any, context: Any = None) -> Any:
        scored = self.a.matcher(searcher, context)
        required = self.b.matcher(searcher, searcher.boolean_context())
        return _FixedRequireMatcher(scored, required)
