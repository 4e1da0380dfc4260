"""Which segments an incremental commit merges: only small ones, a bounded amount of them.

Whoosh's default policy (``MERGE_SMALL``) merges every segment up to a point found with the
Fibonacci sequence; once an index has had enough commits (about 18 at 20,000 pages, 25 at
600,000) it merges the full build's big segments too, i.e. rewrites every posting of the index
through one process: the work of a full build inside what should be a 1 % run (< 3 min at
600,000 pages), and at any size a merge as large as the index.

Here a commit merges the segments with the fewest live documents, as long as together they
hold at most ``max_docs`` documents (deleted ones included: the merge still reads their
postings), and only when the index has more than ``max_segments`` segments. So a commit
merges at most ``max_docs`` documents whatever the size of the index, and the segment count
stays bounded: a segment is left out of every merge only while it holds more than
``max_docs / 2`` live documents (two of them would not fit), and re-indexed pages are deleted
from their old segments, so such segments number at most ``2 × documents / max_docs`` (24 at
600,000 pages and the default below), plus ``max_segments`` small ones. A ``--rebuild``
starts again from one segment per worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.reading import SegmentReader

#: Documents a commit may merge. Measured on the 20,000-page store: the incremental run that
#: merged all of it (two 9,850-document segments and six small ones) took 41.5 CPU s against
#: 2.8 for the runs that merged nothing, i.e. 1.9 CPU ms a merged document, at 268 MB peak
#: RSS (the bounded pool). 50,000 documents: ~95 CPU s, which with the ~6,000 pages of a 1 %
#: run at 600,000 pages (~7 CPU ms each) stays under the 3 min target.
MAX_MERGE_DOCS = 50_000
#: Segments an index may have before a commit merges the small ones.
MAX_SEGMENTS = 8


def bounded_merge(
    writer: Any,
    segments: Sequence[Any],
    *,
    max_docs: int = MAX_MERGE_DOCS,
    max_segments: int = MAX_SEGMENTS,
) -> list[Any]:
    """A Whoosh merge policy: merge the smallest segments within ``max_docs`` into the
    writer's new segment; returns the segments kept as they are."""
    chosen = merge_choice(segments, max_docs=max_docs, max_segments=max_segments)
    for segment in chosen:
        reader = SegmentReader(writer.storage, writer.schema, segment)
        try:
            writer.add_reader(reader)
        finally:
            reader.close()
    return [segment for segment in segments if segment not in chosen]


def merge_choice(segments: Sequence[Any], *, max_docs: int, max_segments: int) -> list[Any]:
    """The segments :func:`bounded_merge` merges (the writer's new one is always written)."""
    if len(segments) + 1 <= max_segments:
        return []
    chosen = []
    total = 0
    for segment in sorted(segments, key=lambda s: s.doc_count()):
        cost = segment.doc_count_all()
        if total + cost > max_docs:
            continue  # a segment of many deleted documents may leave room for smaller ones
        chosen.append(segment)
        total += cost
    # Merging one segment alone only purges its deleted documents; worth it only with others.
    return chosen if len(chosen) >= 2 else []
