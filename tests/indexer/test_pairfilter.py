"""Pair filters: never rule out a document that holds a phrase, rule out most that do not."""

from __future__ import annotations

import io
import random
import zlib

import numpy
import pytest

from indexer import pairfilter
from indexer.analysis import term_maker
from indexer.schema import PAIRS_COLUMN, text_columns
from tests.indexer.conftest import Store
from tests.indexer.spaces import P


def _filters(texts: list[str]) -> numpy.ndarray:
    maker = term_maker(None)
    rows = [text_columns(maker.positions(text)[0])[PAIRS_COLUMN] for text in texts]
    return numpy.frombuffer(b"".join(rows), dtype=numpy.uint8).reshape(len(texts), -1)


@pytest.mark.parametrize(("words", "most"), [(300, 0.005), (1000, 0.05)])
def test_few_documents_without_the_pair_get_through(words: int, most: float) -> None:
    """The module's figures: about 0.1% of 300-word and 3% of 1,000-word pages pass wrongly."""
    rng = random.Random(words)
    vocabulary = [f"w{n}" for n in range(5000)]
    texts = [" ".join(rng.choices(vocabulary, k=words)) for _ in range(200)]
    filters = _filters(texts)
    passed = tried = 0
    for row, text in enumerate(texts):
        present = set(zip(text.split(), text.split()[1:], strict=False))
        for _ in range(50):
            pair = (rng.choice(vocabulary), rng.choice(vocabulary))
            if pair in present:
                continue
            tried += 1
            passed += bool(pairfilter.filters_hold(filters, numpy.array([row]), pair)[0])
    assert passed / tried <= most


def test_a_document_without_neighbours_holds_no_phrase() -> None:
    filters = _filters(["", "alone"])
    assert not pairfilter.filters_hold(filters, numpy.array([0, 1]), ["alone", "alone"]).any()
    assert pairfilter.filters_hold(filters, numpy.array([0, 1]), ["alone"]).all()


def test_the_index_filters_rule_out_pages_with_the_words_apart(store: Store) -> None:
    store.space.add(
        {
            "gemini://p.example/next.gmi": P("# One\nAlpha beta here."),
            "gemini://p.example/apart.gmi": P("# Two\nAlpha and then beta."),
            "gemini://p.example/reversed.gmi": P("# Three\nBeta alpha."),
        }
    )
    store.index()
    with store.searcher() as searcher, searcher._use_snapshot() as snapshot:
        everything = snapshot.vector.live()
        kept = everything[snapshot.vector.may_hold(["alpha", "beta"], everything)]
        urls = {snapshot.searcher.stored_fields(int(docnum))["url"] for docnum in kept}
    assert urls == {"gemini://p.example/next.gmi"}


@pytest.mark.parametrize("mapped", [True, False])
def test_a_segment_column_is_read_mapped_or_not(mapped: bool) -> None:
    """Whoosh maps segment files where it can; where it cannot, only the candidates'
    filters are read. Both give the same answers, and documents past the stored ones
    (the column's default) are never ruled out."""
    from whoosh.columns import FixedBytesColumn
    from whoosh.filedb.structfile import BufferFile, StructFile

    texts = ["alpha beta gamma", "beta alpha", "gamma alpha beta"]
    column = FixedBytesColumn(pairfilter.FILTER_BYTES, default=pairfilter.UNKNOWN)
    sink = io.BytesIO()
    writer = column.writer(StructFile(sink))
    for docnum, row in enumerate(_filters(texts)):
        writer.add(docnum, row.tobytes())
    data = sink.getvalue()
    dbfile = BufferFile(memoryview(data)) if mapped else StructFile(io.BytesIO(data))
    reader = column.reader(dbfile, 0, len(data), len(texts) + 1)
    rows = numpy.arange(len(texts) + 1)
    assert pairfilter.may_hold(reader, rows, ["alpha", "beta"]).tolist() == [
        True,
        False,
        True,
        True,
    ]


def test_term_hashes_are_the_crc32_of_each_terms_utf8() -> None:
    # Filters written by earlier builds are read with these hashes: they must not change.
    terms = ["fox", "naïve", "東京", "x", "東"]
    assert pairfilter.term_hashes(terms).tolist() == [zlib.crc32(t.encode()) for t in terms]
    assert pairfilter.term_hashes([]).tolist() == []
    assert pairfilter.term_hashes(["cat"]).tolist() == [0x9E5E43A8]
