"""The Whoosh schema: what a page becomes in the index.

Text fields take ``(lang, text)`` pairs and are analyzed by :mod:`indexer.analysis` in the
page's language (:class:`LangText`), bypassing Whoosh's token-object pipeline, which was the
single largest indexing cost. No page content is stored: titles are (result lists need them
for every hit), snippets come from the store. Link analysis scores live beside the index
(:mod:`indexer.rank`), so recomputing PageRank never rewrites documents.

Matching and scoring are split for speed: every searchable word of a page is in one field,
``text`` (title, body, prompt, anchor text, URL words, each part analyzed in the page's
language), so a query of several words is an intersection of single posting lists instead of
unions over six fields. Title, anchor text and headings are also indexed on their own, and
their weights are applied when the best candidates are re-scored (BM25F); the weights live in
this module and apply at query time, so tuning them needs no rebuild.
"""

from __future__ import annotations

import itertools
import pickle
import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh import columns, fields, formats

from indexer import pairfilter
from indexer.analysis import Analyzed, TermSequence, term_maker
from indexer.dates import UNKNOWN_DATE
from indexer.sizefilter import UNKNOWN_SIZE


class Weights(formats.Format):
    """Postings that carry their term frequency as their weight only, with no value.

    Whoosh's ``Frequency`` format also writes the frequency as a 4-byte value beside every
    posting's weight. Nothing reads it (searches score with weights, :mod:`indexer.vector`
    decodes document numbers and weights), and for ``text``, ``anchors`` and ``headings``
    it was 4 bytes a posting: measured on 20,000 pages, 35 MB of a 229 MB index (1.72x the
    text indexed). Whoosh's writer stores no values for a format of fixed size 0.
    """

    posting_size = 0

    def __init__(self) -> None:
        self.field_boost = 1.0
        self.options: dict[str, Any] = {}

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Iterator[Any]:
        raise NotImplementedError("LangText analyzes its own values")  # never called

    def encode(self, value: Any) -> bytes:
        return b""

    def combine(self, vs: Any) -> bytes:
        return b""


class LangText(fields.FieldType):
    """A text field analyzed in the document's language.

    Its value is ``(lang, text)``, or an :class:`~indexer.analysis.Analyzed` when the
    document builder has analyzed the text already. Positions are kept (phrase queries need
    them) unless ``positions=False``.
    """

    def __init__(self, *, stored: bool = False, positions: bool = True) -> None:
        self.format = formats.Positions() if positions else Weights()
        self.analyzer = None
        self.scorable = True
        self.stored = stored
        self.unique = False
        self.vector = None
        self.column_type = None

    def index(self, value: Any, **kwargs: Any) -> list[tuple[bytes, int, float, bytes]]:
        """Whoosh's (term, frequency, weight, value) for each term; a list, built by a
        comprehension, because yielding 8.6 million postings one by one from a generator
        was a twentieth of a 20,000-page build."""
        columns = self.columns(value)
        if columns is not None:
            terms, counts = columns
            return [
                (term.encode("utf-8"), n, float(n), b"")
                for term, n in zip(terms, counts, strict=True)
            ]
        if isinstance(value, Analyzed | TermSequence):
            found = value.positions
        else:
            lang, text = value
            found, _ = term_maker(lang).positions(text)
        if isinstance(self.format, formats.Positions):
            return [
                (term.encode("utf-8"), (n := len(poslist)), float(n), _positions(poslist))
                for term, poslist in found.items()
            ]
        return [
            (term.encode("utf-8"), (n := len(poslist)), float(n), b"")
            for term, poslist in found.items()
        ]

    def columns(self, value: Any) -> tuple[list[str], list[int]] | None:
        """The field's terms (as text: each term's bytes are its UTF-8) and their frequencies
        (its weights), for a value analyzed as a :class:`TermSequence` into a field without
        positions; else None (:meth:`index`).

        Whole columns, not a tuple per term, so that the pool takes them without a Python
        step per term (:meth:`indexer.pool.BoundedPool.add_columns`); as text, because the
        terms are interned strings that the pool looks up faster than fresh bytes."""
        if not isinstance(value, TermSequence) or isinstance(self.format, formats.Positions):
            return None
        return value.terms, value.counts

    def self_parsing(self) -> bool:
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


#: The field every word of a query is matched in: all the searchable text of a page.
TEXT_FIELD = "text"

#: Fields whose matches add to a hit's score, with their weights (BM25F: each field's BM25
#: times its weight, summed). The ``text`` field holds everything, so a word in a title counts
#: there and again here: titles, the anchor text other capsules chose, and headings are the
#: strongest evidence of what a page is about.
BOOST_FIELDS: dict[str, float] = {"title": 2.0, "anchors": 1.5, "headings": 0.5}

#: Where the positions of ``text`` live: not in its postings but in one compressed value per
#: document (:func:`text_columns`). Whoosh keeps a posting's positions inside the posting
#: block, so every block a search decodes carried them: for a common word, decoding its
#: postings was ten times slower than it needs to be, while positions are only wanted for the
#: few candidates of a phrase query, one document at a time.
POSITIONS_COLUMN = "textpos"
#: And which pairs of terms stand side by side in it: a Bloom filter that rules out most
#: documents a phrase query would otherwise decode positions for (:mod:`indexer.pairfilter`).
PAIRS_COLUMN = "textpairs"


_POSITIONS_HEADER = struct.Struct("<IIB")  # term count, position count, flags
#: Flags of the header: a second array follows; the arrays are 16-bit (fewer than 32,768
#: terms: nearly every page). Indexes written before the 16-bit arrays have flags 0 or 1.
_SECONDARY, _NARROW = 1, 2


def text_columns(analyzed: dict[str, list[int]] | Analyzed | TermSequence) -> dict[str, bytes]:
    """A document's ``text`` positions (term → positions, analyzed either way) as its
    :data:`POSITIONS_COLUMN` and :data:`PAIRS_COLUMN` values.

    Positions are: the document's distinct terms, then the term number at each position (-1
    for none), as machine integers (16-bit when the terms allow, half the bytes to compress
    and store), compressed. Chinese, Japanese and Korean text puts two terms (character and
    bigram) at one position; the second goes in a second array. Decoding is a split and two
    ``frombuffer`` calls (:class:`DocumentPositions`).
    """
    if isinstance(analyzed, TermSequence):
        return _sequence_columns(analyzed)
    positions = analyzed.positions if isinstance(analyzed, Analyzed) else analyzed
    terms = list(positions)
    if not terms:
        return _NO_TEXT_COLUMNS
    lengths = [len(positions[term]) for term in terms]
    where = numpy.fromiter(
        itertools.chain.from_iterable(positions.values()), dtype=numpy.int64, count=sum(lengths)
    )
    which = numpy.repeat(numpy.arange(len(terms), dtype=numpy.int32), lengths)
    size = int(where.max()) + 1
    stored = _stored_type(len(terms))
    primary: numpy.ndarray = numpy.full(size, -1, dtype=stored)
    primary[where] = which
    secondary: numpy.ndarray | None = None
    if int(numpy.count_nonzero(primary >= 0)) < len(where):
        # CJK: two terms at a position, the first in primary, the other in secondary.
        order = numpy.argsort(where, kind="stable")
        where, which = where[order], which[order]
        repeated = numpy.zeros(len(where), dtype=bool)
        repeated[1:] = where[1:] == where[:-1]
        primary[where[~repeated]] = which[~repeated]
        secondary = numpy.full(size, -1, dtype=stored)
        secondary[where[repeated]] = which[repeated]
    return _columns(terms, primary, secondary)


_NO_TEXT_COLUMNS = {POSITIONS_COLUMN: b"", PAIRS_COLUMN: pairfilter.NOTHING}


def _stored_type(terms: int) -> numpy.dtype[Any]:
    return numpy.dtype(numpy.int16 if terms <= numpy.iinfo(numpy.int16).max else numpy.int32)


def _sequence_columns(analyzed: TermSequence) -> dict[str, bytes]:
    """:func:`text_columns` of text with one term a position: the sequence is the array,
    cut after its last term (as positions lists would end there)."""
    if not analyzed.terms:
        return _NO_TEXT_COLUMNS
    at = analyzed.at
    size = int(numpy.flatnonzero(at >= 0)[-1]) + 1
    return _columns(analyzed.terms, at[:size].astype(_stored_type(len(analyzed.terms))), None)


def _columns(
    terms: list[str], primary: numpy.ndarray, secondary: numpy.ndarray | None
) -> dict[str, bytes]:
    narrow = primary.dtype == numpy.int16
    flags = (_SECONDARY if secondary is not None else 0) | (_NARROW if narrow else 0)
    parts = [
        _POSITIONS_HEADER.pack(len(terms), len(primary), flags),
        "\x00".join(terms).encode("utf-8"),
        primary.tobytes(),
    ]
    if secondary is not None:
        parts.append(secondary.tobytes())
    header_and_terms = parts[0] + struct.pack("<I", len(parts[1])) + parts[1]
    return {
        POSITIONS_COLUMN: zlib.compress(header_and_terms + b"".join(parts[2:]), 1),
        PAIRS_COLUMN: pairfilter.encode(terms, primary, secondary),
    }


class DocumentPositions:
    """The decoded positions of one document's ``text``.

    A phrase check asks for two or three terms of a document with hundreds, so a term's
    number is found by searching the encoded term list rather than by building a dict of
    all of them (which cost more than the rest of the check).
    """

    __slots__ = ("_primary", "_secondary", "_terms")

    def __init__(self, blob: bytes) -> None:
        self._terms = b"\x00"
        self._primary = numpy.empty(0, dtype=numpy.int32)
        self._secondary: numpy.ndarray | None = None
        if not blob:
            return
        raw = zlib.decompress(blob)
        _count, size, flags = _POSITIONS_HEADER.unpack_from(raw)
        at = _POSITIONS_HEADER.size
        (terms_length,) = struct.unpack_from("<I", raw, at)
        at += 4
        self._terms = b"\x00" + raw[at : at + terms_length] + b"\x00"
        at += terms_length
        stored = numpy.dtype(numpy.int16 if flags & _NARROW else numpy.int32)
        self._primary = numpy.frombuffer(raw, dtype=stored, count=size, offset=at)
        if flags & _SECONDARY:
            self._secondary = numpy.frombuffer(
                raw, dtype=stored, count=size, offset=at + stored.itemsize * size
            )

    def number(self, term: str) -> int | None:
        """The term's number in this document, or None when the document lacks it."""
        found = self._terms.find(b"\x00" + term.encode("utf-8") + b"\x00")
        return None if found < 0 else self._terms.count(b"\x00", 0, found)

    def of(self, term: str) -> numpy.ndarray:
        """The positions of ``term`` (sorted; empty when the document lacks it)."""
        number = self.number(term)
        if number is None:
            return numpy.empty(0, dtype=numpy.int64)
        return numpy.nonzero(self._at(number))[0]

    def holds(self, sequence: Sequence[str]) -> bool:
        """Whether the terms of ``sequence`` occur one after another somewhere."""
        numbers = [self.number(term) for term in sequence]
        if not numbers or None in numbers:
            return False
        starts = numpy.nonzero(self._at(numbers[0]))[0]
        for shift, number in enumerate(numbers[1:], 1):
            following = starts + shift
            following = following[following < len(self._primary)]
            found = self._primary[following] == number
            if self._secondary is not None:
                found |= self._secondary[following] == number
            starts = following[found] - shift
            if len(starts) == 0:
                return False
        return len(starts) > 0

    def _at(self, number: int | None) -> numpy.ndarray:  # None matches nothing
        hits = self._primary == number
        if self._secondary is not None:
            hits |= self._secondary == number
        return hits


#: ``flags``: a directory's index file (/index.gmi): a fold shows its directory URL instead.
FLAG_INDEX_FILE = 1
#: ``flags``: a page without text of its own (an image, an archive, a feed file), found only
#: by its URL words and the labels of links to it; ranked after pages with text.
FLAG_TEXTLESS = 2

#: Gap between the parts of ``text`` (title, body, anchor labels...) so that a phrase never
#: matches across two of them.
PART_GAP = 100


def build_schema() -> fields.Schema:
    return fields.Schema(
        # Identity: the store's page id (for deletes and the rank table) and the URL.
        pid=fields.ID(stored=True, unique=True),
        url=fields.ID(stored=True, unique=True),
        # Text. ``text`` decides what matches and is scored first; the boost fields re-score
        # the best candidates (see indexer.query). Phrases are checked on ``text`` positions,
        # intitle: and inurl: on their own fields.
        text=LangText(positions=False),
        title=LangText(stored=True),
        anchors=LangText(positions=False),
        headings=LangText(positions=False),
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
        # A start page's capsule names, for navigational queries (indexer.navigation).
        capsule=Keywords(),
        # Facts shown with results; stored only (no filter needs them, and every indexed
        # NUMERIC value costs several tiered terms).
        first_seen=fields.STORED(),
        fetched=fields.STORED(),
        date=fields.STORED(),  # the page's date, ISO (indexer.dates); filters read ``dates``
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
        # The page's date in days since 1970-01-01 (-1 unknown) for after:, before: and
        # sort:newest (indexer.dates).
        dates=fields.COLUMN(columns.NumericColumn("q", default=UNKNOWN_DATE)),
        # Facts about the page the ranking needs for every candidate (FLAG_* below).
        flags=fields.COLUMN(columns.NumericColumn("q", default=0)),
        # Word positions of ``text``, per document (see POSITIONS_COLUMN).
        textpos=fields.COLUMN(columns.VarBytesColumn()),
        textpairs=fields.COLUMN(
            columns.FixedBytesColumn(pairfilter.FILTER_BYTES, default=pairfilter.UNKNOWN)
        ),
    )
