"""A page's date (after:, before:, sort:newest): where it comes from, and how it filters."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from indexer.dates import day_number, page_date, parse_period
from indexer.query import Searcher
from sextant.errors import QueryError
from tests.indexer.conftest import indexed
from tests.indexer.fixture_space import ALICE
from tests.indexer.spaces import P

SEEN = datetime(2026, 1, 10, 12, 0)


def test_a_link_label_date_beats_the_heading_the_path_and_the_first_sighting() -> None:
    labels = ["My posts", "2023-02-01 Moving house"]
    path = "/2021/07/moving.gmi"
    assert page_date(labels, "2022-03-04 notes", path, SEEN, None) == date(2023, 2, 1)
    assert page_date(["Moving"], "Notes of 2022-03-04", path, SEEN, None) == date(2022, 3, 4)
    assert page_date([], None, path, SEEN, None) == date(2021, 7, 1)
    assert page_date([], None, "/log/2020-05-14-title.gmi", SEEN, None) == date(2020, 5, 14)
    assert page_date([], None, "/2019/11/30/post.gmi", SEEN, None) == date(2019, 11, 30)
    assert page_date([], None, "/about.gmi", SEEN, None) == date(2026, 1, 10)
    assert page_date([], None, "/about.gmi", None, SEEN) == date(2026, 1, 10)
    assert page_date([], None, "/about.gmi", None, None) is None


@pytest.mark.parametrize(
    "path",
    [
        "/9999-99-99.gmi",  # no such date
        "/2024-02-30-post.gmi",  # no such day
        "/1234-05-06.gmi",  # before anyone wrote for a screen: a number, not a date
        "/2031-01-01-future.gmi",  # after the crawler saw it
        "/isbn/97803-12-34-x.gmi",  # digits run on: not a date
        "/0000/00/post.gmi",
    ],
)
def test_numbers_that_are_not_plausible_dates_are_ignored(path: str) -> None:
    assert page_date(["9999-01-01 label"], "0000-00-00", path, SEEN, None) == SEEN.date()


@pytest.mark.parametrize(
    ("value", "first", "last"),
    [
        ("2024", date(2024, 1, 1), date(2024, 12, 31)),
        ("2024-02", date(2024, 2, 1), date(2024, 2, 29)),
        ("2023-12-31", date(2023, 12, 31), date(2023, 12, 31)),
    ],
)
def test_periods_cover_their_whole_year_month_or_day(value: str, first: date, last: date) -> None:
    assert parse_period("after", value) == (day_number(first), day_number(last))


@pytest.mark.parametrize("value", ["2024-13", "yesterday", "20240", "2024-02-30", "-1", "9" * 40])
def test_bad_periods_are_refused_with_an_example(value: str) -> None:
    with pytest.raises(QueryError, match="after:2024-06"):
        parse_period("after", value)


def test_after_before_and_sort_newest_on_the_gemlog(known: Searcher) -> None:
    def urls(query: str) -> list[str]:
        return [hit.url for hit in known.search(query).hits]

    posts = f"{ALICE}/gemlog/"
    # The index page has no date of its own: it counts from when the crawler found it.
    assert set(urls(f"site:{posts} after:2024-04")) == {
        posts,
        f"{posts}2024-05-02-tomatoes.gmi",
        f"{posts}2024-04-11-sourdough.gmi",
    }
    assert set(urls("site:alice.example before:2024-04")) == {
        f"{posts}2024-04-11-sourdough.gmi",
        f"{posts}2024-03-20-cycling.gmi",
    }
    assert urls("site:alice.example before:2024-03-31") == [f"{posts}2024-03-20-cycling.gmi"]
    assert urls("sourdough before:2024-04-10") == []
    newest = [url for url in urls("site:alice.example/gemlog/ sort:newest") if url != posts]
    assert newest == [
        f"{posts}2024-05-02-tomatoes.gmi",
        f"{posts}2024-04-11-sourdough.gmi",
        f"{posts}2024-03-20-cycling.gmi",
    ]
    # With words too: every match, newest first, whatever the text score says.
    dated = [hit.date for hit in known.search("bread OR tomatoes OR bicycle sort:newest").hits]
    known_dates = [day for day in dated if day is not None]
    assert known_dates == sorted(known_dates, reverse=True)
    hit = known.search("tomatoes").hits[0]
    assert hit.date == date(2024, 5, 2)


def test_sort_takes_only_known_orders(known: Searcher) -> None:
    with pytest.raises(QueryError, match="sort:newest"):
        known.search("gemini sort:oldest")
    with pytest.raises(QueryError, match="empty"):
        known.search("sort:newest")
    assert known.search("gemini sort:relevance").hits == known.search("gemini").hits


def test_a_gemlog_label_dates_a_page_whose_url_says_nothing(tmp_path: Path) -> None:
    pages = {
        "gemini://log.example/": P("# Log\n=> moving.gmi 2022-08-15 Moving house\n"),
        "gemini://log.example/moving.gmi": P("# Moving house\nBoxes everywhere."),
        "gemini://log.example/older.gmi": P("# 2019-03-02 Boxes\nMore boxes."),
    }
    with indexed(tmp_path, pages) as searcher:
        hits = searcher.search("boxes sort:newest").hits
        assert [(hit.url, hit.date) for hit in hits] == [
            ("gemini://log.example/moving.gmi", date(2022, 8, 15)),
            ("gemini://log.example/older.gmi", date(2019, 3, 2)),
        ]
        assert [hit.url for hit in searcher.search("boxes after:2020").hits] == [
            "gemini://log.example/moving.gmi"
        ]
