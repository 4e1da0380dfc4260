"""Relevance: the known-answer queries, and the blend against plain BM25 on the same index."""

from __future__ import annotations

import pytest

from indexer.query import Searcher
from tests.indexer.fixture_space import CLIENTS, GEMINI, KNOWN_ANSWERS, MIRROR, SPAM, Known


def position(searcher: Searcher, known: Known, ranking: str = "blended") -> int | None:
    urls = [hit.url for hit in searcher.search(known.query, page_size=10, ranking=ranking).hits]
    return urls.index(known.expected) + 1 if known.expected in urls else None


def test_there_are_enough_known_answers() -> None:
    assert len(KNOWN_ANSWERS) >= 30
    assert len({known.query for known in KNOWN_ANSWERS}) == len(KNOWN_ANSWERS)


@pytest.mark.parametrize("known_answer", KNOWN_ANSWERS, ids=lambda k: k.query)
def test_expected_page_comes_first(known: Searcher, known_answer: Known) -> None:
    found = position(known, known_answer)
    top = [hit.url for hit in known.search(known_answer.query).hits[:5]]
    assert found is not None, (known_answer.query, top)
    assert found <= known_answer.within, (known_answer.query, top)


def test_the_blend_beats_plain_bm25(known: Searcher) -> None:
    """Success@k and mean reciprocal rank over all known answers, same index, same queries."""

    def figures(ranking: str) -> tuple[int, float]:
        successes, reciprocal = 0, 0.0
        for known_answer in KNOWN_ANSWERS:
            found = position(known, known_answer, ranking)
            successes += found is not None and found <= known_answer.within
            reciprocal += 1 / found if found else 0.0
        return successes, reciprocal / len(KNOWN_ANSWERS)

    blended, bm25f, bm25 = figures("blended"), figures("bm25f"), figures("bm25")
    assert blended[0] > bm25[0], (blended, bm25)
    assert blended[1] > bm25[1], (blended, bm25)
    # The link prior itself must pay its way on top of the BM25F fields and anchor text.
    assert blended[0] > bm25f[0], (blended, bm25f)
    assert blended[1] > bm25f[1], (blended, bm25f)


def test_link_farm_does_not_win_the_words_it_stuffs(known: Searcher) -> None:
    for query in ("gemini", "gemini client", "gemini specification"):
        assert known.search(query).hits[0].url != f"{SPAM}/best.gmi", query
    spam = next(hit for hit in known.search("gemini client").hits if "spam" in hit.url)
    reviews = next(hit for hit in known.search("gemini client").hits if hit.url == f"{CLIENTS}/")
    assert spam.rank < reviews.rank


def test_mirrors_fold_into_one_result(known: Searcher) -> None:
    results = known.search('"lightweight application-level protocol"')
    urls = [hit.url for hit in results.hits]
    assert urls == [f"{GEMINI}/docs/specification.gmi"], urls  # the better-linked copy
    assert f"{MIRROR}/gemini/specification.gmi" not in urls
    assert results.total == 1
