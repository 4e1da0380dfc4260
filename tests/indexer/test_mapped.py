"""Searchers read index files from the memory map in place (indexer/mapped.py)."""

from __future__ import annotations

import io
import random
import tracemalloc
from pathlib import Path

import pytest
from whoosh import index as whoosh_index
from whoosh.filedb import compound

from indexer.analysis import analyze
from indexer.mapped import MappedFile, ViewReader
from indexer.schema import POSITIONS_COLUMN, build_schema, text_columns
from indexer.writer import TunedSegmentWriter

DATA = b"first line\nsecond line\n\nlast, without a newline"


def test_view_reader_reads_seeks_and_splits_lines_as_bytesio_does() -> None:
    ours, theirs = ViewReader(memoryview(DATA)), io.BytesIO(DATA)
    for step in (
        lambda f: f.read(5),
        lambda f: f.readline(),
        lambda f: f.tell(),
        lambda f: f.seek(-4, io.SEEK_CUR),
        lambda f: f.readline(3),
        lambda f: f.readline(),
        lambda f: f.readline(),
        lambda f: f.read(),
        lambda f: f.read(10),  # at the end
        lambda f: f.seek(-7, io.SEEK_END),
        lambda f: f.read(-1),
        lambda f: f.seek(100),  # past the end, then reading gives nothing
        lambda f: f.read(3),
        lambda f: f.tell(),
        lambda f: f.seek(0),
        lambda f: f.read(None),
    ):
        assert step(ours) == step(theirs)
    with pytest.raises(ValueError, match="negative seek"):
        ours.seek(-1)


def test_a_line_longer_than_a_search_chunk_is_found_whole() -> None:
    long_line = b"x" * 10_000 + b"\n" + b"tail"
    reader = ViewReader(memoryview(long_line))
    assert reader.readline() == b"x" * 10_000 + b"\n"
    assert reader.readline() == b"tail"


def _index_with_big_columns(directory: Path, documents: int) -> int:
    """A one-segment index whose positions column is several MB; returns the segment's size."""
    directory.mkdir()
    ix = whoosh_index.create_in(str(directory), build_schema())
    writer = TunedSegmentWriter(ix, limitmb=8)
    rng = random.Random(3)
    vocabulary = [f"w{n}x" for n in range(5000)]
    for n in range(documents):
        text = " ".join(rng.choice(vocabulary) for _ in range(800))
        analyzed = analyze("en", text)
        writer.add_document(
            pid=str(n),
            url=f"gemini://a.example/{n}",
            text=analyzed,
            **text_columns(analyzed.positions),
        )
    writer.commit()
    return sum(p.stat().st_size for p in directory.glob("*.seg"))


def test_a_searcher_reads_column_files_without_copying_them(tmp_path: Path) -> None:
    # Whoosh's BufferFile copied every file of a mapped segment into the process (BytesIO):
    # at 100,000 pages, 1.2 GB of private memory in each capsule process.
    segment_bytes = _index_with_big_columns(tmp_path / "index", 800)
    assert segment_bytes > 3_000_000
    assert compound.BufferFile is MappedFile  # installed by importing indexer
    ix = whoosh_index.open_dir(str(tmp_path / "index"))
    tracemalloc.start()
    try:
        with ix.searcher() as searcher:
            leaf = searcher.reader()
            column = leaf.column_reader(POSITIONS_COLUMN, translate=False)
            blobs = [column[docnum] for docnum in range(0, leaf.doc_count_all(), 50)]
            assert all(blobs)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(column._dbfile, MappedFile)
    assert peak < segment_bytes / 5, f"{peak:,} bytes allocated for a {segment_bytes:,}-byte index"
