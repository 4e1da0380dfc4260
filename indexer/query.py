"""The read API: one call from a query string to a page of ranked, snippeted results.

The search capsule and ``sextant search`` both use :class:`Searcher`. It stays warm: the Whoosh
reader, the page-id and link-score arrays and the spelling vocabulary are opened once and
reused, and each query first makes a cheap check (a ``readlink``, a directory listing and a
``stat``) for a swapped-in rebuild, a new incremental commit or new link scores, reopening
only what changed.

Ranking, in stages:

1. the query (:mod:`indexer.querylang`) is evaluated on whole posting lists of the ``text``
   field with numpy (:mod:`indexer.vector`): every match, its BM25, an exact count;
2. phrases at the top of the query are checked on positions (:mod:`indexer.positions`);
3. the best :data:`~indexer.rank.RERANK_WINDOW` get the weighted BM25 of their title,
   anchor-text and heading fields added (BM25F: :data:`~indexer.schema.BOOST_FIELDS`);
4. each score is multiplied by the link prior (:mod:`indexer.rank` documents the blend);
5. hits with the same content (mirrors, copies: one content hash) fold into one, shown as
   the best-linked copy.

Filter-only queries have no text score, so all matching pages are ordered by link score.

Threads: Whoosh's reader objects are not safe for concurrent use, so each snapshot is used
under a lock; the work outside it (parsing, snippets from the store) runs in parallel. The
evaluation is numpy and Python under the GIL, so more searchers would not be faster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy
from sqlalchemy import bindparam, func, select
from sqlalchemy.sql.compiler import SQLCompiler
from whoosh import index as whoosh_index
from whoosh import query as wq
from whoosh.searching import Searcher as WhooshSearcher

from indexer import location
from indexer.analysis import fold, words
from indexer.budget import PATIENT_SECONDS, STOPPED_EARLY, Budget, BudgetExhausted, paced
from indexer.columnread import segment_column
from indexer.dates import DATE_COLUMN
from indexer.location import IndexMissing
from indexer.navigation import NAVIGATION_FIELD
from indexer.positions import may_hold_phrases, verify_phrases
from indexer.querylang import (
    NO_NAMES,
    Compiled,
    NamedCapsules,
    ParsedQuery,
    Span,
    capsule_names_in,
    compile_query,
    parse,
)
from indexer.rank import RANK_FILE, RERANK_WINDOW, LinkScores, prior
from indexer.schema import BOOST_FIELDS, FLAG_INDEX_FILE, FLAG_TEXTLESS, TEXT_FIELD
from indexer.sizefilter import column_values
from indexer.snippets import MARK_END, MARK_START, make_snippet
from indexer.spelling import Vocabulary
from indexer.vector import DocSet, VectorIndex, top
from indexer.weighting import BM25F
from sextant import gemtext, markdown
from sextant.errors import QueryError
from sextant.store import make_engine
from sextant.store.failures import unavailable_as_store_error
from sextant.store.models import Page
from sextant.urls import DEFAULT_PORT
from sextant.urls import parse as parse_url

if TYPE_CHECKING:
    from sextant.config import Settings

__all__ = [
    "MARK_END",
    "MARK_START",
    "VERBATIM",
    "Hit",
    "IndexMissing",
    "SearchResults",
    "Searcher",
    "open_searcher",
]

#: Results beyond this rank are not offered (nobody reads page 101 of a search engine).
MAX_RESULTS = 1000
MAX_PAGE_SIZE = 100
#: How phrase positions are checked (see _vector_hits).
PHRASE_CANDIDATES = 200
PHRASE_BATCH = 50
PHRASE_MARGIN = 20
PHRASE_SAMPLE_SHARE = 0.2
PHRASE_SAMPLE = 1000
#: Characters of a page's stored body read for its snippet. Snippets come from the first few
#: thousand characters of text (:data:`~indexer.snippets.MAX_SCAN_CHARS`); reading and
#: parsing a whole 5 MiB page for each hit would cost more than the search.
SNIPPET_SOURCE_CHARS = 64 * 1024
#: A prefix's most common words that count in the title, anchor and heading fields.
PREFIX_BOOSTS = 8
#: Pages without text rank below the weakest page with text by this factor at least.
TEXTLESS_BELOW = 0.9
#: ``sort:newest`` orders by date × this + text score (scores stay well below it).
DATE_KEY = 10_000.0
#: A query starting with this is searched as typed, never replaced by its correction.
VERBATIM = "!"
#: With fewer results than this, the searcher looks for a spelling correction.
SUGGEST_BELOW = 3

#: BM25F parameters. Anchor fields of much-linked pages are long lists of labels; full length
#: normalization would punish exactly the pages everyone points at, hence the lower B.
WEIGHTING = BM25F(B=0.75, K1=1.2, anchors_B=0.3, title_B=0.5)

#: Ranking modes for ``Searcher.search``: the product's, and two baselines for evaluation.
RANKINGS = ("blended", "bm25f", "bm25")


@dataclass(frozen=True, slots=True)
class Hit:
    url: str
    title: str | None
    snippet: str  # matched words between MARK_START and MARK_END
    host: str  # for people: unicode host, with the port when it is not 1965
    mime: str | None
    lang: str | None
    charset: str | None
    size: int | None
    score: float
    fetched_at: datetime | None
    inbound: int
    rank: float  # link-analysis score, 1.0 = an average page
    date: dt.date | None = None  # the page's date (indexer.dates: a label's, its URL's, first seen)


@dataclass(frozen=True, slots=True)
class SearchResults:
    query: str
    total: int
    page: int
    page_size: int
    hits: tuple[Hit, ...]
    suggestion: str | None
    seconds: float
    exact: bool = True  # False: ``total`` is an estimate (common phrases, see _vector_hits)
    #: True when the search's budget ran out: the hits are the best found before it stopped.
    partial: bool = False
    #: Seconds of search-thread time the search used (what the capsule's throttle charges).
    cost: float = 0.0
    #: The query as typed when it found nothing and these are the results of its spelling
    #: correction (``query``); ``VERBATIM + corrected_from`` searches it as typed.
    corrected_from: str | None = None

    @property
    def pages(self) -> int:
        return math.ceil(min(self.total, MAX_RESULTS) / self.page_size) if self.page_size else 0


class _Snapshot:
    """One consistent view of one index commit: reader, searcher, per-document arrays."""

    def __init__(self, generation: Path) -> None:
        self.generation = generation
        self.index = whoosh_index.open_dir(str(generation))
        self.toc_generation = self.index.latest_generation()
        self.searcher = WhooshSearcher(self.index.reader(), weighting=WEIGHTING)
        self.lock = threading.Lock()
        self.users = 0
        self.retired = False
        self.page_ids, self.groups = _document_arrays(self.searcher)
        self.dates = _leaf_columns(self.searcher.reader(), DATE_COLUMN)
        flags = numpy.maximum(_leaf_columns(self.searcher.reader(), "flags"), 0)
        self.index_files = (flags & FLAG_INDEX_FILE) > 0
        self.textless = (flags & FLAG_TEXTLESS) > 0
        self.vector = VectorIndex(self.searcher, WEIGHTING)
        self.rank_stamp: tuple[int, int, int] | None = None
        self.link_scores = LinkScores.empty()
        self.ranks = numpy.ones(len(self.page_ids))
        self.refresh_ranks()
        # Read with the snapshot, not at the first misspelt query: reading it takes a search
        # budget's time on a large index (0.07-0.17 s at 20,000 pages), in one piece.
        self.vocabulary = Vocabulary.load(generation)

    def is_current(self, generation: Path) -> bool:
        if generation != self.generation:
            return False
        try:
            return self.index.latest_generation() == self.toc_generation
        except OSError:
            return False

    def refresh_ranks(self) -> None:
        stamp = _stamp(self.generation / RANK_FILE)
        if stamp == self.rank_stamp:
            return
        scores = LinkScores.load(self.generation)
        self.rank_stamp = stamp
        self.link_scores = scores
        self.ranks = _ranks_for(scores, self.page_ids)

    def close(self) -> None:
        self.searcher.close()


def _stamp(path: Path | str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


def _document_arrays(searcher: WhooshSearcher) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Document number → page id, and → fold group, read once per snapshot from columns."""
    reader = searcher.reader()
    count = reader.doc_count_all()
    page_ids = numpy.zeros(count, dtype=numpy.int64)
    groups = numpy.zeros(count, dtype=numpy.int64)
    if count and reader.has_column("key"):
        page_ids = _column(reader, "key")
        groups = _column(reader, "fold")
    return page_ids, groups


def _column(reader: Any, name: str) -> numpy.ndarray:
    leaves = [(reader, 0)] if reader.is_atomic() else list(reader.leaf_readers())
    parts = [segment_column(leaf, name, numpy.int64) for leaf, _ in leaves]
    return numpy.concatenate(parts) if parts else numpy.empty(0, dtype=numpy.int64)


def _leaf_columns(reader: Any, name: str) -> numpy.ndarray:
    """A column over all segments, -1 where unknown (an older segment, a deleted page)."""
    leaves = [(reader, 0)] if reader.is_atomic() else list(reader.leaf_readers())
    parts = [column_values(leaf, name) for leaf, _ in leaves]
    return numpy.concatenate(parts) if parts else numpy.empty(0, dtype=numpy.int64)


def _ranks_for(scores: LinkScores, page_ids: numpy.ndarray) -> numpy.ndarray:
    ranks = numpy.ones(len(page_ids))
    if len(scores.page_ids) == 0 or len(page_ids) == 0:
        return ranks
    at = numpy.minimum(numpy.searchsorted(scores.page_ids, page_ids), len(scores.page_ids) - 1)
    found = scores.page_ids[at] == page_ids
    ranks[found] = scores.scores[at[found]]
    return ranks


class Searcher:
    """A warm searcher, reopened when the index changes (cheap check per query).

    Safe to call from several threads at once (the capsule runs searches in worker threads).
    """

    def __init__(self, index_dir: Path, db_url: str) -> None:
        self._index_dir = index_dir
        self._state_file = str(index_dir / location.STATE_FILE)
        self._engine = make_engine(db_url)
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._checked: tuple[int, int, int] | None = None  # state file stamp at the last check
        self._texts_statements: dict[int, SQLCompiler] = {}  # by number of pages
        self._closed = False

    def search(
        self,
        query: str,
        *,
        page: int = 1,
        page_size: int = 10,
        ranking: str = "blended",
        budget: Budget | None = None,
    ) -> SearchResults:
        """One page of results; raises :class:`QueryError` with a message for people.

        ``ranking`` is ``blended`` (the product) or a baseline for evaluation: ``bm25f``
        (no link prior) or ``bm25`` (BM25 on the ``text`` field alone: no boost fields, no
        prior). ``budget`` bounds the work (:mod:`indexer.budget`;
        :data:`~indexer.budget.PATIENT_SECONDS` when omitted); a cancelled budget raises
        :class:`~sextant.errors.SearchCancelled`. A store that cannot give the snippets' text
        raises :class:`~sextant.errors.StoreUnavailable`.

        When the budget runs out, every stage gives what it has rather than nothing: the
        matches found so far (:meth:`VectorIndex.evaluate`: OR parts evaluated, phrases
        verified), candidates without their boost-field scores, no spelling suggestion,
        snippets that are the opening of the page; the results say ``partial``. A search
        that has no hit to show by then is refused with :data:`STOPPED_EARLY`.

        A query that finds nothing while its spelling correction finds something is answered
        with the correction's results (``corrected_from`` holds the query as typed); one
        starting with :data:`VERBATIM` (``!cinamon``) is searched as typed.
        """
        started = time.perf_counter()
        budget = budget if budget is not None else Budget(PATIENT_SECONDS)
        budget.check()  # cancelled while queued: no work at all
        if page < 1:
            raise QueryError("page numbers start at 1")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise QueryError(f"page size must be between 1 and {MAX_PAGE_SIZE}")
        if ranking not in RANKINGS:
            raise ValueError(f"ranking must be one of {RANKINGS}, not {ranking!r}")
        verbatim = query.startswith(VERBATIM)
        text = query[len(VERBATIM) :] if verbatim else query
        results = self._search(query, text, page, page_size, ranking, budget, started)
        if verbatim or results.total or not results.suggestion or budget.exhausted:
            return results
        # Nothing found, and the correction finds something: answer it at once, saying so.
        try:
            corrected = self._search(
                results.suggestion, results.suggestion, page, page_size, ranking, budget, started
            )
        except QueryError:  # the budget ran out in the corrected search: keep the suggestion
            return dataclasses.replace(results, seconds=time.perf_counter() - started)
        if corrected.total == 0:
            return results
        return dataclasses.replace(corrected, suggestion=None, corrected_from=text)

    def _search(
        self,
        query: str,
        text: str,
        page: int,
        page_size: int,
        ranking: str,
        budget: Budget,
        started: float,
    ) -> SearchResults:
        """:meth:`search` of ``text`` (``query`` as typed, for the results), no correction."""
        parsed = parse(text)
        compiled = compile_query(parsed)
        with self._use_snapshot() as snapshot:
            with snapshot.lock:
                # The clock starts once this search has the index to itself: opening a new
                # snapshot is the index's cost, waiting for the lock the other searches'.
                budget.start()
                try:
                    budget.check()  # cancelled while waiting for the lock
                    if parsed.has_text:
                        ranked, total, exact = _rank_text(
                            snapshot,
                            compiled,
                            page * page_size,
                            boost=ranking != "bm25",
                            blend=ranking == "blended",
                            newest=parsed.sort == "newest",
                            named=capsule_names_in(parsed),
                            budget=budget,
                        )
                    else:
                        ranked, total, exact = _rank_filters(
                            snapshot, compiled.query, budget, newest=parsed.sort == "newest"
                        )
                except BudgetExhausted:
                    raise QueryError(STOPPED_EARLY) from None
                chosen = ranked[(page - 1) * page_size : page * page_size]
                cut = budget.exhausted  # the matches or their ranking are incomplete
                if cut and not chosen:
                    raise QueryError(STOPPED_EARLY)
                stored = [snapshot.searcher.stored_fields(docnum) for docnum, _ in chosen]
                ranks = [float(snapshot.ranks[docnum]) for docnum, _ in chosen]
            suggestion = None
            if total < SUGGEST_BELOW and not budget.exhausted:
                suggestion = self._suggest(snapshot, parsed, total, budget)
        texts = self._texts([int(fields["pid"]) for fields in stored])
        hits = tuple(
            _hit(fields, score, rank, texts.get(int(fields["pid"]), ""), compiled.terms, budget)
            for fields, (_, score), rank in zip(stored, chosen, ranks, strict=True)
        )
        return SearchResults(
            query=query,
            total=total,
            page=page,
            page_size=page_size,
            hits=hits,
            suggestion=suggestion,
            seconds=time.perf_counter() - started,
            exact=exact and not cut,
            partial=budget.exhausted,
            cost=budget.spent,
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            snapshot, self._snapshot = self._snapshot, None
            if snapshot is not None:
                snapshot.retired = True
                if snapshot.users == 0:
                    snapshot.close()
        self._engine.dispose()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- snapshots -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _use_snapshot(self) -> Iterator[_Snapshot]:
        snapshot = self._current()
        try:
            yield snapshot
        finally:
            with self._lock:
                snapshot.users -= 1
                if snapshot.retired and snapshot.users == 0:
                    snapshot.close()

    def _current(self) -> _Snapshot:
        # Every index run ends by rewriting the live generation's state file (atomically: a
        # new inode), after its commit and its link scores. While that file is the one seen
        # at the last full check, one stat stands for the readlink, directory listing and
        # stats of the full check (a twentieth of its cost).
        stamp = _stamp(self._state_file)
        with self._lock:
            if self._closed:
                raise QueryError("this searcher is closed")
            snapshot = self._snapshot
            if snapshot is not None and stamp is not None and stamp == self._checked:
                snapshot.users += 1
                return snapshot
            snapshot = self._check(stamp)
            snapshot.users += 1
            return snapshot

    def _check(self, stamp: tuple[int, int, int] | None) -> _Snapshot:
        """The snapshot of the live index, reopened or refreshed as needed (lock held)."""
        generation = location.live_generation(self._index_dir)
        if generation is None:
            raise IndexMissing(
                f"no index yet at {self._index_dir}: run `sextant index` "
                "(after `sextant crawl`) to build one"
            )
        snapshot = self._snapshot
        if snapshot is None or not snapshot.is_current(generation):
            location.require_current(self._index_dir, generation)
            fresh = _Snapshot(generation)
            if snapshot is not None:
                snapshot.retired = True
                if snapshot.users == 0:
                    snapshot.close()
            snapshot = self._snapshot = fresh
        else:
            with snapshot.lock:
                snapshot.refresh_ranks()
        self._checked = stamp
        return snapshot

    # --- suggestions and snippets --------------------------------------------------------

    def _suggest(
        self, snapshot: _Snapshot, parsed: ParsedQuery, total: int, budget: Budget
    ) -> str | None:
        """A corrected query that finds more, built from the index's own vocabulary; none
        when the budget runs out first (a suggestion is a courtesy, not the answer)."""
        if not parsed.words:
            return None
        try:
            return self._corrected(snapshot, parsed, total, budget)
        except BudgetExhausted:
            return None

    def _corrected(
        self, snapshot: _Snapshot, parsed: ParsedQuery, total: int, budget: Budget
    ) -> str | None:
        vocabulary = snapshot.vocabulary
        replacements: list[tuple[Span, str]] = []
        for span in paced(parsed.words, budget, 1):
            corrected = _correct_word(span.text, vocabulary)
            if corrected != span.text:
                replacements.append((span, corrected))
        if not replacements:
            return None
        text = parsed.text
        for span, corrected in sorted(replacements, key=lambda pair: -pair[0].start):
            text = text[: span.start] + corrected + text[span.end :]
        try:
            corrected_query = compile_query(parse(text)).query
        except QueryError:
            return None
        with snapshot.lock:
            found = snapshot.vector.evaluate(corrected_query, budget=budget)
        # A partial count (the budget ran out within) does not show the correction finds more.
        return text if len(found) > total and not budget.exhausted else None

    def _texts(self, page_ids: Sequence[int]) -> dict[int, str]:
        """The searchable text of each page, from the store (the index keeps none).

        Straight through the DB-API cursor: SQLAlchemy's execution of the same statement
        (rendering the IN list, wrapping rows) cost as much again as the query itself, a
        twentieth of a search. The SQL is still SQLAlchemy's, compiled once per number of
        pages for the engine's dialect.
        """
        if not page_ids:
            return {}
        compiled = self._texts_statements.get(len(page_ids))
        if compiled is None:
            statement = _TEXTS.where(
                Page.id.in_([bindparam(f"id{i}") for i in range(len(page_ids))])
            )
            compiled = self._engine.dialect.statement_compiler(self._engine.dialect, statement)
            self._texts_statements[len(page_ids)] = compiled
        values = compiled.construct_params({f"id{i}": pid for i, pid in enumerate(page_ids)})
        order = compiled.positiontup
        parameters = values if order is None else tuple(values[name] for name in order)
        texts: dict[int, str] = {}
        with unavailable_as_store_error(self._engine.dialect.loaded_dbapi):
            connection = self._engine.raw_connection()
            try:
                cursor = connection.cursor()
                cursor.execute(compiled.string, parameters)
                for page_id, state, mime, body, meta in cursor.fetchall():
                    texts[page_id] = _searchable_text(state, mime, body, meta)
                cursor.close()
            finally:
                connection.close()  # back to the pool
        return texts


#: The columns snippets need; the page ids are bound one by one (see Searcher._texts).
_TEXTS = select(
    Page.id,
    Page.state,
    Page.mime,
    func.substr(Page.body, 1, SNIPPET_SOURCE_CHARS).label("body"),
    Page.meta,
)


def _searchable_text(state: str, mime: str | None, body: str | None, meta: str | None) -> str:
    if state == "input":
        return meta or ""
    mime = (mime or "").split(";", 1)[0].strip().lower()
    if not body or not mime.startswith("text/"):
        return ""
    if mime == "text/gemini":
        return gemtext.parse(body).text
    if mime == "text/markdown":
        return markdown.readable(body).text
    return body


def _rank_text(
    snapshot: _Snapshot,
    compiled: Compiled,
    wanted: int,
    *,
    boost: bool,
    blend: bool,
    budget: Budget,
    newest: bool = False,
    named: NamedCapsules = NO_NAMES,
) -> tuple[list[tuple[int, float]], int, bool]:
    """The best hits and the match count (and whether it is exact), in three stages:
    candidates by BM25 on ``text`` (:mod:`indexer.vector`), their boost-field scores added
    (BM25F), the link prior multiplied in (:mod:`indexer.rank`); then duplicates are folded.
    ``boost`` and ``blend`` off give the plain-BM25 baseline for evaluation.

    Past the budget the candidates keep their ``text`` scores without the boost fields'
    (ranked less well, but ranked); the evaluation raises
    :class:`~indexer.budget.BudgetExhausted` only when it has no subset of the matches."""
    matches = snapshot.vector.evaluate(compiled.query, budget=budget)
    _expand_prefixes(snapshot.vector, compiled)
    if newest:
        return _rank_newest(snapshot, compiled, matches, wanted, budget)
    scored, total, exact = _vector_hits(snapshot.vector, compiled, matches, wanted, budget)
    if boost and compiled.boosts and scored:
        ordered = sorted(docnum for docnum, _ in scored)
        try:
            bonus = _boost_scores(snapshot.vector, ordered, compiled.boosts, budget)
        except BudgetExhausted:
            bonus = {}
        scored = [(docnum, score + bonus.get(docnum, 0.0)) for docnum, score in scored]
    if blend:
        scored = [(docnum, score * prior(snapshot.ranks[docnum])) for docnum, score in scored]
        scored = _text_first(scored, snapshot.textless)
        scored, added = _navigate(snapshot, named, scored, budget)
        total += added
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    kept = _fold(scored, snapshot.groups, snapshot.ranks, snapshot.index_files)
    return kept, total - (len(scored) - len(kept)), exact


def _text_first(
    scored: list[tuple[int, float]], textless: numpy.ndarray
) -> list[tuple[int, float]]:
    """Pages without text of their own (images, archives: found by their URL words and the
    labels of links to them) scaled below the weakest page with text among the hits, their
    order among themselves kept: a file named after the words must not outrank a page
    about them ("lighthouse" put lighthouse.png, 13.1, above the text that says it, 4.3)."""
    files = [score for docnum, score in scored if textless[docnum]]
    texts = [score for docnum, score in scored if not textless[docnum]]
    if not files or not texts or max(files) < min(texts):
        return scored
    scale = TEXTLESS_BELOW * min(texts) / max(files)
    return [(docnum, score * scale if textless[docnum] else score) for docnum, score in scored]


def _navigate(
    snapshot: _Snapshot, named: NamedCapsules, scored: list[tuple[int, float]], budget: Budget
) -> tuple[list[tuple[int, float]], int]:
    """The start pages of the capsules the query names (:mod:`indexer.navigation`) raised
    above every other hit; those of a standalone name added when the text missed them.
    Returns the hits and how many were added. Past the budget, the hits as they were."""
    if not named.names:
        return scored, 0
    try:
        pages = snapshot.vector.evaluate(_names_query(named.names), budget=budget).ids
        shown = snapshot.vector.evaluate(_names_query(named.standalone), budget=budget).ids
    except BudgetExhausted:
        return scored, 0
    if len(pages) == 0:
        return scored, 0
    lead = max((score for _, score in scored), default=0.0)
    found = {int(docnum) for docnum in pages}
    raised = [(docnum, score + lead if docnum in found else score) for docnum, score in scored]
    present = {docnum for docnum, _ in scored}
    extra = [
        (int(docnum), lead + prior(snapshot.ranks[docnum]))
        for docnum in shown
        if int(docnum) not in present
    ]
    return raised + extra, len(extra)


def _names_query(names: Sequence[str]) -> Any:
    terms = [wq.Term(NAVIGATION_FIELD, name) for name in names]
    return wq.Or(terms) if len(terms) != 1 else terms[0]


def _rank_newest(
    snapshot: _Snapshot, compiled: Compiled, matches: DocSet, wanted: int, budget: Budget
) -> tuple[list[tuple[int, float]], int, bool]:
    """``sort:newest``: matches by date, newest first, the text score ordering each day's;
    undated pages last. Phrases are checked in that order too, so the newest are verified
    first. The score shown stays the text score (no boost fields, no link prior: neither
    changes the order)."""
    dates = snapshot.dates[matches.ids].astype(numpy.float64)
    keys = dates * DATE_KEY + numpy.minimum(matches.scores, DATE_KEY - 1)
    keyed, total, exact = _vector_hits(
        snapshot.vector, compiled, DocSet(matches.ids, keys), wanted, budget
    )
    keyed.sort(key=lambda pair: (-pair[1], pair[0]))
    kept = _fold(keyed, snapshot.groups, snapshot.ranks, snapshot.index_files)
    scored = [(docnum, key - float(snapshot.dates[docnum]) * DATE_KEY) for docnum, key in kept]
    return scored, total - (len(keyed) - len(kept)), exact


def _expand_prefixes(index: VectorIndex, compiled: Compiled) -> None:
    """Give a prefix's words to the snippets (all of them) and to the boost fields (the
    :data:`PREFIX_BOOSTS` most common: each is a posting list per boost field to load).
    The evaluation has just expanded them, so this reads the cache."""
    for fieldname, prefix in compiled.prefixes:
        terms = index.expansion(fieldname, prefix)
        compiled.terms.update(terms)
        if fieldname == TEXT_FIELD:
            compiled.boosts.update(
                (name, term) for name in BOOST_FIELDS for term in terms[:PREFIX_BOOSTS]
            )


def _vector_hits(
    index: VectorIndex, compiled: Compiled, matches: DocSet, wanted: int, budget: Budget
) -> tuple[list[tuple[int, float]], int, bool]:
    """The best hits of an evaluated query; the count, and whether it is exact.

    Phrases at the top of the query were matched as the AND of their words. Every such match
    is first tested against the pair filters (:func:`may_hold_phrases`: no positions read);
    positions are then checked on the best survivors by score, a batch of
    :data:`PHRASE_BATCH` at a time, until there are enough hits for the page asked for (or
    :data:`PHRASE_CANDIDATES` were checked). When every survivor was checked the count is
    exact; otherwise it is the number of matches times the share that held the phrase.

    Words so common that a fifth of all pages hold them all ("of the", "is a") take their
    candidates from the first :data:`PHRASE_SAMPLE` in index order instead: ranking every
    one of them would cost more than the rest of the search, and BM25 barely tells such
    pages apart.

    When the budget runs out, the hits are those of the batches verified before, and the
    count is estimated from them like a sampled one.
    """
    window = min(MAX_RESULTS, max(RERANK_WINDOW, wanted))
    if not compiled.phrases:
        return top(matches, window), len(matches), True
    sample = matches
    if len(matches) > PHRASE_SAMPLE_SHARE * index.documents:
        sample = DocSet(matches.ids[:PHRASE_SAMPLE], matches.scores[:PHRASE_SAMPLE])
    likely = may_hold_phrases(index, sample.ids, compiled.phrases, budget)
    pool = DocSet(sample.ids[likely], sample.scores[likely])
    ranked = top(pool, min(len(pool), PHRASE_CANDIDATES))
    needed = wanted + PHRASE_MARGIN
    verified: list[tuple[int, float]] = []
    checked = 0
    while checked < len(ranked) and len(verified) < needed:
        batch = ranked[checked : checked + PHRASE_BATCH]
        try:
            holding = verify_phrases(
                index, sorted(docnum for docnum, _ in batch), compiled.phrases, budget
            )
        except BudgetExhausted:
            break
        checked += len(batch)
        verified.extend(pair for pair in batch if pair[0] in holding)
    if checked == len(pool) and len(sample) == len(matches) and not budget.exhausted:
        return verified, len(verified), True
    share = len(verified) / checked * len(pool) / len(sample) if checked else 0.0
    return verified, max(len(verified), round(len(matches) * share)), False


def _boost_scores(
    index: VectorIndex, docnums: list[int], boosts: set[tuple[str, str]], budget: Budget
) -> dict[int, float]:
    """Each candidate's weighted BM25 in the boost fields (title, anchors, headings)."""
    pairs = [(field, term, BOOST_FIELDS[field]) for field, term in sorted(boosts)]
    ids = numpy.asarray(docnums, dtype=numpy.int64)
    return dict(zip(docnums, index.scores_at(ids, pairs, budget).tolist(), strict=True))


def _rank_filters(
    snapshot: _Snapshot, query: Any, budget: Budget, *, newest: bool = False
) -> tuple[list[tuple[int, float]], int, bool]:
    """Every page a filter-only query matches, best link score first (``newest``: newest
    first, then by link score), folded."""
    docnums = snapshot.vector.evaluate(query, budget=budget).ids
    if len(docnums) == 0:
        return [], 0, True
    ranks = snapshot.ranks[docnums]
    keys = (docnums, -ranks, -snapshot.dates[docnums]) if newest else (docnums, -ranks)
    order = numpy.lexsort(keys)
    docnums, ranks = docnums[order], ranks[order]
    groups = snapshot.groups[docnums]
    _, first = numpy.unique(groups, return_index=True)  # each group's place in the order
    # Each group shown as its first member that is not a directory's index file (see _fold);
    # numpy.unique lists the groups in the same (sorted) order both times.
    preferred = numpy.lexsort((numpy.arange(len(docnums)), snapshot.index_files[docnums]))
    _, shown = numpy.unique(groups[preferred], return_index=True)
    members = preferred[shown]
    places = numpy.argsort(first, kind="stable")
    total = len(places)
    keep = members[places][:MAX_RESULTS]
    hits = [(int(d), float(r)) for d, r in zip(docnums[keep], ranks[keep], strict=True)]
    return hits, total, True


def _fold(
    scored: list[tuple[int, float]],
    groups: numpy.ndarray,
    ranks: numpy.ndarray,
    index_files: numpy.ndarray,
) -> list[tuple[int, float]]:
    """One hit per group of identical content: the group's best score, shown as its
    best-linked member (the original rather than a mirror of it), best scores first. A
    directory's index file (``/index.gmi``) gives way to any other member: it is the same
    page as its directory's shorter URL."""
    best_score: dict[int, float] = {}
    shown: dict[int, int] = {}
    for docnum, score in scored:
        group = int(groups[docnum])
        if group not in best_score or score > best_score[group]:
            best_score[group] = score
        if group not in shown or (index_files[shown[group]], -ranks[shown[group]]) > (
            index_files[docnum],
            -ranks[docnum],
        ):
            shown[group] = docnum
    kept = [(shown[group], score) for group, score in best_score.items()]
    kept.sort(key=lambda pair: (-pair[1], pair[0]))
    return kept


def _hit(
    fields: dict[str, Any], score: float, rank: float, text: str, terms: set[str], budget: Budget
) -> Hit:
    url = fields["url"]
    title = fields.get("title")
    # A gemtext body usually opens with its title heading; the snippet should say more.
    if title and text.startswith(title) and text[len(title) : len(title) + 1] == "\n":
        text = text[len(title) :].lstrip() or text
    try:
        budget.check()
    except BudgetExhausted:
        terms = set()  # past the budget: the page's opening, which costs no matching
    return Hit(
        url=url,
        title=title,
        snippet=make_snippet(text, terms, fields.get("lang")),
        host=_display_host(url, fields.get("host", "")),
        mime=fields.get("mime"),
        lang=fields.get("lang"),
        charset=fields.get("charset"),
        size=fields.get("size"),
        score=float(score),
        fetched_at=fields.get("fetched"),
        inbound=int(fields.get("inbound") or 0),
        rank=rank,
        date=_stored_date(fields.get("date")),
    )


def _stored_date(value: str | None) -> dt.date | None:
    return None if not value else dt.date.fromisoformat(value)


def _display_host(url: str, authority: str) -> str:
    """The host as people read it, with the port when it is not 1965. The stored authority
    is that already unless its host is punycode, so only those hits' URLs are parsed (tens
    of microseconds each, for every hit of every page of results)."""
    if authority and "xn--" not in authority:
        return authority
    try:
        parsed = parse_url(url)
    except Exception:  # an index built from an older URL parser: show what is stored
        return authority
    host = parsed.display_host
    return host if parsed.port == DEFAULT_PORT else f"{host}:{parsed.port}"


def _correct_word(text: str, vocabulary: Vocabulary) -> str:
    """``text`` with each unknown word replaced by its likeliest correction, if any."""
    pieces: list[str] = []
    cursor = 0
    changed = False
    for word in words(text):
        if word.cjk or word.text.isdigit() or len(word.text) < 3:
            continue
        folded = fold(word.text)
        if folded in vocabulary:
            continue
        suggestion = vocabulary.suggest(folded)
        if suggestion is None:
            continue
        pieces.append(text[cursor : word.start])
        pieces.append(suggestion)
        cursor = word.end
        changed = True
    if not changed:
        return text
    pieces.append(text[cursor:])
    return "".join(pieces)


def open_searcher(settings: Settings) -> Searcher:
    """The searcher for the configured data directory and store."""
    return Searcher(settings.index_dir, settings.db_url)
