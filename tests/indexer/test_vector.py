"""The numpy evaluator gives exactly what Whoosh's matchers give, on the same index."""

from __future__ import annotations

import numpy
import pytest
from whoosh import query as wq

from indexer.query import WEIGHTING, Searcher
from indexer.querylang import compile_query, parse
from indexer.vector import (
    DENSE_SHARE,
    DocSet,
    Unsupported,
    VectorIndex,
    _members,
    _positions_in,
    _union,
    top,
)

# Queries without negation: Whoosh's own AndNot over a Require gives wrong answers (it kept
# gemini://gemini.example/docs/ for "capsule -gemini" although its URL words hold "gemini"),
# so exclusions are checked by the partition property below instead.
QUERIES = [
    "gemini",
    "gemini client",
    "recipes OR recettes OR rezepte",
    "site:gemini.example specification",
    "lang:de brot OR backen",
    "type:image OR radar",
    "here",  # a German stem (her) restricted to German pages
    "size:>1K gemini",
    "domain:example capsule",
    "(tortilla OR paella) lang:es",
    "intitle:review",
    "inurl:gemlog",
]


@pytest.mark.parametrize("text", QUERIES)
def test_same_documents_and_scores_as_whoosh(known: Searcher, text: str) -> None:
    compiled = compile_query(parse(text))
    with known._use_snapshot() as snapshot:
        expected = dict(
            snapshot.searcher.search(compiled.query, limit=None, optimize=False).items()
        )
        got = snapshot.vector.evaluate(compiled.query)
    assert expected, text
    assert dict(zip(got.ids.tolist(), got.scores.tolist(), strict=True)) == pytest.approx(
        expected, rel=1e-9
    )


@pytest.mark.parametrize(
    ("query", "word"),
    [("capsule", "gemini"), ("recipes", "tomatoes"), ("domain:example review", "terminal")],
)
def test_exclusion_partitions_the_matches(known: Searcher, query: str, word: str) -> None:
    def matching(text: str) -> set[int]:
        with known._use_snapshot() as snapshot:
            return set(snapshot.vector.evaluate(compile_query(parse(text)).query).ids.tolist())

    everything = matching(query)
    with_word = matching(f"{query} {word}")
    without = matching(f"{query} -{word}")
    assert with_word
    assert without
    assert with_word | without == everything
    assert not with_word & without


def test_nested_phrases_are_checked_where_they_matter(known: Searcher) -> None:
    def matching(text: str) -> set[int]:
        with known._use_snapshot() as snapshot:
            return set(snapshot.vector.evaluate(compile_query(parse(text)).query).ids.tolist())

    phrase = matching('"sourdough starter" OR nothingatall')
    assert len(phrase) == 2
    assert matching('bread -"sourdough starter"') == matching("bread") - phrase
    assert matching('"starter sourdough" OR nothingatall') == set()


def test_top_orders_by_score_then_document_number(known: Searcher) -> None:
    with known._use_snapshot() as snapshot:
        matches = snapshot.vector.evaluate(compile_query(parse("gemini")).query)
    best = top(matches, 5)
    assert len(best) == 5
    scores = [score for _, score in best]
    assert scores == sorted(scores, reverse=True)
    assert top(matches, 10_000) == sorted(
        zip(matches.ids.tolist(), matches.scores.tolist(), strict=True),
        key=lambda pair: (-pair[1], pair[0]),
    )


def test_block_directories_are_dropped_with_their_postings(known: Searcher) -> None:
    """A long-running capsule sees endless distinct words: nothing kept per word may outlive
    the word's place in the bounded posting cache."""

    def matching(index: VectorIndex, text: str) -> list[int]:
        return index.evaluate(compile_query(parse(text)).query).ids.tolist()

    with known._use_snapshot() as snapshot:
        small = VectorIndex(snapshot.searcher, WEIGHTING, cache_entries=20)
        for text in QUERIES:
            matching(small, text)
        assert small._directories
        assert set(small._directories) <= set(small._cache)
        assert small._cached_entries == sum(len(found) for found in small._cache.values())
        for text in ('"sourdough starter"', '"gemini protocol"'):  # their directories evicted
            assert matching(small, text) == matching(snapshot.vector, text)
        # With room in the cache, the phrase checks find the directories their loads made.
        roomy = VectorIndex(snapshot.searcher, WEIGHTING)
        query = compile_query(parse('"sourdough starter"')).query
        matching(roomy, '"sourdough starter"')
        schema = snapshot.searcher.schema
        words = {
            roomy._term_key(field, schema[field].to_bytes(text))
            for field, text in query.all_terms()
            if field == "text"
        }
        assert words
        assert words <= set(roomy._directories)


def test_postings_made_by_two_threads_are_kept_and_counted_once(known: Searcher) -> None:
    with known._use_snapshot() as snapshot:
        index = VectorIndex(snapshot.searcher, WEIGHTING)
    key = ("text", b"word", True)
    first = DocSet(numpy.arange(3), numpy.ones(3))

    def made_while_another_thread_made_it() -> DocSet:
        index._cached(key, lambda: first)
        return DocSet(numpy.arange(3), numpy.ones(3))

    assert index._cached(key, made_while_another_thread_made_it) is first
    assert index._cached_entries == 3


def test_unknown_query_types_are_refused_not_evaluated_some_other_way(known: Searcher) -> None:
    """No fallback to Whoosh's matchers: a node the query compiler never produces is a
    programming error, named in the exception, even nested where a fallback could hide it."""
    with known._use_snapshot() as snapshot:
        with pytest.raises(Unsupported, match="FuzzyTerm"):
            snapshot.vector.evaluate(wq.FuzzyTerm("text", "gemini"))
        with pytest.raises(Unsupported, match="FuzzyTerm"):
            snapshot.vector.evaluate(
                wq.And([wq.Term("text", "gemini"), wq.FuzzyTerm("text", "capsule")])
            )


@pytest.mark.parametrize("documents", [10, 1000, 100_000])
def test_dense_and_sorted_unions_agree(documents: int) -> None:
    """Whatever the path a union takes, it gives the same documents and summed scores."""
    rng = numpy.random.default_rng(documents)
    parts = []
    for size in (documents // 10, 3, documents // 2):
        ids = numpy.sort(rng.choice(documents, size=max(1, size), replace=False))
        parts.append(DocSet(ids.astype(numpy.int64), rng.random(len(ids))))
    dense = _union(parts, documents)
    sorted_ = _union(parts, documents * DENSE_SHARE * 10)  # looks too small for dense
    assert dense.ids.tolist() == sorted_.ids.tolist()
    assert dense.scores.tolist() == pytest.approx(sorted_.scores.tolist(), rel=1e-12)
    expected: dict[int, float] = {}
    for part in parts:
        for docnum, score in zip(part.ids.tolist(), part.scores.tolist(), strict=True):
            expected[docnum] = expected.get(docnum, 0.0) + score
    assert dict(zip(dense.ids.tolist(), dense.scores.tolist(), strict=True)) == pytest.approx(
        expected
    )


@pytest.mark.parametrize(("ids_size", "within_size"), [(5, 4000), (4000, 5), (3000, 6000), (0, 50)])
def test_membership_paths_agree(ids_size: int, within_size: int) -> None:
    """Binary searches, the dense table and the lookup from the smaller side all find the
    same positions and members as a plain set would."""
    documents = 10_000
    rng = numpy.random.default_rng(ids_size * 7 + within_size)
    ids = numpy.sort(rng.choice(documents, size=ids_size, replace=False)).astype(numpy.int64)
    within = numpy.sort(rng.choice(documents, size=within_size, replace=False)).astype(numpy.int64)
    where = {docnum: at for at, docnum in enumerate(within.tolist())}
    expected = [where.get(docnum, -1) for docnum in ids.tolist()]
    # As given (large sides take the table), and with "documents" so large that every
    # lookup takes the binary searches.
    for total in (documents, documents * DENSE_SHARE * 10):
        assert _positions_in(ids, within, total).tolist() == expected
        members = _members(ids, within, total)
        assert members.dtype == bool
        assert members.tolist() == [at >= 0 for at in expected]
