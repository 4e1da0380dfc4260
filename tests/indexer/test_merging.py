"""Incremental commits merge only small segments, a bounded number of documents at a time."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sqlalchemy import update
from whoosh import index as whoosh_index
from whoosh.fields import ID, TEXT, Schema
from whoosh.query import Term

from indexer.merging import MAX_SEGMENTS, bounded_merge
from indexer.writer import TunedSegmentWriter
from sextant.store import Page, session_factory, utcnow
from tests.indexer.conftest import Store
from tests.indexer.spaces import P

SCHEMA = Schema(pid=ID(stored=True, unique=True), body=TEXT)


def _segment_sizes(ix: Any) -> list[int]:
    return sorted(segment.doc_count_all() for segment in ix._segments())


def _index_with_segments(directory: Path, sizes: list[int]) -> Any:
    ix = whoosh_index.create_in(str(directory), SCHEMA)
    pid = 0
    for size in sizes:
        writer = TunedSegmentWriter(ix, limitmb=16)
        for _ in range(size):
            writer.add_document(pid=str(pid), body=f"word{pid % 13} common")
            pid += 1
        writer.commit(merge=False)
    return ix


def _commit_one(ix: Any, body: str, *, max_docs: int, max_segments: int) -> None:
    """One more document, committed under :func:`bounded_merge` with these bounds."""
    policy = functools.partial(bounded_merge, max_docs=max_docs, max_segments=max_segments)
    writer = TunedSegmentWriter(ix, limitmb=16)
    writer.add_document(pid="new", body=body)
    writer.commit(mergetype=policy)


def test_a_commit_merges_the_small_segments_and_never_the_big_ones(tmp_path: Path) -> None:
    ix = _index_with_segments(tmp_path, [400, 300, 5, 6, 7, 8])
    _commit_one(ix, "fresh common", max_docs=100, max_segments=4)
    # The four small ones (26 documents) and the new one became one; the big ones stayed.
    assert _segment_sizes(ix) == [27, 300, 400]
    with ix.searcher() as searcher:
        assert searcher.doc_count() == 727
        assert len(searcher.search(Term("body", "common"), limit=None)) == 727


def test_a_commit_merges_no_more_documents_than_its_bound(tmp_path: Path) -> None:
    ix = _index_with_segments(tmp_path, [30, 30, 30, 30, 30, 30])
    _commit_one(ix, "fresh", max_docs=70, max_segments=3)
    assert _segment_sizes(ix) == [30, 30, 30, 30, 61]


def test_below_the_segment_bound_nothing_is_merged(tmp_path: Path) -> None:
    ix = _index_with_segments(tmp_path, [5, 5])
    writer = TunedSegmentWriter(ix, limitmb=16)
    writer.add_document(pid="new", body="fresh")
    writer.commit(mergetype=bounded_merge)
    assert _segment_sizes(ix) == [1, 5, 5]


def test_many_incremental_runs_keep_the_segment_count_bounded(store: Store) -> None:
    store.space.add({f"gemini://a.example/{i}.gmi": P(f"# Page {i}\nText {i}.") for i in range(6)})
    store.index()
    for run in range(3 * MAX_SEGMENTS):
        with session_factory(store.engine)() as session, session.begin():
            session.execute(
                update(Page)
                .where(Page.url == f"gemini://a.example/{run % 6}.gmi")
                .values(body=f"# Page {run % 6}\nEdited {run}.", updated_at=utcnow())
            )
        store.index()
        generation = store.index_dir.resolve()
        assert len(list(generation.glob("*.seg"))) <= MAX_SEGMENTS
    with store.searcher() as searcher:
        assert searcher.search("edited").total == 6
