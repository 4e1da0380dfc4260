"""The read API: one call from a query string to a page of ranked, snippeted results.

The search capsule and ``sextant search`` both use :class:`Searcher`. It stays warm: the Whoosh
reader, the page-id and link-score arrays and the spelling vocabulary are opened once and
reused, and each query first makes a cheap check (a ``readlink``, a directory listing and a
``stat``) for a swapped-in rebuild, a new incremental commit or new link scores, reopening
only what changed.

Ranking (see :mod:`indexer.rank` for the blend): text queries take the top hits by BM25F from
Whoosh (with its block-max skipping), multiply each score by the link prior, fold hits that
share content (same content hash: mirrors, copies) into the best-placed one, and sort.
Filter-only queries have no text score, so all matching pages are ordered by link score.

Threads: Whoosh's reader objects are not safe for concurrent use, so each snapshot's searcher
is used under a lock; the work outside it (parsing, snippets from the store) runs in parallel.
Whoosh search is pure Python, so a pool of searchers would not run faster under the GIL anyway.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy
from sqlalchemy import select
from whoosh import index as whoosh_index
from whoosh.reading import TermNotFound
from whoosh.searching import Searcher as WhooshSearcher

from indexer import location
from indexer.analysis import fold, words
from indexer.location import IndexMissing
from indexer.querylang import Compiled, ParsedQuery, Span, compile_query, parse
from indexer.rank import RANK_FILE, RERANK_WINDOW, LinkScores, prior
from indexer.schema import BOOST_FIELDS, TEXT_FIELD
from indexer.snippets import MARK_END, MARK_START, make_snippet
from indexer.spelling import Vocabulary
from indexer.weighting import BM25F
from sextant import gemtext
from sextant.errors import QueryError
from sextant.store import make_engine
from sextant.store.models import Page
from sextant.urls import DEFAULT_PORT
from sextant.urls import parse as parse_url

if TYPE_CHECKING:
    from sextant.config import Settings

__all__ = [
    "MARK_END",
    "MARK_START",
    "Hit",
    "IndexMissing",
    "SearchResults",
    "Searcher",
    "open_searcher",
]

#: Results beyond this rank are not offered (nobody reads page 101 of a search engine).
MAX_RESULTS = 1000
MAX_PAGE_SIZE = 100
#: Candidates of a phrase query's loose form checked (see _phrase_hits).
PHRASE_CANDIDATES = 300
#: Phrases whose words are all this common (share of documents) are checked on a sample.
PHRASE_SAMPLE_SHARE = 0.2
PHRASE_SAMPLE = 1000
#: A query Whoosh estimates to match at most this many documents is scored and counted in
#: one pass, without block-max skipping.
ONE_PASS_ESTIMATE = 3000
#: Matches counted one by one before the total is extrapolated (see _count).
COUNT_LIMIT = 1000
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


@dataclass(frozen=True, slots=True)
class SearchResults:
    query: str
    total: int
    page: int
    page_size: int
    hits: tuple[Hit, ...]
    suggestion: str | None
    seconds: float
    exact: bool = True  # False: ``total`` is an estimate (a large result set, see _count)

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
        self.rank_stamp: tuple[int, int, int] | None = None
        self.link_scores = LinkScores.empty()
        self.ranks = numpy.ones(len(self.page_ids))
        self.refresh_ranks()
        self._vocabulary: Vocabulary | None = None

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

    def vocabulary(self) -> Vocabulary:
        if self._vocabulary is None:
            self._vocabulary = Vocabulary.load(self.generation)
        return self._vocabulary

    def close(self) -> None:
        self.searcher.close()


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
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
        page_ids = numpy.fromiter(reader.column_reader("key"), dtype=numpy.int64, count=count)
        groups = numpy.fromiter(reader.column_reader("fold"), dtype=numpy.int64, count=count)
    return page_ids, groups


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

    Safe to call from worker threads (``trio.to_thread.run_sync``).
    """

    def __init__(self, index_dir: Path, db_url: str) -> None:
        self._index_dir = index_dir
        self._engine = make_engine(db_url)
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._closed = False

    def search(
        self, query: str, *, page: int = 1, page_size: int = 10, ranking: str = "blended"
    ) -> SearchResults:
        """One page of results; raises :class:`QueryError` with a message for people.

        ``ranking`` is ``blended`` (the product) or a baseline for evaluation: ``bm25f``
        (no link prior) or ``bm25`` (body text only, no prior).
        """
        started = time.perf_counter()
        if page < 1:
            raise QueryError("page numbers start at 1")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise QueryError(f"page size must be between 1 and {MAX_PAGE_SIZE}")
        if ranking not in RANKINGS:
            raise ValueError(f"ranking must be one of {RANKINGS}, not {ranking!r}")
        parsed = parse(query)
        compiled = compile_query(parsed)
        with self._use_snapshot() as snapshot:
            with snapshot.lock:
                if parsed.has_text:
                    ranked, total, exact = _rank_text(
                        snapshot,
                        compiled,
                        page * page_size,
                        boost=ranking != "bm25",
                        blend=ranking == "blended",
                    )
                else:
                    ranked, total, exact = _rank_filters(snapshot, compiled.query)
                chosen = ranked[(page - 1) * page_size : page * page_size]
                stored = [snapshot.searcher.stored_fields(docnum) for docnum, _ in chosen]
                ranks = [float(snapshot.ranks[docnum]) for docnum, _ in chosen]
            suggestion = self._suggest(snapshot, parsed, total) if total < SUGGEST_BELOW else None
        texts = self._texts([int(fields["pid"]) for fields in stored])
        hits = tuple(
            _hit(fields, score, rank, texts.get(int(fields["pid"]), ""), compiled.terms)
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
            exact=exact,
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
        with self._lock:
            if self._closed:
                raise QueryError("this searcher is closed")
            generation = location.live_generation(self._index_dir)
            if generation is None:
                raise IndexMissing(
                    f"no index yet at {self._index_dir}: run `sextant index` "
                    "(after `sextant crawl`) to build one"
                )
            snapshot = self._snapshot
            if snapshot is None or not snapshot.is_current(generation):
                if location.read_state(generation) is None:
                    raise IndexMissing(
                        f"the index at {self._index_dir} was built by another version of "
                        "sextant: run `sextant index --rebuild`"
                    )
                fresh = _Snapshot(generation)
                if snapshot is not None:
                    snapshot.retired = True
                    if snapshot.users == 0:
                        snapshot.close()
                snapshot = self._snapshot = fresh
            else:
                with snapshot.lock:
                    snapshot.refresh_ranks()
            snapshot.users += 1
            return snapshot

    # --- suggestions and snippets --------------------------------------------------------

    def _suggest(self, snapshot: _Snapshot, parsed: ParsedQuery, total: int) -> str | None:
        """A corrected query that finds more, built from the index's own vocabulary."""
        if not parsed.words:
            return None
        with snapshot.lock:
            vocabulary = snapshot.vocabulary()
        replacements: list[tuple[Span, str]] = []
        for span in parsed.words:
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
            found = snapshot.searcher.search(corrected_query, limit=1)
            better = found.scored_length() > 0 and len(found) > total
        return text if better else None

    def _texts(self, page_ids: Sequence[int]) -> dict[int, str]:
        """The searchable text of each page, from the store (the index keeps none)."""
        if not page_ids:
            return {}
        query = select(Page.id, Page.state, Page.mime, Page.body, Page.meta).where(
            Page.id.in_(page_ids)
        )
        texts: dict[int, str] = {}
        with self._engine.connect() as connection:
            for row in connection.execute(query):
                texts[row.id] = _searchable_text(row.state, row.mime, row.body, row.meta)
        return texts


def _searchable_text(state: str, mime: str | None, body: str | None, meta: str | None) -> str:
    if state == "input":
        return meta or ""
    mime = (mime or "").split(";", 1)[0].strip().lower()
    if not body or not mime.startswith("text/"):
        return ""
    if mime == "text/gemini":
        return gemtext.parse(body).text
    return body


def _rank_text(
    snapshot: _Snapshot, compiled: Compiled, wanted: int, *, boost: bool, blend: bool
) -> tuple[list[tuple[int, float]], int, bool]:
    """The best hits and the match count (and whether it is exact), in three stages:
    candidates by BM25 on ``text`` (Whoosh, block-max skipping), their boost-field scores
    added (BM25F), the link prior multiplied in (:mod:`indexer.rank`); then duplicates are
    folded. ``boost`` and ``blend`` off give the plain-BM25 baseline for evaluation."""
    searcher = snapshot.searcher
    if compiled.phrases:
        scored, total, exact = _phrase_hits(searcher, compiled, wanted)
    else:
        window = min(MAX_RESULTS, max(RERANK_WINDOW, wanted))
        if compiled.query.estimate_size(searcher.reader()) <= ONE_PASS_ESTIMATE:
            # Few matches expected: one pass that scores and counts them all is cheaper than
            # a skipping pass plus a counting pass.
            results = searcher.search(compiled.query, limit=window, optimize=False)
            scored = list(results.items())
            total, exact = len(results), True
        else:
            results = searcher.search(compiled.query, limit=window)
            scored = list(results.items())
            total, exact = _count(searcher, compiled.query, len(scored), window)
    if boost and compiled.boosts and scored:
        bonus = _boost_scores(searcher, sorted(docnum for docnum, _ in scored), compiled.boosts)
        scored = [(docnum, score + bonus.get(docnum, 0.0)) for docnum, score in scored]
    if blend:
        scored = [(docnum, score * prior(snapshot.ranks[docnum])) for docnum, score in scored]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    kept = _fold(scored, snapshot.groups, snapshot.ranks)
    return kept, total - (len(scored) - len(kept)), exact


def _boost_scores(
    searcher: WhooshSearcher, docnums: list[int], boosts: set[tuple[str, str]]
) -> dict[int, float]:
    """Each candidate's weighted BM25 in the boost fields (title, anchors, headings)."""
    pairs = [(field, term, BOOST_FIELDS[field]) for field, term in sorted(boosts)]
    return _term_scores(searcher, docnums, pairs)


def _term_scores(
    searcher: WhooshSearcher, docnums: list[int], pairs: list[tuple[str, str, float]]
) -> dict[int, float]:
    """Sum of ``weight × BM25(field, term)`` per document of ``docnums`` (ascending): one
    forward pass per posting list."""
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


def _phrase_hits(
    searcher: WhooshSearcher, compiled: Compiled, wanted: int
) -> tuple[list[tuple[int, float]], int, bool]:
    """Phrase queries: candidates from the loose query (each phrase as the AND of its
    words), then the positional check, done three ways by how common the words are:

    * few candidates (Whoosh's estimate at most :data:`ONE_PASS_ESTIMATE`): all of them are
      scored and checked; the count is exact;
    * more: the best :data:`PHRASE_CANDIDATES` by score are checked, in one pass in document
      order; the count is the loose count scaled by the share that held the phrase;
    * words so common that a fifth of all pages hold them all ("of the", "is a"): scoring
      them all would cost more than anything else a search does, and BM25 barely tells such
      pages apart, so the first :data:`PHRASE_SAMPLE` candidates in index order are checked
      and the phrase holders among them scored. Results come from that sample (about the
      first crawled pages), the count is extrapolated.
    """
    documents = searcher.doc_count_all()
    estimate = compiled.query.estimate_size(searcher.reader())
    if estimate > PHRASE_SAMPLE_SHARE * documents and estimate > ONE_PASS_ESTIMATE:
        return _sampled_phrase_hits(searcher, compiled, documents)
    if estimate <= ONE_PASS_ESTIMATE:
        candidates = list(searcher.search(compiled.query, limit=None, optimize=False).items())
        holding = _verify_phrases(searcher, sorted(docnum for docnum, _ in candidates), compiled)
        verified = [pair for pair in candidates if pair[0] in holding]
        return verified, len(verified), True
    window = min(MAX_RESULTS, max(PHRASE_CANDIDATES, wanted))
    candidates = list(searcher.search(compiled.query, limit=window).items())
    holding = _verify_phrases(searcher, sorted(docnum for docnum, _ in candidates), compiled)
    verified = [pair for pair in candidates if pair[0] in holding]
    if len(candidates) < window:
        return verified, len(verified), True
    loose_total, _ = _count(searcher, compiled.query, len(candidates), window)
    return verified, max(len(verified), round(loose_total * len(verified) / window)), False


def _sampled_phrase_hits(
    searcher: WhooshSearcher, compiled: Compiled, documents: int
) -> tuple[list[tuple[int, float]], int, bool]:
    sample: list[int] = []
    for docnum in searcher.docs_for_query(compiled.query):
        sample.append(docnum)
        if len(sample) >= PHRASE_SAMPLE:
            break
    holding = sorted(_verify_phrases(searcher, sample, compiled))
    scores = _term_scores(searcher, holding, [(TEXT_FIELD, term, 1.0) for term in compiled.terms])
    verified = [(docnum, scores.get(docnum, 0.0)) for docnum in holding]
    if len(sample) < PHRASE_SAMPLE:
        return verified, len(verified), True
    covered = (sample[-1] + 1) / max(documents, 1)
    return verified, max(len(verified), round(len(verified) / covered)), False


def _verify_phrases(searcher: WhooshSearcher, docnums: list[int], compiled: Compiled) -> set[int]:
    """The documents among ``docnums`` (ascending) where every deferred phrase holds."""
    holding = set(docnums)
    for check in compiled.phrases:
        passed: set[int] = set()
        for field, sequence in check.alternatives:
            pending = [docnum for docnum in docnums if docnum in holding and docnum not in passed]
            if not pending:
                break
            passed |= _sequence_at(searcher, field, sequence, pending)
        holding &= passed
    return holding


def _sequence_at(
    searcher: WhooshSearcher, field: str, sequence: tuple[str, ...], docnums: list[int]
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


def _count(searcher: WhooshSearcher, query: Any, collected: int, window: int) -> tuple[int, bool]:
    """How many documents match, and whether that is exact.

    When the top-hits collector did not fill its window it saw every match (block-max skipping
    only starts once the window is full), so its count is exact. Otherwise matching documents
    are counted without scoring up to :data:`COUNT_LIMIT`, and a count that reaches the limit
    is extrapolated by the share of document numbers it covered: document numbers follow crawl
    order, not content, so the matches seen so far are a fair sample. Counting every match of
    a common word costs more than the search itself on a large index.
    """
    if collected < window:
        return collected, True
    documents = searcher.doc_count_all()
    count = 0
    for docnum in searcher.docs_for_query(query):
        count += 1
        if count >= COUNT_LIMIT:
            return max(count, round(count * documents / (docnum + 1))), False
    return count, True


def _rank_filters(snapshot: _Snapshot, query: Any) -> tuple[list[tuple[int, float]], int, bool]:
    """Every page a filter-only query matches, best link score first, folded."""
    docnums = numpy.fromiter(snapshot.searcher.docs_for_query(query), dtype=numpy.int64)
    if len(docnums) == 0:
        return [], 0, True
    ranks = snapshot.ranks[docnums]
    order = numpy.lexsort((docnums, -ranks))
    docnums, ranks = docnums[order], ranks[order]
    _, first = numpy.unique(snapshot.groups[docnums], return_index=True)
    keep = numpy.sort(first)
    total = len(keep)
    keep = keep[:MAX_RESULTS]
    hits = [(int(d), float(r)) for d, r in zip(docnums[keep], ranks[keep], strict=True)]
    return hits, total, True


def _fold(
    scored: list[tuple[int, float]], groups: numpy.ndarray, ranks: numpy.ndarray
) -> list[tuple[int, float]]:
    """One hit per group of identical content: the group's best score, shown as its
    best-linked member (the original rather than a mirror of it), best scores first."""
    best_score: dict[int, float] = {}
    shown: dict[int, int] = {}
    for docnum, score in scored:
        group = int(groups[docnum])
        if group not in best_score or score > best_score[group]:
            best_score[group] = score
        if group not in shown or ranks[docnum] > ranks[shown[group]]:
            shown[group] = docnum
    kept = [(shown[group], score) for group, score in best_score.items()]
    kept.sort(key=lambda pair: (-pair[1], pair[0]))
    return kept


def _hit(fields: dict[str, Any], score: float, rank: float, text: str, terms: set[str]) -> Hit:
    url = fields["url"]
    title = fields.get("title")
    # A gemtext body usually opens with its title heading; the snippet should say more.
    if title and text.startswith(title) and text[len(title) : len(title) + 1] == "\n":
        text = text[len(title) :].lstrip() or text
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
    )


def _display_host(url: str, fallback: str) -> str:
    try:
        parsed = parse_url(url)
    except Exception:  # an index built from an older URL parser: show what is stored
        return fallback
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
