"""The Whoosh schema: what a page becomes in the index.

Text fields take ``(lang, text)`` pairs and are analyzed by :mod:`indexer.analysis` in the
page's language (:class:`LangText`), bypassing Whoosh's token-object pipeline, which was the
single largest indexing cost. No page content is stored: titles are (result lists need them
for every hit), snippets come from the store. Link analysis scores live beside the index
(:mod:`indexer.rank`), so recomputing PageRank never rewrites documents.

Field boosts are applied at query time (:mod:`indexer.querylang`), not baked into postings, so
they can be tuned without a rebuild.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator
from typing import Any

from whoosh import columns, fields, formats

from indexer.analysis import Analyzed, term_maker
from indexer.sizefilter import UNKNOWN_SIZE


class LangText(fields.FieldType):
    """A text field analyzed in the document's language.

    Its value is ``(lang, text)``, or an :class:`~indexer.analysis.Analyzed` when the
    document builder has analyzed the text already. Positions are kept (phrase queries need
    them) unless ``positions=False``.
    """

    def __init__(self, *, stored: bool = False, positions: bool = True) -> None:
        self.format = formats.Positions() if positions else formats.Frequency()
        self.analyzer = None
        self.scorable = True
        self.stored = stored
        self.unique = False
        self.vector = None
        self.column_type = None

    def index(self, value: Any, **kwargs: Any) -> Iterator[tuple[bytes, int, float, bytes]]:
        if isinstance(value, Analyzed):
            found = value.positions
        else:
            lang, text = value
            found, _ = term_maker(lang).positions(text)
        if isinstance(self.format, formats.Positions):
            for term, poslist in found.items():
                yield term.encode("utf-8"), len(poslist), float(len(poslist)), _positions(poslist)
        else:
            pack = formats.pack_uint
            for term, poslist in found.items():
                yield term.encode("utf-8"), len(poslist), float(len(poslist)), pack(len(poslist))

    def self_parsing(self) -> bool:
        return False

    def has_morph(self) -> bool:
        return False


# Most terms occur once in a document, at a position below a few thousand: their encoded
# posting value is looked up instead of built.
_SINGLE_POSITION = [formats.Positions().encode([p]) for p in range(4096)]


def _positions(poslist: list[int]) -> bytes:
    """Exactly what ``whoosh.formats.Positions.encode`` writes, faster for the common cases."""
    if len(poslist) == 1 and poslist[0] < 4096:
        return _SINGLE_POSITION[poslist[0]]
    deltas = [poslist[0]]
    deltas.extend(b - a for a, b in itertools.pairwise(poslist))
    return formats.pack_uint(len(deltas)) + pickle.dumps(deltas, 2)


class Keywords(fields.FieldType):
    """Exact, unscored terms given as a list (a host's domain suffixes); for filters only."""

    def __init__(self) -> None:
        self.format = formats.Existence()
        self.analyzer = None
        self.scorable = False
        self.stored = False
        self.unique = False
        self.vector = None
        self.column_type = None

    def index(self, value: Any, **kwargs: Any) -> Iterator[tuple[bytes, int, float, bytes]]:
        for term in set(value):
            yield term.encode("utf-8"), 1, 1.0, b""


#: Text fields a plain query word searches, with their query-time boosts. Titles and the
#: anchor text other capsules chose are the strongest evidence of what a page is about;
#: the URL's words are weak evidence (but all there is for an image).
TEXT_FIELDS: dict[str, float] = {
    "title": 3.0,
    "anchors": 2.0,
    "prompt": 2.0,
    "headings": 1.5,
    "body": 1.0,
    "urlwords": 0.5,
}


def build_schema() -> fields.Schema:
    return fields.Schema(
        # Identity: the store's page id (for deletes and the rank table) and the URL.
        pid=fields.ID(stored=True, unique=True),
        url=fields.ID(stored=True, unique=True),
        # Text.
        title=LangText(stored=True),
        headings=LangText(),
        body=LangText(),
        anchors=LangText(),
        prompt=LangText(),
        urlwords=LangText(),
        # Filters.
        host=fields.ID(stored=True),  # punycode authority (host, or host:port)
        domain=Keywords(),  # every dot-suffix of the host, for domain:
        kind=fields.ID(),  # "page" or "input" (a 1x endpoint)
        mime=fields.ID(stored=True),
        lang=fields.ID(stored=True),  # primary subtag, declared or detected
        charset=fields.ID(stored=True),
        size=fields.STORED(),  # bytes; size: filters read the ``sizes`` column below
        feed=fields.ID(stored=True),  # gemsub, atom, rss
        # Facts shown with results.
        # Facts shown with results; stored only (no filter needs them, and every indexed
        # NUMERIC value costs several tiered terms).
        first_seen=fields.STORED(),
        fetched=fields.STORED(),
        inbound=fields.STORED(),
        # Mirrors and duplicates share this key and are folded into one result (through the
        # ``fold`` column below; stored for people, not indexed: no query needs it).
        group=fields.STORED(),
        # Per-document columns searchers load into arrays once per commit: the page id (to
        # look up link scores) and a 64-bit hash of ``group`` (to fold duplicates).
        key=fields.COLUMN(columns.NumericColumn("q")),
        fold=fields.COLUMN(columns.NumericColumn("q")),
        # Size in bytes (-1 unknown) for size: filters (indexer.sizefilter).
        sizes=fields.COLUMN(columns.NumericColumn("q", default=UNKNOWN_SIZE)),
    )
