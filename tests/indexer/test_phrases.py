"""Phrase queries by each of their three paths, and the Whoosh pieces they rely on."""

from __future__ import annotations

import hypothesis
import numpy
import pytest
from hypothesis import strategies as st
from whoosh import index as whoosh_index
from whoosh import query as wq
from whoosh import scoring
from whoosh.matching import ListMatcher
from whoosh.matching.wrappers import RequireMatcher

from indexer import pairfilter
from indexer import query as query_module
from indexer.require import _FixedRequireMatcher
from indexer.weighting import BM25F
from tests.indexer.conftest import Store
from tests.indexer.spaces import P

PAGES = 120


@pytest.fixture
def phrase_store(store: Store) -> Store:
    """Pages holding "alpha beta" (every third), the words apart, or in the other order."""
    bodies = ["Alpha beta here.", "Beta then alpha.", "Alpha and then beta."]
    store.space.add(
        {
            f"gemini://p{i % 5}.example/{i}.gmi": P(f"# Page {i}\n{bodies[i % 3]}")
            for i in range(PAGES)
        }
    )
    store.index()
    return store


def holders() -> set[str]:
    return {f"gemini://p{i % 5}.example/{i}.gmi" for i in range(0, PAGES, 3)}


def test_few_candidates_are_all_checked_and_counted_exactly(phrase_store: Store) -> None:
    with phrase_store.searcher() as searcher:
        results = searcher.search('"alpha beta"', page_size=100)
        assert {hit.url for hit in results.hits} == holders()
        assert results.total == PAGES // 3
        assert results.exact


def test_many_candidates_check_the_best_and_estimate_the_count(
    phrase_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Of the 120 pages with both words, the pair filters leave the 40 holders (and perhaps a
    # stray one): checking 20 of them estimates the count.
    monkeypatch.setattr(query_module, "PHRASE_CANDIDATES", 20)
    monkeypatch.setattr(query_module, "PHRASE_SAMPLE_SHARE", 2.0)  # never sample
    with phrase_store.searcher() as searcher:
        results = searcher.search('"alpha beta"', page_size=100)
        assert results.hits
        assert {hit.url for hit in results.hits} <= holders()
        assert not results.exact
        assert 20 <= results.total <= 60


def test_very_common_words_are_checked_on_a_sample(
    phrase_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(query_module, "PHRASE_SAMPLE_SHARE", 0.1)
    monkeypatch.setattr(query_module, "PHRASE_SAMPLE", 45)
    with phrase_store.searcher() as searcher:
        results = searcher.search('"alpha beta"', page_size=100)
        assert {hit.url for hit in results.hits} <= holders()
        assert len(results.hits) == 15  # every third of the first 45 candidates
        assert not results.exact
        assert 25 <= results.total <= 60
        assert all(hit.score > 0 for hit in results.hits)


def test_enough_hits_for_the_page_end_the_checking(
    phrase_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(query_module, "PHRASE_BATCH", 10)
    with phrase_store.searcher() as searcher:
        results = searcher.search('"alpha beta"', page_size=5)
        assert len(results.hits) == 5
        assert {hit.url for hit in results.hits} <= holders()
        # 30 checked (page and margin) of the 40 the filters left: the count is estimated
        assert not results.exact
        assert 20 <= results.total <= 60


def test_nested_phrases_are_checked_too(phrase_store: Store) -> None:
    with phrase_store.searcher() as searcher:
        results = searcher.search('"alpha beta" OR nothingatall', page_size=100)
        assert {hit.url for hit in results.hits} == holders()
        excluded = searcher.search('alpha -"alpha beta"', page_size=100)
        assert not {hit.url for hit in excluded.hits} & holders()
        assert excluded.total == PAGES - PAGES // 3


def test_in_memory_lengths_score_exactly_like_whoosh(phrase_store: Store) -> None:
    index = whoosh_index.open_dir(str(phrase_store.index_dir.resolve()))
    ours = BM25F(B=0.75, K1=1.2)
    theirs = scoring.BM25F(B=0.75, K1=1.2)
    for term in ("alpha", "beta", "then"):
        with index.searcher(weighting=ours) as fast, index.searcher(weighting=theirs) as slow:
            expected = dict(slow.search(wq.Term("text", term), limit=None).items())
            got = dict(fast.search(wq.Term("text", term), limit=None).items())
        assert got.keys() == expected.keys()
        for docnum, score in expected.items():
            assert got[docnum] == pytest.approx(score, rel=1e-12)


class _Scored(ListMatcher):
    def supports_block_quality(self) -> bool:
        return True

    def block_quality(self) -> float:
        return 1.0


def test_require_survives_a_quality_skip_that_stays_put() -> None:
    # Both matchers on document 1; a skip that finds the current block good enough does not
    # move, which made Whoosh's RequireMatcher assert the two were misaligned.
    with pytest.raises(AssertionError):
        RequireMatcher(_Scored([1, 5]), ListMatcher([1, 5])).skip_to_quality(0.5)
    fixed = _FixedRequireMatcher(_Scored([1, 5]), ListMatcher([1, 5]))
    fixed.skip_to_quality(0.5)
    assert fixed.id() == 1
    fixed.next()
    assert fixed.id() == 5


def test_document_positions_round_trip_including_cjk_pairs() -> None:
    from indexer.analysis import term_maker
    from indexer.schema import POSITIONS_COLUMN, DocumentPositions, text_columns

    found, _ = term_maker("en").positions("The cat saw the other cat. 東京都 the end")
    decoded = DocumentPositions(text_columns(found)[POSITIONS_COLUMN])
    for term, positions in found.items():
        assert decoded.of(term).tolist() == positions, term
    assert decoded.of("absent").tolist() == []
    assert DocumentPositions(b"").of("cat").tolist() == []


def test_positions_of_many_terms_and_of_older_indexes_decode() -> None:
    # Positions are 16-bit numbers when a page has fewer than 32,768 distinct terms, 32-bit
    # beyond; indexes written before the 16-bit form (header flags 0 or 1) still read.
    import struct
    import zlib

    from indexer.schema import POSITIONS_COLUMN, DocumentPositions, text_columns

    narrow = {"cat": [0, 2], "東": [1], "東京": [1]}
    wide = {f"t{n}": [n] for n in range(40_000)}
    wide["cat"] = [40_000, 40_002]
    for found in (narrow, wide):
        blob = text_columns(found)[POSITIONS_COLUMN]
        decoded = DocumentPositions(blob)
        assert decoded.of("cat").tolist() == found["cat"]
        assert decoded.holds(["t39999", "cat"] if found is wide else ["東京", "cat"])
    assert len(text_columns(narrow)[POSITIONS_COLUMN]) < 60
    terms = b"cat\x00dog"
    older = struct.pack("<IIB", 2, 3, 0) + struct.pack("<I", len(terms)) + terms
    older += struct.pack("<3i", 0, 1, 0)
    decoded = DocumentPositions(zlib.compress(older))
    assert decoded.of("cat").tolist() == [0, 2]
    assert decoded.holds(["cat", "dog", "cat"])


_PHRASE_WORDS = ["the", "cat", "sat", "on", "mat", "東京", "都", "a"]


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(
    text=st.lists(st.sampled_from([*_PHRASE_WORDS, ".", "東京都"]), max_size=60).map(" ".join),
    sequence=st.lists(
        st.sampled_from(["the", "cat", "sat", "mat", "东", "東京", "都", "x"]),
        min_size=1,
        max_size=3,
    ),
)
def test_holds_finds_exactly_the_consecutive_occurrences(text: str, sequence: list[str]) -> None:
    """And the pair filter never rules out a document that holds the sequence."""
    from indexer.analysis import term_maker
    from indexer.schema import PAIRS_COLUMN, POSITIONS_COLUMN, DocumentPositions, text_columns

    found, _ = term_maker(None).positions(text)
    columns = text_columns(found)
    decoded = DocumentPositions(columns[POSITIONS_COLUMN])
    at = {term: set(positions) for term, positions in found.items()}
    starts = at.get(sequence[0], set())
    for shift, term in enumerate(sequence[1:], 1):
        starts = {start for start in starts if start + shift in at.get(term, set())}
    assert decoded.holds(sequence) == bool(starts)
    if starts:
        filters = numpy.frombuffer(columns[PAIRS_COLUMN], dtype=numpy.uint8).reshape(1, -1)
        assert pairfilter.filters_hold(filters, numpy.array([0]), sequence).all()
