"""The read API on the fixture space: filters, languages, snippets, suggestions, paging."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from indexer.query import MARK_END, MARK_START, SNIPPET_SOURCE_CHARS, Searcher
from sextant.errors import QueryError
from tests.indexer.conftest import Store, indexed
from tests.indexer.fixture_space import (
    ALICE,
    DE,
    ERIN,
    ES,
    FR,
    GEMINI,
    JA,
    NEWS,
    PAGES,
    TILDE,
    WEATHER,
)
from tests.indexer.spaces import P


def urls(searcher: Searcher, query: str, **options: int) -> list[str]:
    return [hit.url for hit in searcher.search(query, **options).hits]


def indexed_urls(prefix: str) -> set[str]:
    return {url for url, page in PAGES.items() if url.startswith(prefix) and page.state != "new"}


def test_site_lists_a_capsule_and_a_pubnix_user(known: Searcher) -> None:
    results = known.search("site:gemini.example", page_size=100)
    assert {hit.url for hit in results.hits} == indexed_urls(f"{GEMINI}/")
    assert results.total == len(indexed_urls(f"{GEMINI}/"))
    # Filter-only queries are ordered by link score: the home page first.
    assert results.hits[0].url == f"{GEMINI}/"
    ranks = [hit.rank for hit in results.hits]
    assert ranks == sorted(ranks, reverse=True)
    carol = {hit.url for hit in known.search("site:tilde.example/~carol/").hits}
    assert carol == indexed_urls(f"{TILDE}/~carol/")


def test_domain_includes_subdomains_and_site_does_not(known: Searcher) -> None:
    assert urls(known, "site:example") == []
    every = sum(page.state != "new" for page in PAGES.values())
    assert known.search("domain:example").total == every - 1  # the mirror folds away
    assert known.search("domain:clients.example").total == 4


def test_lang_filter_uses_declared_and_detected_languages(known: Searcher) -> None:
    german = set(urls(known, "lang:de", page_size=50))
    assert german == indexed_urls(f"{DE}/")  # brezel.gmi declares nothing: detected
    assert set(urls(known, "lang:fr", page_size=50)) == indexed_urls(f"{FR}/")
    assert set(urls(known, "lang:es", page_size=50)) == indexed_urls(f"{ES}/")
    assert set(urls(known, "lang:ja")) == indexed_urls(f"{JA}/")


def test_type_filters(known: Searcher) -> None:
    assert urls(known, "type:image") == [f"{WEATHER}/radar.png"]
    assert urls(known, "type:image/png") == [f"{WEATHER}/radar.png"]
    assert urls(known, "mime:image/png") == [f"{WEATHER}/radar.png"]
    assert urls(known, "type:text/plain") == [f"{WEATHER}/report.txt"]
    assert urls(known, "content_type:input") == [f"{WEATHER}/forecast"]
    assert set(urls(known, "type:feed")) == {f"{ALICE}/gemlog/", f"{NEWS}/"}
    assert urls(known, "type:application") == []
    gemtext = known.search("type:gemini", page_size=100)
    assert all(hit.mime == "text/gemini" for hit in gemtext.hits)


def test_charset_and_size_filters(known: Searcher) -> None:
    assert urls(known, "charset:latin1") == [f"{WEATHER}/report.txt"]
    assert urls(known, "charset:ISO-8859-1 climate") == [f"{WEATHER}/report.txt"]
    big = known.search("size:>10K", page_size=100)
    assert [hit.url for hit in big.hits] == [f"{WEATHER}/radar.png"]
    assert big.hits[0].size == 48_000
    small = known.search("size:<100 type:gemini", page_size=100)
    assert small.hits
    assert all(hit.size is not None and hit.size < 100 for hit in small.hits)
    assert urls(known, "size:40K..50K") == [f"{WEATHER}/radar.png"]


def test_intitle_and_inurl(known: Searcher) -> None:
    assert set(urls(known, "intitle:review")) == {
        f"gemini://clients.example/{name}"
        for name in ("", "lagrange.gmi", "amfora.gmi", "bombadillo.gmi")
    }
    assert set(urls(known, "inurl:gemlog tomatoes")) == {
        f"{ALICE}/gemlog/2024-05-02-tomatoes.gmi",
        f"{ALICE}/gemlog/",
    }
    assert urls(known, 'title:"sourdough starter"') == [f"{ALICE}/gemlog/2024-04-11-sourdough.gmi"]


def test_boolean_operators(known: Searcher) -> None:
    both = set(urls(known, "ratatouille OR gazpacho"))
    assert {f"{FR}/ratatouille.gmi", f"{ES}/gazpacho.gmi"} <= both
    assert f"{FR}/ratatouille.gmi" not in urls(known, "ratatouille -aubergines")
    assert urls(known, "(tortilla OR paella) lang:es intitle:valenciana") == [f"{ES}/paella.gmi"]
    assert f"{ES}/tortilla.gmi" not in urls(known, "lang:es NOT tortilla", page_size=50)


def test_multilingual_stemming_and_accents(known: Searcher) -> None:
    assert urls(known, "Häuser") == urls(known, "hauser")
    assert urls(known, "Brezeln")[0] == f"{DE}/brezel.gmi"  # plural, German stem
    assert urls(known, "legumes")[0] == f"{FR}/ratatouille.gmi"  # légume, unaccented
    assert urls(known, "patata")[0] == f"{ES}/tortilla.gmi"  # singular, Spanish stem
    assert urls(known, "cycling")[0] == f"{ALICE}/gemlog/2024-03-20-cycling.gmi"
    assert f"{ALICE}/gemlog/2024-03-20-cycling.gmi" in urls(known, "cycle")  # English stem


def test_cjk_substrings(known: Searcher) -> None:
    assert urls(known, "天気") == [f"{JA}/tokyo.gmi"]
    assert urls(known, "お寺") == [f"{JA}/kyoto.gmi"]
    assert urls(known, "紅葉がきれい") == [f"{JA}/kyoto.gmi"]
    assert urls(known, "雨") == [f"{JA}/tokyo.gmi"]
    assert urls(known, "京都のお寺") == [f"{JA}/kyoto.gmi"]
    assert urls(known, "東京 京都") == []  # both substrings on one page: none has both


def test_phrases_need_adjacency(known: Searcher) -> None:
    assert urls(known, '"sourdough starter"') == [
        f"{ALICE}/gemlog/2024-04-11-sourdough.gmi",
        f"{ALICE}/gemlog/",  # "My sourdough starter", a link label
    ]
    assert urls(known, '"starter sourdough"') == []
    assert urls(known, "example.org") == []


def test_snippets_mark_matched_words_and_skip_the_title(known: Searcher) -> None:
    hit = known.search("balcony tomatoes").hits[0]
    assert hit.url == f"{ALICE}/gemlog/2024-05-02-tomatoes.gmi"
    assert f"{MARK_START}balcony{MARK_END}" in hit.snippet
    assert f"{MARK_START}Tomatoes{MARK_END}" in hit.snippet
    assert f"{MARK_START}tomato{MARK_END}" in hit.snippet  # stemmed match marked too
    assert not hit.snippet.startswith("Growing")  # the title line is not repeated
    excluded = known.search("tomatoes -cherry")
    assert all(f"{MARK_START}cherry" not in h.snippet.lower() for h in excluded.hits)
    accent = known.search("creme OR crepes").hits[0]
    assert f"{MARK_START}crêpes{MARK_END}" in accent.snippet


def test_hit_fields(known: Searcher) -> None:
    hit = known.search("climate report").hits[0]
    assert hit.url == f"{WEATHER}/report.txt"
    assert hit.title == "Monthly climate report"
    assert hit.host == "weather.example"
    assert hit.mime == "text/plain"
    assert hit.charset == "iso8859-1"
    assert hit.lang == "en"
    assert hit.size == len(PAGES[hit.url].body.encode())  # type: ignore[union-attr]
    assert hit.fetched_at is not None
    assert hit.score > 0
    assert hit.rank > 0
    home = known.search("project gemini").hits[0]
    assert home.url == f"{GEMINI}/"
    assert home.inbound >= 5


def test_did_you_mean(known: Searcher) -> None:
    results = known.search("!sourdogh")
    assert results.total == 0
    assert results.suggestion == "sourdough"
    assert results.query == "!sourdogh"
    assert results.corrected_from is None
    assert known.search("!lagrnge review").suggestion == "lagrange review"
    assert known.search('tomatoes "balcony" site:alice.example').suggestion is None
    assert known.search("sourdough").suggestion is None
    assert known.search("qqqqzzzz").suggestion is None


def test_a_correction_that_finds_pages_answers_at_once(known: Searcher) -> None:
    results = known.search("sourdogh bred")
    assert results.corrected_from == "sourdogh bred"
    assert results.query == "sourdough bread"
    assert results.suggestion is None
    assert results.hits[0].url == f"{ALICE}/gemlog/2024-04-11-sourdough.gmi"
    assert "**sourdough**" in results.hits[0].snippet.lower()
    # Corrections rewrite the words only: the filters and operators stay as typed.
    assert known.search("lagrnge -zzzz").query == "lagrange -zzzz"
    # Nothing to correct to: the empty answer stays.
    assert known.search("qqqqzzzz").corrected_from is None


def test_paging(known: Searcher) -> None:
    first = known.search("gemini", page=1, page_size=5)
    second = known.search("gemini", page=2, page_size=5)
    assert first.total == second.total > 10
    assert first.pages == second.pages == -(-first.total // 5)
    assert len(first.hits) == len(second.hits) == 5
    assert not {h.url for h in first.hits} & {h.url for h in second.hits}
    assert [h.url for h in known.search("gemini", page_size=10).hits] == [
        h.url for h in first.hits + second.hits
    ]
    beyond = known.search("gemini", page=first.pages + 1, page_size=5)
    assert beyond.hits == ()
    assert beyond.total == first.total


@pytest.mark.parametrize(("page", "size"), [(0, 10), (1, 0), (1, 101), (-1, 5)])
def test_bad_paging_is_a_query_error(known: Searcher, page: int, size: int) -> None:
    with pytest.raises(QueryError):
        known.search("gemini", page=page, page_size=size)


def test_malformed_query_raises_query_error_not_a_traceback(known: Searcher) -> None:
    with pytest.raises(QueryError, match="unclosed quote"):
        known.search('"gemini')
    # The searcher is still fine afterwards.
    assert known.search("gemini").total > 0


def test_concurrent_searches_from_threads(known: Searcher) -> None:
    queries = ["gemini", "tomatoes", "site:gemini.example", "東京", '"sourdough starter"']
    expected = {query: urls(known, query) for query in queries}
    failures: list[object] = []

    def work() -> None:
        for _ in range(10):
            for query in queries:
                got = urls(known, query)
                if got != expected[query]:
                    failures.append((query, got))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_timing_is_reported(known: Searcher) -> None:
    results = known.search("gemini")
    assert 0 < results.seconds < 5


def test_a_huge_page_gets_its_snippet_from_its_opening(store: Store) -> None:
    """Only the opening of a body is read for a snippet, however large the page."""
    filler = "Filler words about nothing in particular. " * 200_000  # about 8 MiB
    store.space.add(
        {
            "gemini://big.example/": P(f"# Big\nThe zeppelin hangar opens at dawn.\n{filler}"),
            "gemini://small.example/": P("# Small\nA zeppelin flew over the small town."),
        }
    )
    store.index()
    with store.searcher() as searcher:
        hits = {hit.url: hit for hit in searcher.search("zeppelin").hits}
        big = store.space.ids["gemini://big.example/"]
        assert len(searcher._texts([big])[big]) <= SNIPPET_SOURCE_CHARS  # not 8 MiB
    assert f"{MARK_START}zeppelin{MARK_END} hangar opens" in hits["gemini://big.example/"].snippet
    assert "small town" in hits["gemini://small.example/"].snippet


def test_hosts_are_shown_as_people_write_them() -> None:
    from indexer.query import _display_host

    assert _display_host("gemini://a.example:1966/x", "a.example:1966") == "a.example:1966"
    assert _display_host("gemini://[::1]:1966/", "[::1]:1966") == "[::1]:1966"
    idn = "gemini://xn--bcher-kva.example:1970/"
    assert _display_host(idn, "xn--bcher-kva.example:1970") == "bücher.example:1970"
    assert _display_host("gemini://xn--bcher-kva.example/", "xn--bcher-kva.example") == (
        "bücher.example"
    )


def test_files_found_by_their_name_rank_after_pages_with_text(tmp_path: Path) -> None:
    """lighthouse.png matched by its URL and three labels outscored, on BM25, the one page
    that says "lighthouse" in its text; files come after pages with text now."""
    links = "".join(f"=> /lighthouse.png Lighthouse picture {n}\n" for n in range(3))
    pages = {
        "gemini://files.example/": P(f"# Files\n{links}"),
        "gemini://files.example/lighthouse.png": P(None, mime="image/png", size=900),
        "gemini://b.example/": P(f"# Walks\n{links}"),
        "gemini://c.example/coast.gmi": P(
            "# The coast\nA long walk along the coast, past fields and dunes, to the old "
            "lighthouse and back by the harbour, where the boats come in at dusk.",
        ),
    }
    with indexed(tmp_path, pages) as searcher:
        hits = searcher.search("lighthouse").hits
        urls = [hit.url for hit in hits]
        assert urls[-1] == "gemini://files.example/lighthouse.png", hits
        assert searcher.search("type:image lighthouse").hits[0].url.endswith("lighthouse.png")


def test_markdown_is_searched_and_shown_as_text(known: Searcher) -> None:
    hit = known.search("wheel truing").hits[0]
    assert hit.url == f"{ERIN}/changelog.md"
    assert hit.title == "Changelog"
    for syntax in ("#", "**wheel truing**", "](", "`", "_the_", "make truing-table"):
        assert syntax not in hit.snippet, hit.snippet
    assert "**spoke** **tension** **table**" in known.search("spoke tension table").hits[0].snippet
    assert known.search("make truing").total == 0  # fenced code is left out, like gemtext's
    assert known.search("intitle:changelog").hits[0].url == f"{ERIN}/changelog.md"
