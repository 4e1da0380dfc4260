"""``sextant index``: bring the Whoosh index up to date with the store.

Two ways, one result:

* **Incremental** (the default once an index exists). Pages whose ``updated_at`` is past the
  index's watermark are re-indexed when they are indexable and deleted otherwise; the crawler
  moves ``updated_at`` when a page changes and when it gains or loses an inbound link, so
  anchor text and inbound counts follow. Pages that vanished from the store, or left the
  indexable states without their timestamp moving, are found by comparing the index's page ids
  with the store's and deleted too. The watermark is the run's start time (less a minute of
  slack for crawler transactions that were still open), saved only after the commit, so a
  killed run repeats work instead of skipping it.
* **Full** (``--rebuild``, the first run, or when most pages changed). A fresh generation
  directory is filled by several processes at once, each reading its share of pages from the
  store, parsing and analyzing them and writing its own Whoosh segment; the segments are then
  committed together and the generation is swapped in atomically (:mod:`indexer.location`).

Either way, link scores (:mod:`indexer.rank`) are recomputed from the whole graph (the parent
process does that while the workers index) and the spelling vocabulary is updated.

Whoosh notes, measured on this project's 2-core machine: Whoosh spends most of a build on
postings; :mod:`indexer.writer` takes out the overheads that do not depend on the data, and
its posting pool (:mod:`indexer.pool`) holds a fixed amount, spilling runs by term beyond it.
One writer per process, each writing its own segment, avoids both pickling documents to
workers (what ``MpWriter`` does) and a single-threaded merge at the end.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select, true
from sqlalchemy.sql.elements import ColumnElement

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh import index as whoosh_index
from whoosh.index import TOC, FileIndex

from indexer import location
from indexer.analysis import detect_language
from indexer.documents import INDEXED_STATES, SPELLING_KEY, documents_for, iter_pages
from indexer.merging import bounded_merge
from indexer.rank import LinkScores, compute, hub_pages
from indexer.schema import build_schema
from indexer.spelling import Vocabulary
from indexer.writer import TunedSegmentWriter
from sextant.store import Run, make_engine, session_factory, utcnow
from sextant.store.batches import in_batches
from sextant.store.migrate import open_store
from sextant.store.models import Page
from sextant.store.redirects import PermanentRedirects, permanent_redirects

#: Below this many pages a full build runs in-process: starting workers costs more than it saves.
PARALLEL_MIN_PAGES = 2000
#: The posting pool of each writer, in MB: fixed, not a share of the machine's memory, so that
#: the stage's memory does not follow the corpus (beyond it the pool spills runs by term, see
#: indexer.pool). Measured on the 20,000-page store, two workers (`sextant index --rebuild
#: --pool-mb N`, CPU s / largest process MB / tree PSS MB): unbounded 81.6 / 562 / 1,068;
#: 128 MB 76.7 / 347 / 642 (three spills a worker, no slower); 32 MB 86.3 / 265 / 481 (+6%
#: CPU). 128 MB keeps two workers and the parent well under 1 GB at any corpus size.
WRITER_POOL_MB = 128
#: An incremental run that would touch more than this share of the index rebuilds instead.
REBUILD_FRACTION = 0.5
#: Subtracted from the run's start time: a crawler transaction that stamped updated_at before
#: we started but committed after our read must still be newer than the watermark. The crawler's
#: write transactions last milliseconds; pages stamped within the slack are simply indexed again.
WATERMARK_SLACK = timedelta(seconds=10)
BATCH_SIZE = 500

Progress = Callable[[int, int], None]  # (pages done, pages to do)


@dataclass(frozen=True, slots=True)
class _Options:
    procs: int | None
    progress: Progress | None
    limitmb: int | None  # per writer; None: WRITER_POOL_MB
    watermark_slack: timedelta


@dataclass(frozen=True, slots=True)
class IndexReport:
    mode: str  # "full" or "incremental"
    indexed: int  # documents written
    deleted: int  # documents removed (incremental only)
    documents: int  # documents in the index afterwards
    seconds: float
    docs_per_second: float
    rank_seconds: float
    index_bytes: int
    generation: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def run_index(
    index_dir: Path,
    db_url: str,
    *,
    rebuild: bool = False,
    procs: int | None = None,
    progress: Progress | None = None,
    limitmb: int | None = None,
    watermark_slack: timedelta = WATERMARK_SLACK,
) -> IndexReport:
    """Index what changed in the store since the last run (or everything, with ``rebuild``)."""
    options = _Options(procs, progress, limitmb, watermark_slack)
    engine = open_store(db_url)
    try:
        with location.exclusive(index_dir):
            generation = location.live_generation(index_dir)
            state = location.read_state(generation) if generation is not None else None
            if rebuild or generation is None or state is None:
                report = _full_build(index_dir, engine, db_url, options)
            else:
                report = _incremental(index_dir, generation, state, engine, db_url, options)
        _record_run(engine, report)
        return report
    finally:
        engine.dispose()


# --- full build ----------------------------------------------------------------------------


def _full_build(index_dir: Path, engine: Engine, db_url: str, options: _Options) -> IndexReport:
    started = utcnow()
    progress = options.progress
    clock = time.perf_counter()
    generation = location.new_generation(index_dir)
    try:
        ix = whoosh_index.create_in(str(generation), build_schema())
        with engine.connect() as connection:
            total = connection.scalar(
                select(func.count()).select_from(Page).where(Page.state.in_(INDEXED_STATES))
            )
            hubs = frozenset(int(page_id) for page_id in hub_pages(connection))
            moved = permanent_redirects(connection)
        total = int(total or 0)
        workers = _worker_count(options.procs, total)
        limitmb = options.limitmb or WRITER_POOL_MB
        job = _Job(str(generation), db_url, workers, limitmb, hubs, moved)
        rank_clock = 0.0
        if job.workers == 1:
            segment, vocabulary, count = _index_share(job, true(), progress, total)
            segments = [segment] if segment is not None else []
            rank_clock = time.perf_counter()
            scores = _compute_scores(engine)
            rank_clock = time.perf_counter() - rank_clock
        else:
            segments, vocabulary, count, scores, rank_clock = _parallel_shares(
                job, engine, progress, total
            )
        _commit_segments(ix, segments)
        # The workers' writers share Whoosh's temporary directory and none of them removes it.
        shutil.rmtree(generation / f"{ix.indexname}.tmp", ignore_errors=True)
        scores.save(generation)
        vocabulary.save(generation)
        location.write_state(
            generation,
            location.IndexState(watermark=started - options.watermark_slack, built_at=utcnow()),
        )
    except BaseException:
        shutil.rmtree(generation, ignore_errors=True)
        raise
    previous = location.swap_in(index_dir, generation)
    keep = {generation} if previous is None else {generation, previous}
    location.remove_old_generations(index_dir, keep=keep)
    seconds = time.perf_counter() - clock
    return IndexReport(
        mode="full",
        indexed=count,
        deleted=0,
        documents=count,
        seconds=seconds,
        docs_per_second=count / seconds if seconds > 0 else 0.0,
        rank_seconds=rank_clock,
        index_bytes=location.directory_size(generation),
        generation=generation.name,
    )


def _worker_count(procs: int | None, total: int) -> int:
    if procs is not None:
        return max(1, procs)
    if total < PARALLEL_MIN_PAGES:
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


_shared_done: Any = None  # a multiprocessing.Value in workers, for the parent's progress line


def _init_worker(done: Any) -> None:
    global _shared_done
    _shared_done = done


@dataclass(frozen=True, slots=True)
class _Job:
    """What every worker of a full build needs (pickled to each of them)."""

    generation: str
    db_url: str
    workers: int
    limitmb: int
    hubs: frozenset[int]
    moved: PermanentRedirects


def _share_worker(job: _Job, share: int) -> tuple[Any, Counter[str], int]:
    """Worker process entry: index the pages whose id falls in this worker's share."""
    where = (Page.id % job.workers) == share
    segment, vocabulary, count = _index_share(job, where, None, 0)
    return segment, vocabulary.counts, count


def _parallel_shares(
    job: _Job, engine: Engine, progress: Progress | None, total: int
) -> tuple[list[Any], Vocabulary, int, LinkScores, float]:
    # fork shares the loaded modules (and the language model, once loaded) with the workers;
    # the parent's database connections must not cross the fork, hence dispose().
    detect_language("warm up the language model before forking workers")
    engine.dispose()
    context = multiprocessing.get_context("fork")
    done = context.Value("q", 0)
    # What the parent holds when it forks (modules, the hub and redirect sets, a caller's
    # own data) is never freed by a worker, yet every full collection in a worker walked it
    # again: a parent holding 5 million objects made two workers spend 112 CPU s on the
    # 20,000-page store instead of 93; frozen, 98. Freezing also keeps the workers' garbage
    # collector from writing to, and so copying, the pages those objects share with the parent.
    gc.freeze()
    try:
        with ProcessPoolExecutor(
            max_workers=job.workers, mp_context=context, initializer=_init_worker, initargs=(done,)
        ) as pool:
            futures: list[Future[tuple[Any, Counter[str], int]]] = [
                pool.submit(_share_worker, job, share) for share in range(job.workers)
            ]
            # The parent's own work while the workers index: the link analysis.
            rank_clock = time.perf_counter()
            scores = _compute_scores(engine)
            rank_clock = time.perf_counter() - rank_clock
            while not all(future.done() for future in futures):
                if progress is not None:
                    progress(min(done.value, total), total)
                time.sleep(0.25)
            results = [future.result() for future in futures]
    finally:
        gc.unfreeze()
    if progress is not None:
        progress(total, total)
    vocabulary = Vocabulary()
    segments = []
    count = 0
    for segment, words, n in results:
        if segment is not None:
            segments.append(segment)
        vocabulary.merge(words)
        count += n
    return segments, vocabulary, count, scores, rank_clock


def _index_share(
    job: _Job, where: ColumnElement[bool], progress: Progress | None, total: int
) -> tuple[Any, Vocabulary, int]:
    """Index the indexable pages matching ``where`` into one new, uncommitted segment."""
    ix = location.open_for_writing(Path(job.generation))
    writer = TunedSegmentWriter(ix, limitmb=job.limitmb, lock=False)
    vocabulary = Vocabulary()
    count = 0
    engine = make_engine(job.db_url)
    try:
        with engine.connect() as connection:
            for rows in iter_pages(connection, where, batch_size=BATCH_SIZE):
                for document in documents_for(connection, rows, job.hubs, job.moved):
                    writer.add_document(**document)
                    vocabulary.add(document[SPELLING_KEY])
                    count += 1
                if _shared_done is not None:
                    with _shared_done.get_lock():
                        _shared_done.value += len(rows)
                if progress is not None:
                    progress(count, total)
        if count:
            return writer._finalize_segment(), vocabulary, count
        writer._close_segment()
        return None, vocabulary, 0
    except BaseException:
        writer._close_segment()
        raise
    finally:
        engine.dispose()


def _commit_segments(ix: FileIndex, segments: Sequence[Any]) -> None:
    """Make the workers' segments the index, as one new generation of the TOC."""
    lock = ix.lock("WRITELOCK")
    if not lock.acquire(blocking=True):
        raise location.IndexBusy("the new index is locked by another writer")
    try:
        toc = ix._read_toc()
        TOC(toc.schema, [*toc.segments, *segments], toc.generation + 1).write(
            ix.storage, ix.indexname
        )
    finally:
        lock.release()


def _compute_scores(engine: Engine) -> LinkScores:
    with engine.connect() as connection:
        return compute(connection)


# --- incremental ---------------------------------------------------------------------------


def _incremental(
    index_dir: Path,
    generation: Path,
    state: location.IndexState,
    engine: Engine,
    db_url: str,
    options: _Options,
) -> IndexReport:
    started = utcnow()
    clock = time.perf_counter()
    progress = options.progress
    limitmb = options.limitmb or WRITER_POOL_MB
    ix = location.open_for_writing(generation)
    with engine.connect() as connection:
        changed = connection.execute(
            select(Page.id, Page.state).where(Page.updated_at > state.watermark)
        ).all()
        indexable_ids = set(
            connection.scalars(select(Page.id).where(Page.state.in_(INDEXED_STATES)))
        )
        hubs = frozenset(int(page_id) for page_id in hub_pages(connection))
        moved = permanent_redirects(connection)
    # A page that moved here for good, or a link to one, changes this page's anchor text.
    to_index = sorted(
        {row.id for row in changed if row.state in INDEXED_STATES}
        | (
            {moved.target_of[row.id] for row in changed if row.id in moved.target_of}
            & indexable_ids
        )
    )
    with ix.searcher() as searcher:
        documents_before = searcher.doc_count()
        # Deleted: changed pages that left the indexable states, and any indexed page the store
        # no longer offers (rows deleted, states changed without the timestamp moving). The
        # term list still holds ids of deleted documents until a merge, hence the live check.
        candidates = {int(term) for term in searcher.reader().field_terms("pid")}
        candidates -= indexable_ids
        candidates |= {row.id for row in changed if row.state not in INDEXED_STATES}
        to_delete = sorted(
            page_id
            for page_id in candidates
            if searcher.document_number(pid=str(page_id)) is not None
        )
    if len(to_index) > REBUILD_FRACTION * max(documents_before, 1) and len(to_index) > (
        PARALLEL_MIN_PAGES
    ):
        return _full_build(index_dir, engine, db_url, options)

    # Link analysis before the writer: its arrays are freed before the posting pool fills,
    # where after it they came on top of what the pool left behind (the run's peak at
    # 200,000 pages: 438 MB after, 298 MB before). The scores describe the store as of
    # this run either way.
    rank_clock = time.perf_counter()
    scores = _compute_scores(engine)
    rank_clock = time.perf_counter() - rank_clock
    vocabulary = Vocabulary.load(generation)
    writer = TunedSegmentWriter(ix, limitmb=limitmb)
    count = 0
    try:
        for page_id in to_delete:
            writer.delete_by_term("pid", str(page_id))
        with engine.connect() as connection:
            done = 0
            for chunk in in_batches(to_index, BATCH_SIZE):
                done += len(chunk)
                where = Page.id.in_(chunk)
                for rows in iter_pages(connection, where, batch_size=BATCH_SIZE):
                    for document in documents_for(connection, rows, hubs, moved):
                        writer.update_document(**document)
                        vocabulary.add(document[SPELLING_KEY])
                        count += 1
                if progress is not None:
                    progress(done, len(to_index))
        writer.commit(mergetype=bounded_merge)  # never the big segments (indexer.merging)
    except BaseException:
        writer.cancel()
        raise
    scores.save(generation)
    vocabulary.save(generation)
    location.write_state(
        generation,
        location.IndexState(watermark=started - options.watermark_slack, built_at=utcnow()),
    )
    with ix.reader() as reader:
        documents = reader.doc_count()
    seconds = time.perf_counter() - clock
    return IndexReport(
        mode="incremental",
        indexed=count,
        deleted=len(to_delete),
        documents=documents,
        seconds=seconds,
        docs_per_second=count / seconds if seconds > 0 else 0.0,
        rank_seconds=rank_clock,
        index_bytes=location.directory_size(generation),
        generation=generation.name,
    )


def _record_run(engine: Engine, report: IndexReport) -> None:
    """Keep the run's figures in the store's ``runs`` table (for `sextant graph` and people)."""
    finished = utcnow()
    with session_factory(engine)() as session, session.begin():
        session.add(
            Run(
                kind="index",
                started_at=finished - timedelta(seconds=report.seconds),
                finished_at=finished,
                stats=report.to_json(),
            )
        )
