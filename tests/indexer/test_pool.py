"""The bounded posting pool: it never holds more than its bound, and spilling changes nothing."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from whoosh import index as whoosh_index
from whoosh.fields import ID, NUMERIC, TEXT, Schema
from whoosh.filedb.filestore import FileStorage

from indexer.pool import BoundedPool
from indexer.writer import TunedSegmentWriter
from tests.indexer.conftest import Store, every_posting
from tests.indexer.spaces import P

WORDS = [f"w{i}" for i in range(400)]
SCHEMA = Schema(pid=ID(stored=True, unique=True), body=TEXT(phrase=True), n=NUMERIC(stored=True))


def _documents(count: int) -> list[dict[str, Any]]:
    # Zipf-like word choice: a few terms with long posting lists, many with short ones.
    rng = random.Random(7)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return [
        {
            "pid": str(i),
            "body": " ".join(rng.choices(WORDS, weights, k=rng.randint(5, 60))),
            "n": i,
        }
        for i in range(count)
    ]


def _build(directory: Path, documents: list[dict[str, Any]], max_postings: int | None) -> Any:
    directory.mkdir()
    ix = whoosh_index.create_in(str(directory), SCHEMA)
    writer = TunedSegmentWriter(ix, limitmb=64)
    pool = writer.pool
    if max_postings is not None:
        pool.max_postings = max_postings
    for document in documents:
        writer.add_document(**document)
    writer.commit()
    return ix, pool


def test_a_pool_that_spills_many_times_writes_the_same_index(tmp_path: Path) -> None:
    documents = _documents(1500)
    whole, whole_pool = _build(tmp_path / "whole", documents, None)
    spilled, spilled_pool = _build(tmp_path / "spilled", documents, 2000)
    assert whole_pool.spills == 0
    assert spilled_pool.spills >= 10  # ~45,000 postings through a pool of 2,000
    assert spilled_pool.peak_postings <= 2000
    assert whole_pool.peak_postings > 20 * spilled_pool.peak_postings
    expected = every_posting(whole)
    assert sum(len(postings) for _, _, postings in expected) > 40_000
    assert every_posting(spilled) == expected
    with whole.searcher() as a, spilled.searcher() as b:
        for word in ("w0", "w3", "w150", "w399"):
            hits_a = [(hit["pid"], hit.score) for hit in a.find("body", word, limit=None)]
            hits_b = [(hit["pid"], hit.score) for hit in b.find("body", word, limit=None)]
            assert hits_a == hits_b
        phrase = '"w0 w1"'
        assert [h["pid"] for h in a.find("body", phrase, limit=None)] == [
            h["pid"] for h in b.find("body", phrase, limit=None)
        ]


def test_runs_whose_documents_go_back_are_merged_in_document_order(tmp_path: Path) -> None:
    # Whoosh's merges add older segments' postings after the new documents', so a term's
    # document numbers can go back from one run to the next.
    pool = BoundedPool(FileStorage(str(tmp_path)), None, limitmb=1)
    pool.max_postings = 3
    for docnum in (5, 6, 7, 1, 2, 9, 0):
        pool.add(("body", b"term", docnum, float(docnum), b"v%d" % docnum))
    pool.add(("body", b"other", 4, 1.0, b""))
    assert pool.spills == 2
    postings = list(pool.iter_postings())
    assert [(p[1], p[2]) for p in postings] == [
        (b"other", 4),
        *((b"term", docnum) for docnum in (0, 1, 2, 5, 6, 7, 9)),
    ]
    assert all(p[3] == float(p[2]) for p in postings if p[1] == b"term")
    assert not pool.runs
    assert not list(tmp_path.iterdir())  # the runs were removed once read


def test_one_field_larger_than_the_pool_spills_mid_field_and_loses_nothing(
    tmp_path: Path,
) -> None:
    pool = BoundedPool(FileStorage(str(tmp_path)), None, limitmb=1)
    pool.max_postings = 4
    items = [(b"t%02d" % n, n + 1, float(n), b"") for n in range(10)]
    length = pool.add_terms("body", 3, items, 2.0)
    assert length == sum(range(1, 11))
    assert pool.spills == 2  # ten postings through a pool of four
    assert pool.peak_postings == 4
    postings = list(pool.iter_postings())
    assert [(p[1], p[2], p[3]) for p in postings] == [(b"t%02d" % n, 3, 2.0 * n) for n in range(10)]


def test_a_field_given_as_columns_spills_mid_field_like_one_given_as_tuples(
    tmp_path: Path,
) -> None:
    pool = BoundedPool(FileStorage(str(tmp_path)), None, limitmb=1)
    pool.max_postings = 4
    terms = [f"t{n:02d}" for n in range(10)]
    assert pool.add_columns("body", 3, terms, list(range(1, 11)), 0.5) == sum(range(1, 11))
    assert pool.spills == 2
    assert pool.peak_postings == 4
    postings = [(p[1], p[2], p[3], p[4]) for p in pool.iter_postings()]
    assert postings == [(b"t%02d" % n, 3, 0.5 * (n + 1), b"") for n in range(10)]


def test_a_term_given_as_text_and_as_bytes_is_one_term(tmp_path: Path) -> None:
    # Columns give terms as text, tuples as bytes: both must number the same term, else it
    # would be written twice (and the second copy would be out of order in the segment).
    pool = BoundedPool(FileStorage(str(tmp_path)), None, limitmb=1)
    pool.add_columns("body", 1, ["café", "b"], [1, 2], 1.0)
    pool.add_terms("body", 2, [("café".encode(), 1, 1.0, b""), (b"a", 1, 1.0, b"")], 1.0)
    pool.add_columns("body", 3, ["café"], [3], 1.0)
    terms = [
        (tbytes, tuple(ids), tuple(weights)) for _, tbytes, ids, weights, _ in pool.iter_terms()
    ]
    assert terms == [
        (b"a", (2,), (1.0,)),
        (b"b", (1,), (2.0,)),
        ("café".encode(), (1, 2, 3), (1.0, 1.0, 3.0)),
    ]


def test_values_stay_with_their_postings_when_only_some_terms_have_them(
    tmp_path: Path,
) -> None:
    # A field's postings without values (columns), then with (tuples), then without again.
    pool = BoundedPool(FileStorage(str(tmp_path)), None, limitmb=1)
    pool.add_columns("body", 1, ["a", "b"], [1, 1], 1.0)
    pool.add_terms("body", 2, [(b"a", 1, 1.0, b"v2"), (b"c", 1, 1.0, b"v2c")], 1.0)
    pool.add_columns("body", 3, ["b"], [2], 1.0)
    terms = {(tbytes, tuple(ids), tuple(values)) for _, tbytes, ids, _, values in pool.iter_terms()}
    assert terms == {
        (b"a", (1, 2), (b"", b"v2")),
        (b"b", (1, 3), ()),  # none of b's postings has a value: as a format without values
        (b"c", (2,), (b"v2c",)),
    }


@pytest.mark.parametrize("procs", [1, 2])
def test_a_full_build_with_a_small_pool_finds_what_an_unbounded_one_finds(
    store: Store, procs: int
) -> None:
    # 1 MB holds ~13,000 postings: 300 pages of ~120 words spill a few times per writer.
    rng = random.Random(3)
    store.space.add(
        {
            f"gemini://p{i % 5}.example/{i}.gmi": P(
                f"# Page {i}\n" + " ".join(rng.choices(WORDS, k=120)) + "\n"
            )
            for i in range(300)
        }
    )
    store.index(rebuild=True, procs=procs, limitmb=4096)
    queries = ("w1", "w7 w8", '"w2 w3"', "w399 OR w398")
    with store.searcher() as searcher:
        expected = {
            q: [(h.url, round(h.score, 6)) for h in searcher.search(q).hits] for q in queries
        }
    store.index(rebuild=True, procs=procs, limitmb=1)
    with store.searcher() as searcher:
        for query in queries:
            assert [(h.url, round(h.score, 6)) for h in searcher.search(query).hits] == (
                expected[query]
            )


def test_a_field_for_an_earlier_document_is_still_pooled_in_document_order(
    tmp_path: Path,
) -> None:
    # Fields usually come in document order and skip the per-term order check; one that
    # does not (a merged segment's, an add after add_terms) must still come out in order.
    pool = BoundedPool(FileStorage(str(tmp_path)), None, limitmb=1)
    pool.add_terms("body", 5, [(b"a", 1, 1.0, b""), (b"b", 2, 2.0, b"")], 1.0)
    pool.add(("body", b"a", 7, 1.0, b""))
    pool.add_terms("body", 6, [(b"a", 1, 1.0, b"")], 1.0)
    pool.add_terms("body", 2, [(b"a", 1, 1.0, b""), (b"c", 1, 1.0, b"")], 1.0)
    postings = [(p[1], p[2]) for p in pool.iter_postings()]
    assert postings == [(b"a", 2), (b"a", 5), (b"a", 6), (b"a", 7), (b"b", 5), (b"c", 2)]
