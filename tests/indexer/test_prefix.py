"""Prefix search (``sol*``): what it finds, what it refuses, and the bounds on its expansion."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.budget import Budget, BudgetExhausted
from indexer.query import Searcher
from indexer.querylang import Text, parse
from indexer.wildcard import MAX_EXPANSIONS, expand
from sextant.errors import QueryError
from tests.indexer.conftest import indexed
from tests.indexer.fixture_space import ALICE, DE
from tests.indexer.spaces import P


def test_a_trailing_star_is_a_prefix_and_not_a_word_to_correct() -> None:
    parsed = parse("Sol* energy")
    assert parsed.root.children[0] == Text("sol", prefix=True)  # type: ignore[union-attr]
    assert [span.text for span in parsed.words] == ["energy"]
    assert parse("type:text/*").root.name == "type"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("query", "message"),
    [("so*", "at least 3 letters"), ("e-mai*", "one word"), ("sol**", "one word")],
)
def test_short_or_compound_prefixes_are_refused(query: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        parse(query)


def test_prefix_finds_the_words_it_starts(known: Searcher) -> None:
    results = known.search("tomat*")
    assert results.hits[0].url == f"{ALICE}/gemlog/2024-05-02-tomatoes.gmi"
    assert "**tomato" in results.hits[0].snippet.lower()  # the expansions are marked
    assert known.search("brez*").hits[0].url == f"{DE}/brezel.gmi"  # Brezeln, Laugenbrezeln
    assert known.search("tomat* OR crep*").total > known.search("tomat*").total


def test_a_prefix_is_never_rewritten_by_a_suggestion(known: Searcher) -> None:
    results = known.search("tomaq*")
    assert results.total == 0
    assert results.suggestion is None


def test_expansion_keeps_the_most_common_words_only(tmp_path: Path) -> None:
    """Hostile: a prefix standing for a hundred words searches the 64 most pages hold."""
    pages = {
        f"gemini://many.example/{n}.gmi": P(
            f"# Page {n}\n\nzeta{n:03d}x " + ("zeta000x " * (n < 3))
        )
        for n in range(100)
    }
    with indexed(tmp_path, pages) as searcher:
        snapshot_terms = expand(searcher_reader(searcher), "text", "zeta", Budget.unlimited())
        assert len(snapshot_terms) == MAX_EXPANSIONS
        assert snapshot_terms[0] == "zeta000x"  # held by three pages: the most common first
        results = searcher.search("zeta*", page_size=100)
        assert results.total == MAX_EXPANSIONS
        ticks = iter(range(1000))  # a clock one second later at every reading
        budget = Budget(1.5, clock=lambda: float(next(ticks)))
        budget.start()
        with pytest.raises(BudgetExhausted):  # the scan checks the budget as it goes
            expand(searcher_reader(searcher), "text", "zeta", budget)


def searcher_reader(searcher: Searcher) -> object:
    with searcher._use_snapshot() as snapshot:
        return snapshot.searcher.reader()
