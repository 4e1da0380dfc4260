"""Query evaluation with numpy over Whoosh's postings: the searcher's fast path.

Whoosh evaluates a query by walking matcher objects document by document, a few
microseconds of Python per step; block-max skipping avoids most steps for rare words, but
not for common ones, where every block holds some high-scoring document. On a 20,000-page
index an AND of three everyday words took 60 ms, a single common word 30 ms, and both grow
with the index. Here the same compiled query (:mod:`indexer.querylang`) is evaluated on whole
posting lists at once: each term's document numbers and BM25 scores become numpy arrays
(decoded from Whoosh's posting blocks, one block at a time, and cached per index snapshot),
ANDs are sorted-array intersections, ORs are unions with summed scores, filters are
intersections with cached boolean masks, and the top hits come from ``argpartition``. The
match count is exact for free.

Scores are Whoosh's BM25F to the last bit (same idf, same average lengths, same formula;
tested against Whoosh on the same index), so ranking does not depend on which path ran.
Phrases are the AND of their words here, with positions checked on the surviving documents
(:meth:`VectorIndex.holding`): for ``text`` from the per-document positions column
(:data:`~indexer.schema.POSITIONS_COLUMN`) of the documents its pair filter
(:mod:`indexer.pairfilter`) does not rule out, for the small positional fields from the posting
blocks that hold the candidates. A Whoosh node the evaluator does not know raises
:class:`Unsupported`: a programming error, since it evaluates what :mod:`indexer.querylang`
compiles.

Posting blocks are read by :mod:`indexer.postings`. An AND's parts are evaluated smallest
first (sized from the term tables), each within the documents the ones before matched, and a
Require's filter first when it is far smaller; a common term wanted at a few documents only
(those, or the boost fields at a ranking's candidates) is read in just the blocks that hold
them, when that skips most of its blocks.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy
from whoosh import query as wq
from whoosh.codec import whoosh3
from whoosh.reading import TermNotFound

from indexer import pairfilter, postings
from indexer.budget import Budget, BudgetExhausted, paced
from indexer.require import Require
from indexer.schema import PAIRS_COLUMN, POSITIONS_COLUMN, TEXT_FIELD, DocumentPositions
from indexer.sizefilter import ColumnRange
from indexer.weighting import field_lengths
from indexer.wildcard import WordPrefix, expand
from sextant.sorted_ids import index_in_sorted

#: Cached posting entries (document numbers and scores) per snapshot, least recently used
#: terms dropped first: 16 bytes an entry, so 16 million entries is 256 MB. Measured on the
#: 100,000-page benchmark index: the everyday words of a query mix hold about 12 million
#: entries, and with half this cache they kept evicting each other (a search cost 11 ms
#: instead of 8).
CACHE_ENTRIES = 16_000_000
#: Work on more than 1/this of all documents goes through an array over every document: a
#: union's parts are summed in one, a lookup reads a table of positions (see _positions_in).
DENSE_SHARE = 16
#: Decoded posting blocks kept for phrase checks in positional fields (title, URL words).
BLOCK_CACHE = 2000
#: Documents whose decoded ``text`` positions are kept for phrase checks (about 20 KB each).
POSITION_CACHE = 2000
#: Candidates whose positions are checked between two budget checks: decoding one takes about
#: 75 µs, so a search overruns its deadline by about a millisecond at most.
POSITION_CHECKS = 16
#: Terms loaded between two budget checks when a prefix or a whole field is expanded.
TERM_CHECKS = 64
#: Word prefixes whose expansions are kept (a few dozen short strings each).
EXPANSION_CACHE = 1024
#: Terms whose term-table entries are kept (a few hundred bytes each).
TERM_INFOS = 8192
#: A term held by this many times more documents than a score is asked for is read only
#: in the blocks that hold them (see VectorIndex._partial): at 100 candidates, terms in over
#: 6,400 documents, which have at least a few blocks of 1,024 postings to skip.
SPARSE_RATIO = 64
#: ... and when at most 1/this of its blocks hold one of them.
SPARSE_BLOCKS = 4
#: Block directories kept for reading terms in part: 16 bytes a block of 1,024 postings, so
#: a million blocks (16 MB) covers a billion postings.
DIRECTORY_BLOCKS = 1_000_000


@dataclass(frozen=True, slots=True)
class DocSet:
    """Sorted, unique document numbers and a score for each."""

    ids: numpy.ndarray  # int64
    scores: numpy.ndarray  # float64

    def __len__(self) -> int:
        return len(self.ids)


EMPTY = DocSet(numpy.empty(0, dtype=numpy.int64), numpy.empty(0))


class Unsupported(Exception):
    """A query node this evaluator does not handle. Nothing falls back to Whoosh's matchers:
    :mod:`indexer.querylang` compiles only nodes handled here, so this is a programming error
    and fails the search."""


class VectorIndex:
    """Posting lists of one index snapshot as numpy arrays, cached; thread-safe."""

    def __init__(
        self, searcher: Any, weighting: Any, *, cache_entries: int = CACHE_ENTRIES
    ) -> None:
        self.searcher = searcher
        self.weighting = weighting
        self.reader = searcher.reader()
        self.documents = self.reader.doc_count_all()
        self._leaves: list[tuple[Any, int]] = (
            [(self.reader, 0)] if self.reader.is_atomic() else list(self.reader.leaf_readers())
        )
        self._cache: OrderedDict[tuple[Any, ...], DocSet] = OrderedDict()
        self._cached_entries = 0
        self._cache_limit = cache_entries
        self._norms: dict[str, numpy.ndarray] = {}
        # Where each block of a cached posting list starts, per segment: positions are read
        # later from just the blocks that hold the candidates. Keyed like the posting cache
        # and dropped with the postings, so it is bounded by the same limit.
        self._directories: dict[tuple[Any, ...], dict[int, postings.Directory]] = {}
        self._blocks: OrderedDict[tuple[int, str, bytes, int], tuple[Any, Any]] = OrderedDict()
        self._positions: OrderedDict[int, DocumentPositions] = OrderedDict()
        self._columns: dict[tuple[str, int], Any] = {}
        self._live: numpy.ndarray | None = None
        self._expansions: dict[tuple[str, str], list[str]] = {}
        self._sparse_directories: OrderedDict[tuple[int, str, bytes], postings.Directory] = (
            OrderedDict()
        )
        self._directory_blocks = 0
        self._infos: dict[tuple[str, bytes], tuple[list[tuple[Any, int, Any]], int]] = {}
        self._lock = threading.Lock()

    # --- evaluation --------------------------------------------------------------------

    def evaluate(
        self, query: Any, within: numpy.ndarray | None = None, *, budget: Budget | None = None
    ) -> DocSet:
        """The documents matching ``query`` with their scores; raises :class:`Unsupported`.

        ``within`` (sorted document numbers), when given, is a promise that only those
        documents matter: phrase positions are then checked on them alone (an excluded
        phrase only needs checking where the rest of the query matched).

        ``budget`` is checked before each part of the query and every few candidates of a
        phrase check. When it runs out the answer degrades only where the documents kept
        are still all true matches: an OR keeps the parts evaluated so far, a phrase the
        candidates verified so far (so the result is a subset of the full answer, never a
        page that does not match). Where no such subset exists (an AND still missing a part,
        anything under a NOT, whose subset would let excluded pages through),
        :class:`~indexer.budget.BudgetExhausted` is raised. ``budget.exhausted`` tells the
        caller whether the result is partial.
        """
        return self._evaluate(query, within, Budget.unlimited() if budget is None else budget)

    def _evaluate(
        self, query: Any, within: numpy.ndarray | None, budget: Budget, exact: bool = False
    ) -> DocSet:
        """:meth:`evaluate`; ``exact``: no partial answer (under a NOT), raise instead."""
        budget.check()
        if isinstance(query, wq.Phrase):
            return self._phrase(query, within, budget, exact)
        if isinstance(query, wq.Term):
            if within is not None:
                return self._term_within(query.fieldname, query.text, query.boost, within)
            return self._term(query.fieldname, query.text, query.boost)
        if isinstance(query, Require | wq.Require):
            if self._filter_first(query.a, query.b):
                # "site:host the": the host's pages first, then "the" read where they are.
                required = self._evaluate(query.b, within, budget, exact)
                kept = self._evaluate(query.a, required.ids, budget, exact)
                return _restrict(kept, required, self.documents)
            kept = self._evaluate(query.a, within, budget, exact)
            required = self._evaluate(query.b, kept.ids, budget, exact)
            return _restrict(kept, required, self.documents)
        if isinstance(query, wq.AndNot):
            kept = self._evaluate(query.a, within, budget, exact)
            excluded = self._evaluate(query.b, kept.ids, budget, exact=True)
            mask = ~_members(kept.ids, excluded.ids, self.documents)
            return DocSet(kept.ids[mask], kept.scores[mask])
        if isinstance(query, wq.And):
            # Phrases last: by then the other parts have narrowed where positions matter.
            # The others smallest first (by the term tables: no postings read), each evaluated
            # where the ones before matched, so that a common word can be read in part.
            plain = [sub for sub in query.subqueries if not _has_phrase(sub)]
            phrased = [sub for sub in query.subqueries if _has_phrase(sub)]
            sizes = [self._estimate(sub) for sub in plain]
            unknown_first = [-1 if size is None else size for size in sizes]
            order = sorted(range(len(plain)), key=unknown_first.__getitem__)
            result = None
            for sub in [plain[i] for i in order] + phrased:
                part = self._evaluate(sub, within if result is None else result.ids, budget, exact)
                result = part if result is None else _intersect(result, part, self.documents)
            assert result is not None
            return _boosted(result, query.boost)
        if isinstance(query, wq.Or):
            if all(type(sub) is wq.Term for sub in query.subqueries):
                return _boosted(self._forms(query.subqueries, within), query.boost)
            parts: list[DocSet] = []
            try:
                for sub in query.subqueries:
                    parts.append(self._evaluate(sub, within, budget, exact))
            except BudgetExhausted:
                if exact or not parts:
                    raise
            return _boosted(_union(parts, self.documents), query.boost)
        if isinstance(query, wq.Not):
            live = self.live() if within is None else within
            excluded = self._evaluate(query.query, live, budget, exact=True)
            kept = live[~_members(live, excluded.ids, self.documents)]
            return DocSet(kept, numpy.zeros(len(kept)))
        if isinstance(query, wq.ConstantScoreQuery):
            child = self._evaluate(query.child, within, budget, exact)
            return DocSet(child.ids, numpy.full(len(child), float(query.score)))
        if isinstance(query, WordPrefix):
            return _boosted(self._prefix(query.fieldname, query.text, budget), query.boost)
        if isinstance(query, wq.Prefix):
            terms = self.reader.expand_prefix(query.fieldname, query.text)
            return self._every_term(query.fieldname, terms, budget)
        if isinstance(query, wq.Every) and query.fieldname:
            terms = self.reader.lexicon(query.fieldname)
            return self._every_term(query.fieldname, terms, budget)
        if isinstance(query, ColumnRange):
            ids = query._matching(self.reader).astype(numpy.int64)
            return DocSet(ids, numpy.zeros(len(ids)))
        raise Unsupported(type(query).__name__)

    def expansion(self, fieldname: str, prefix: str, budget: Budget | None = None) -> list[str]:
        """The terms a word prefix stands for (:func:`indexer.wildcard.expand`), cached."""
        key = (fieldname, prefix)
        with self._lock:
            found = self._expansions.get(key)
        if found is None:
            found = expand(self.reader, fieldname, prefix, budget or Budget.unlimited())
            with self._lock:
                if len(self._expansions) >= EXPANSION_CACHE:
                    self._expansions.clear()
                self._expansions[key] = found
        return found

    def _prefix(self, fieldname: str, prefix: str, budget: Budget) -> DocSet:
        """A word prefix: its expansion's postings, scored and summed like an OR of words
        (cached like a word's forms: the same prefix is typed again while paging)."""
        terms = self.expansion(fieldname, prefix, budget)
        parts = [self._term(fieldname, term, 1.0) for term in paced(terms, budget, TERM_CHECKS)]
        return self._cached(("prefix", fieldname, prefix), _union, parts, self.documents)

    def _every_term(self, fieldname: str, terms: Any, budget: Budget) -> DocSet:
        """The unscored union of ``terms`` (a prefix's expansion, a field's lexicon: a URL
        prefix can expand to thousands)."""
        loaded = [self._term(fieldname, t, 1.0) for t in paced(terms, budget, TERM_CHECKS)]
        return _unscored(_union(loaded, self.documents))

    def _phrase(
        self, query: wq.Phrase, within: numpy.ndarray | None, budget: Budget, exact: bool
    ) -> DocSet:
        """A phrase nested in OR or NOT: the AND of its words, positions checked (on
        ``within`` only, when given). Scored as the sum of its words' BM25, like the phrases
        the searcher checks itself."""
        words = list(query.words)
        result = self._term(query.fieldname, words[0], query.boost)
        for word in words[1:]:
            budget.check()
            result = _intersect(
                result, self._term(query.fieldname, word, query.boost), self.documents
            )
        if within is not None:
            result = _restrict(result, DocSet(within, numpy.zeros(len(within))), self.documents)
        held = self.holding(query.fieldname, words, result.ids, budget, exact=exact)
        mask = _members(result.ids, held, self.documents)
        return DocSet(result.ids[mask], result.scores[mask])

    def holding(
        self,
        fieldname: str,
        sequence: list[str],
        docnums: numpy.ndarray,
        budget: Budget | None = None,
        *,
        exact: bool = True,
    ) -> numpy.ndarray:
        """Which of ``docnums`` (sorted) hold ``sequence`` at consecutive positions.

        Candidates missing a word are dropped with the cached posting arrays; positions are
        then read only from the posting blocks that hold a remaining candidate (block headers
        say which), and decoded only for those candidates.

        When ``budget`` runs out during the position checks, ``exact`` (the default) raises
        :class:`~indexer.budget.BudgetExhausted`; otherwise the documents found holding the
        sequence so far are returned (a subset of the answer).
        """
        budget = Budget.unlimited() if budget is None else budget
        candidates = numpy.asarray(docnums, dtype=numpy.int64)
        btexts = []
        for word in sequence:
            budget.check()
            docs = self._term(fieldname, word, 1.0)
            candidates = candidates[_members(candidates, docs.ids, self.documents)]
            btexts.append(word if isinstance(word, bytes) else word.encode("utf-8"))
        if len(candidates) == 0:
            return candidates
        keep: list[int] = []
        try:
            if fieldname == TEXT_FIELD and POSITIONS_COLUMN in self.reader.schema:
                candidates = candidates[self.may_hold(list(sequence), candidates)]
                self._holding_by_document(list(sequence), candidates, budget, keep)
            else:
                self._holding_by_block(fieldname, btexts, candidates, budget, keep)
        except BudgetExhausted:
            if exact:
                raise
        return numpy.asarray(keep, dtype=numpy.int64)

    def _holding_by_block(
        self,
        fieldname: str,
        btexts: list[bytes],
        candidates: numpy.ndarray,
        budget: Budget,
        keep: list[int],
    ) -> None:
        """:meth:`holding` in a small positional field: adds to ``keep``, ascending, the
        candidates whose posting values hold the sequence."""
        decode = self.reader.schema[fieldname].format.decode_positions
        for leaf, offset in self._leaves:
            count = leaf.doc_count_all()
            local = candidates[(candidates >= offset) & (candidates < offset + count)] - offset
            if len(local) == 0:
                continue
            values = [self._block_values(leaf, offset, fieldname, btext, local) for btext in btexts]
            for docnum in paced(local.tolist(), budget, POSITION_CHECKS):
                starts: set[int] | None = None
                for shift, by_doc in enumerate(values):
                    encoded = by_doc.get(docnum)
                    if encoded is None:
                        starts = None
                        break
                    positions = {position - shift for position in decode(encoded)}
                    starts = positions if starts is None else starts & positions
                    if not starts:
                        break
                if starts:
                    keep.append(docnum + offset)

    def may_hold(self, sequence: list[str], docnums: numpy.ndarray) -> numpy.ndarray:
        """Which of ``docnums`` (sorted) may hold the ``text`` terms of ``sequence`` at
        consecutive positions: all that do, and a few percent of the others
        (:mod:`indexer.pairfilter`), without decoding any positions."""
        result = numpy.ones(len(docnums), dtype=bool)
        for leaf, offset in self._leaves:
            count = leaf.doc_count_all()
            inside = (docnums >= offset) & (docnums < offset + count)
            if not inside.any() or not leaf.has_column(PAIRS_COLUMN):
                continue
            column = self._column(leaf, offset, PAIRS_COLUMN)
            result[inside] = pairfilter.may_hold(column, docnums[inside] - offset, sequence)
        return result

    def _holding_by_document(
        self, sequence: list[str], candidates: numpy.ndarray, budget: Budget, keep: list[int]
    ) -> None:
        """:meth:`holding` in ``text``: adds to ``keep``, ascending, the candidates whose
        positions column holds the sequence (so a budget running out mid-way leaves the
        candidates verified so far)."""
        for docnum in paced(candidates.tolist(), budget, POSITION_CHECKS):
            if self._document_positions(docnum).holds(sequence):
                keep.append(docnum)

    def _document_positions(self, docnum: int) -> DocumentPositions:
        """A document's ``text`` positions, decoded once and kept for the next check."""
        with self._lock:
            cached = self._positions.get(docnum)
        if cached is not None:
            return cached
        for index in range(len(self._leaves) - 1, -1, -1):
            leaf, offset = self._leaves[index]
            if docnum >= offset:
                break
        decoded = DocumentPositions(self._column(leaf, offset, POSITIONS_COLUMN)[docnum - offset])
        with self._lock:
            self._positions[docnum] = decoded
            if len(self._positions) > POSITION_CACHE:
                self._positions.popitem(last=False)
        return decoded

    def _column(self, leaf: Any, offset: int, name: str) -> Any:
        """A segment's column reader, untranslated (the stored bytes), opened once."""
        column = self._columns.get((name, offset))
        if column is None:
            column = self._columns[(name, offset)] = leaf.column_reader(name, translate=False)
        return column

    def _block_values(
        self, leaf: Any, offset: int, fieldname: str, btext: bytes, wanted: numpy.ndarray
    ) -> dict[int, bytes]:
        """The encoded posting values (positions) of ``wanted`` (sorted segment document
        numbers) for one term, decoding only the blocks that contain one of them (found
        through the directory recorded when the term's postings were loaded) and keeping
        decoded blocks for the next check."""
        if (fieldname, btext) not in leaf:
            return {}
        with self._lock:
            directory = self._directories.get(self._term_key(fieldname, btext), {}).get(offset)
        matcher = postings.leaf_matcher(leaf, fieldname, btext)
        found: dict[int, bytes] = {}
        if directory is None or not isinstance(matcher, whoosh3.W3LeafMatcher):
            for docnum in wanted.tolist():
                if matcher.is_active() and matcher.id() < docnum:
                    matcher.skip_to(docnum)
                if matcher.is_active() and matcher.id() == docnum:
                    found[docnum] = matcher.value()
            return found
        blocks = numpy.searchsorted(directory.last_ids, wanted)
        for block in numpy.unique(blocks[blocks < len(directory.starts)]).tolist():
            key = (offset, fieldname, btext, block)
            with self._lock:
                decoded = self._blocks.get(key)
            if decoded is None:
                matcher._goto(int(directory.starts[block]))
                matcher._read_data()
                ids = numpy.cumsum(numpy.asarray(matcher._data[0], dtype=numpy.int64))
                decoded = (ids, matcher._data[2])
                with self._lock:
                    self._blocks[key] = decoded
                    if len(self._blocks) > BLOCK_CACHE:
                        self._blocks.popitem(last=False)
            ids, values = decoded
            chunk = wanted[blocks == block]
            at = numpy.minimum(numpy.searchsorted(ids, chunk), len(ids) - 1)
            for docnum, index in zip(chunk.tolist(), at.tolist(), strict=True):
                if ids[index] == docnum:
                    found[docnum] = values[index]
        return found

    def scores_at(
        self,
        docnums: numpy.ndarray,
        pairs: list[tuple[str, str, float]],
        budget: Budget | None = None,
    ) -> numpy.ndarray:
        """Sum of ``weight × BM25(field, term)`` for each of ``docnums`` (sorted); ``budget``
        is checked before each term (raises :class:`~indexer.budget.BudgetExhausted`)."""
        budget = Budget.unlimited() if budget is None else budget
        total = numpy.zeros(len(docnums))
        for fieldname, term, weight in paced(pairs, budget, 1):
            docs = self._term_at(fieldname, term, weight, docnums)
            total[index_in_sorted(docnums, docs.ids)] += docs.scores
        return total

    def _term_at(
        self, fieldname: str, text: str | bytes, boost: float, docnums: numpy.ndarray
    ) -> DocSet:
        """A term's postings and scores at ``docnums`` (sorted) only: read in part where
        that pays (:meth:`_partial`), otherwise whole (and cached) and then restricted."""
        found = self._partial(fieldname, text, docnums)
        if found is not None:
            return _boosted(found, boost)
        docs = self._term(fieldname, text, boost)
        return _restrict(docs, DocSet(docnums, numpy.zeros(len(docnums))), self.documents)

    def _term_within(
        self, fieldname: str, text: str | bytes, boost: float, within: numpy.ndarray
    ) -> DocSet:
        """A term where only ``within`` (sorted) matters: at those documents when read in
        part (:meth:`_partial`), otherwise all its postings (cached), unrestricted."""
        found = self._partial(fieldname, text, within)
        return self._term(fieldname, text, boost) if found is None else _boosted(found, boost)

    def _partial(self, fieldname: str, text: str | bytes, docnums: numpy.ndarray) -> DocSet | None:
        """A term's postings and scores at ``docnums`` (sorted), read from only the blocks
        that hold them; None when the term is better read whole.

        A term held by many more documents than asked about, and not cached, is read so (its
        block directory kept for the next time): the title, anchor and heading scores of
        "the" at a ranking's hundred candidates took its 1.1 million postings decoded and
        scored in full, and "site:host the" all 600,000 postings of "the" in the text for
        a capsule of ten pages, in two of its 586 blocks.
        """
        if fieldname not in self.reader.schema:
            return EMPTY
        field = self.reader.schema[fieldname]
        if not field.scorable:
            return None
        btext = _term_bytes(field, text)
        with self._lock:
            if self._term_key(fieldname, btext) in self._cache:
                return None
        return self._sparse(fieldname, btext, docnums)

    def _estimate(self, query: Any) -> int | None:
        """At most how many documents ``query`` matches, from the term tables alone (no
        postings read); None for the parts that cannot be sized so."""
        if type(query) is wq.Term:
            if query.fieldname not in self.reader.schema:
                return 0
            btext = _term_bytes(self.reader.schema[query.fieldname], query.text)
            return self._term_infos(query.fieldname, btext)[1]
        if isinstance(query, Require | wq.Require | wq.And):
            parts = (query.a, query.b) if isinstance(query, wq.Require) else query.subqueries
            known = [size for size in map(self._estimate, parts) if size is not None]
            return min(known) if known else None  # within the smallest part
        if isinstance(query, wq.Or):
            sizes = [self._estimate(sub) for sub in query.subqueries]
            known = [size for size in sizes if size is not None]
            return sum(known) if len(known) == len(sizes) else None
        return None

    def _filter_first(self, scored: Any, required: Any) -> bool:
        """Whether a Require evaluates its filter first: when the filter is known to match
        far fewer documents than the scored part may (a host's pages, "the")."""
        filter_size = self._estimate(required)
        if filter_size is None:
            return False
        scored_size = self._estimate(scored)
        return scored_size is None or filter_size * SPARSE_RATIO <= scored_size

    def _sparse(self, fieldname: str, btext: bytes, docnums: numpy.ndarray) -> DocSet | None:
        """:meth:`_partial` from the blocks that may hold ``docnums``; None when the term is
        better read whole: held by under :data:`SPARSE_RATIO` times as many documents, with
        postings inlined in a term table, or with more than 1/:data:`SPARSE_BLOCKS` of its
        blocks holding one of them (an AND with a word of a thousand pages touches nearly
        every block of a common word: reading it whole costs the same and is cached)."""
        found, frequency = self._term_infos(fieldname, btext)
        if not found:
            return EMPTY
        if frequency < SPARSE_RATIO * len(docnums):
            return None
        reads: list[tuple[Any, int, postings.Directory, numpy.ndarray]] = []
        touched = blocks_read = 0
        for leaf, offset, info in found:
            local = docnums[(docnums >= offset) & (docnums < offset + leaf.doc_count_all())]
            if len(local) == 0:
                continue
            blocks = self._directory(leaf, offset, fieldname, btext, info)
            if blocks is None:
                return None
            touched += postings.blocks_holding(blocks, local - offset)
            blocks_read += len(blocks)
            reads.append((leaf, offset, blocks, local - offset))
        if touched * SPARSE_BLOCKS > blocks_read:
            return None
        ids: list[numpy.ndarray] = []
        weights: list[numpy.ndarray] = []
        for leaf, offset, blocks, local in reads:
            read = postings.read_at(leaf, blocks, local)
            found_ids, found_weights = _undeleted(leaf, read.ids, read.weights)  # whoever asked
            ids.append(found_ids + offset)
            weights.append(found_weights)
        if not ids:
            return EMPTY
        at = numpy.concatenate(ids)
        return DocSet(at, self._bm25(fieldname, frequency, numpy.concatenate(weights), at))

    def _directory(
        self, leaf: Any, offset: int, fieldname: str, btext: bytes, info: Any
    ) -> postings.Directory | None:
        """A term's block directory in one segment, read from its block headers once and
        kept (least recently used dropped first, :data:`DIRECTORY_BLOCKS` blocks in all)."""
        key = (offset, fieldname, btext)
        with self._lock:
            blocks = self._sparse_directories.get(key)
            if blocks is not None:
                self._sparse_directories.move_to_end(key)
                return blocks
        blocks = postings.directory(leaf, info)
        if blocks is None:
            return None
        with self._lock:
            if key not in self._sparse_directories:
                self._sparse_directories[key] = blocks
                self._directory_blocks += len(blocks)
            while self._directory_blocks > DIRECTORY_BLOCKS and len(self._sparse_directories) > 1:
                _, dropped = self._sparse_directories.popitem(last=False)
                self._directory_blocks -= len(dropped)
        return blocks

    def live(self) -> numpy.ndarray:
        """Every document number not deleted."""
        if self._live is None:
            mask = numpy.ones(self.documents, dtype=bool)
            for leaf, offset in self._leaves:
                if leaf.has_deletions():
                    deleted = numpy.fromiter(leaf.deleted_docs_set, dtype=numpy.int64)
                    mask[deleted + offset] = False
            self._live = numpy.nonzero(mask)[0]
        return self._live

    # --- postings ------------------------------------------------------------------------

    def _term(self, fieldname: str, text: str | bytes, boost: float) -> DocSet:
        if fieldname not in self.reader.schema:
            return EMPTY
        field = self.reader.schema[fieldname]
        btext = _term_bytes(field, text)
        key = self._term_key(fieldname, btext)
        loaded = self._cached(key, self._load, *key)
        return _boosted(loaded, boost)

    def _term_key(self, fieldname: str, btext: bytes) -> tuple[str, bytes, bool]:
        """A term's key in the posting cache, shared by its block directories so that
        they are evicted together (see _cached)."""
        return fieldname, btext, bool(self.reader.schema[fieldname].scorable)

    def _forms(self, terms: list[wq.Term], within: numpy.ndarray | None = None) -> DocSet:
        """The union of a word's forms (its stem in each language, as the query compiler
        writes a word): cached like a term, since every query with the word needs it and
        adding up a common word's forms costs more than looking up each of them. A word
        found in one form only is that form's cached postings, not a second copy. Where
        only ``within`` matters and some form is read in part there, the union is of the
        forms as read (not cached)."""
        if within is not None:
            partial = [self._partial(term.fieldname, term.text, within) for term in terms]
            if any(found is not None for found in partial):
                return _union(
                    [
                        self._term(term.fieldname, term.text, term.boost)
                        if found is None
                        else _boosted(found, term.boost)
                        for term, found in zip(terms, partial, strict=True)
                    ],
                    self.documents,
                )
        parts = [self._term(term.fieldname, term.text, term.boost) for term in terms]
        present = [part for part in parts if len(part)]
        if len(present) <= 1:
            return present[0] if present else EMPTY
        key = tuple((term.fieldname, term.text, term.boost) for term in terms)
        return self._cached(key, _union, present, self.documents)

    def _cached(self, key: tuple[Any, ...], make: Callable[..., DocSet], *args: Any) -> DocSet:
        """The posting cache: least recently used entries dropped first, counted in entries."""
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        made = make(*args)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:  # another thread made it meanwhile: count it once
                self._cache.move_to_end(key)
                return found
            self._cache[key] = made
            self._cached_entries += len(made)
            while self._cached_entries > self._cache_limit and len(self._cache) > 1:
                dropped_key, dropped = self._cache.popitem(last=False)
                self._cached_entries -= len(dropped)
                self._directories.pop(dropped_key, None)
        return made

    def _term_infos(self, fieldname: str, btext: bytes) -> tuple[list[tuple[Any, int, Any]], int]:
        """Each segment holding a term, with its offset and the term's entry in the segment's
        term table; and the document frequency summed over them (the idf's). Kept for the
        next :data:`TERM_INFOS` asked: a search sizes its parts, then reads them, and each
        lookup is a hash probe into every segment's term table."""
        key = (fieldname, btext)
        with self._lock:
            known = self._infos.get(key)
        if known is not None:
            return known
        found: list[tuple[Any, int, Any]] = []
        frequency = 0
        for leaf, offset in self._leaves:
            try:
                info = leaf.term_info(fieldname, btext)
            except TermNotFound:
                continue
            frequency += info.doc_frequency()
            found.append((leaf, offset, info))
        with self._lock:
            if len(self._infos) >= TERM_INFOS:
                self._infos.clear()
            self._infos[key] = (found, frequency)
        return found, frequency

    def _load(self, fieldname: str, btext: bytes, scored: bool) -> DocSet:
        """A term's postings over all segments, scored. Each segment's term table is read
        once (Whoosh's own calls would read it five times: membership, postings, and the
        document frequency behind the idf)."""
        id_parts: list[numpy.ndarray] = []
        weight_parts: list[numpy.ndarray] = []
        directories: dict[int, postings.Directory] = {}
        found, frequency = self._term_infos(fieldname, btext)
        for leaf, offset, info in found:
            decoded, directory = postings.decode(leaf, fieldname, btext, info)
            ids, weights = decoded.ids, decoded.weights
            if directory is not None:
                directories[offset] = directory
            ids, weights = _undeleted(leaf, ids, weights)
            id_parts.append(ids + offset)
            weight_parts.append(weights)
        if not id_parts:
            return EMPTY
        with self._lock:  # before _cached stores the postings, so evicted with them
            self._directories[(fieldname, btext, scored)] = directories
        ids = numpy.concatenate(id_parts)
        weights = numpy.concatenate(weight_parts)
        if not scored:
            return DocSet(ids, numpy.zeros(len(ids)))
        return DocSet(ids, self._bm25(fieldname, frequency, weights, ids))

    def _bm25(
        self, fieldname: str, frequency: int, tf: numpy.ndarray, ids: numpy.ndarray
    ) -> numpy.ndarray:
        """Whoosh's BM25FScorer, vectorized: same idf (Whoosh's formula, from the document
        frequency summed over the segments as its multi-segment reader sums it), average
        length and formula."""
        k1 = self.weighting.K1
        idf = math.log(self.documents / (frequency + 1)) + 1
        return idf * ((tf * (k1 + 1)) / (tf + self._length_norms(fieldname)[ids]))

    def _length_norms(self, fieldname: str) -> numpy.ndarray:
        """BM25's part that depends on the document alone, ``k1·((1−b) + b·length/average)``,
        for every document: once per field and snapshot rather than for every posting
        scored (the same operations on the same numbers, so the same scores to the bit)."""
        norms = self._norms.get(fieldname)
        if norms is None:
            weighting = self.weighting
            b = weighting._field_B.get(fieldname, weighting.B)
            average = self.searcher.avg_field_length(fieldname) or 1
            parts = []
            for leaf, _ in self._leaves:
                table = field_lengths(leaf, fieldname)
                parts.append(numpy.ones(leaf.doc_count_all()) if table is None else table)
            lengths = numpy.concatenate(parts) if parts else numpy.empty(0)
            norms = self._norms[fieldname] = weighting.K1 * ((1 - b) + b * lengths / average)
        return norms


def _term_bytes(field: Any, text: str | bytes) -> bytes:
    """A term as its field indexes it (query terms arrive as text, expansions as bytes)."""
    return text if isinstance(text, bytes) else field.to_bytes(text)


def _undeleted(
    leaf: Any, ids: numpy.ndarray, weights: numpy.ndarray
) -> tuple[numpy.ndarray, numpy.ndarray]:
    """A segment's postings without its deleted pages (segment document numbers)."""
    if not leaf.has_deletions():
        return ids, weights
    keep = ~numpy.isin(ids, numpy.fromiter(leaf.deleted_docs_set, dtype=numpy.int64))
    return ids[keep], weights[keep]


def _has_phrase(query: Any) -> bool:
    if isinstance(query, wq.Phrase):
        return True
    return any(_has_phrase(sub) for sub in getattr(query, "subqueries", ()))


def _boosted(docs: DocSet, boost: float) -> DocSet:
    return docs if boost == 1.0 else DocSet(docs.ids, docs.scores * boost)


def _unscored(docs: DocSet) -> DocSet:
    return DocSet(docs.ids, numpy.zeros(len(docs)))


def _positions_in(ids: numpy.ndarray, within: numpy.ndarray, documents: int) -> numpy.ndarray:
    """For each of ``ids``, its index in the sorted array ``within``, or -1.

    Binary searches cost ``len(ids) × log(len(within))``: a common word's matches looked up
    among a language's pages took 2-3 ms. From :data:`DENSE_SHARE` of all
    ``documents`` on, a table of every document's position in ``within`` is filled instead
    and read once per id: linear, a tenth of that.
    """
    if len(within) and len(ids) * DENSE_SHARE >= documents:
        table = numpy.full(documents, -1, dtype=numpy.int64)
        table[within] = numpy.arange(len(within))
        return table[ids]
    return index_in_sorted(within, ids)


def _members(ids: numpy.ndarray, within: numpy.ndarray, documents: int) -> numpy.ndarray:
    """Which of ``ids`` are in the sorted array ``within``, looked up from the smaller side
    (a capsule's few pages among a common word's thousands of matches, or the reverse)."""
    if len(within) * 8 < len(ids):  # well smaller: looking up the reverse also fills a mask
        mask = numpy.zeros(len(ids), dtype=bool)
        at = _positions_in(within, ids, documents)
        mask[at[at >= 0]] = True
        return mask
    return _positions_in(ids, within, documents) >= 0


def _intersect(a: DocSet, b: DocSet, documents: int) -> DocSet:
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    at = _positions_in(small.ids, large.ids, documents)
    found = at >= 0
    return DocSet(small.ids[found], small.scores[found] + large.scores[at[found]])


def _restrict(a: DocSet, b: DocSet, documents: int) -> DocSet:
    """Documents of ``a`` also in ``b``, scored by ``a`` alone (Whoosh's Require)."""
    mask = _members(a.ids, b.ids, documents)
    return DocSet(a.ids[mask], a.scores[mask])


def _union(parts: list[DocSet], documents: int) -> DocSet:
    """Documents in any of ``parts``, their scores summed (in the order of ``parts``).

    Large unions (a common word's forms in several languages) add into one dense array
    over all documents: linear, where sorting the concatenation cost milliseconds.
    """
    present = [part for part in parts if len(part)]
    if not present:
        return EMPTY
    if len(present) == 1:
        return present[0]
    if sum(len(part) for part in present) * DENSE_SHARE >= documents:
        sums = numpy.zeros(documents)
        hit = numpy.zeros(documents, dtype=bool)
        for part in present:
            sums[part.ids] += part.scores  # ids are unique within a part
            hit[part.ids] = True
        ids = numpy.flatnonzero(hit)
        return DocSet(ids, sums[ids])
    ids = numpy.concatenate([part.ids for part in present])
    scores = numpy.concatenate([part.scores for part in present])
    unique, inverse = numpy.unique(ids, return_inverse=True)
    return DocSet(unique, numpy.bincount(inverse, weights=scores, minlength=len(unique)))


def top(docs: DocSet, count: int) -> list[tuple[int, float]]:
    """The ``count`` best (docnum, score) pairs, best first (ties by document number)."""
    if len(docs) == 0 or count <= 0:
        return []
    if len(docs) > count:
        chosen = numpy.argpartition(-docs.scores, count - 1)[:count]
    else:
        chosen = numpy.arange(len(docs))
    order = numpy.lexsort((docs.ids[chosen], -docs.scores[chosen]))
    picked = chosen[order]
    return [(int(d), float(s)) for d, s in zip(docs.ids[picked], docs.scores[picked], strict=True)]
