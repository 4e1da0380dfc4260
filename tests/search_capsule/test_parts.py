"""The capsule's pure parts: input decoding, safe gemtext lines, cache, throttle, excludes."""

from __future__ import annotations

from datetime import datetime

import pytest
import trio
import trio.testing

from indexer.query import SearchResults
from search_capsule import paths
from search_capsule.cache import TTLCache
from search_capsule.excludes import builtin_rules, parse_rules
from search_capsule.lanes import ClientLanes
from search_capsule.pages import lines
from search_capsule.pages import search as search_pages
from search_capsule.seeds import validate_seed
from search_capsule.throttle import Throttle
from search_capsule.user_input import decode, typed_url
from sextant.errors import InvalidURL, MalformedRequest
from sextant.gemtext import parse as parse_gemtext


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (None, None),
        ("", ""),
        ("hello%20world", "hello world"),
        ("c++", "c++"),  # a literal plus stays a plus (no web-form convention in Gemini)
        ("c%2B%2B", "c++"),
        ("a+b%20c", "a+b c"),
        ("%C3%BCber%20caf%C3%A9", "über café"),
        ("%E6%97%A5%E6%9C%AC", "日本"),
        ("%20%20padded%09%20", "padded"),
        ("line%0Abreak", "line break"),
        ("%22exact%20phrase%22", '"exact phrase"'),
    ],
)
def test_query_decoding(query, expected):
    assert decode(query) == expected


@pytest.mark.parametrize("query", ["%FF%FE", "%C3", "caf%E9", "nul%00byte", "esc%1B[31m"])
def test_undecodable_queries_are_refused(query):
    with pytest.raises(MalformedRequest):
        decode(query)


def test_encode_query_round_trips_through_decode():
    for value in ["hello world", "c++", "a&b=c?d#e/f", "ünïcödé 日本", "100%", "x+y z"]:
        encoded = paths.encode_query(value)
        assert not set(encoded) & set(" +#")
        assert decode(encoded) == value
    assert paths.search("a b", 1) == "/search?a%20b"
    assert paths.search("a b", 3, verbose=True) == "/v/search/3?a%20b"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("example.org", "gemini://example.org/"),
        ("Example.ORG:1965/a/../b", "gemini://example.org/b"),
        ("example.org:1966", "gemini://example.org:1966/"),
        ("//example.org/x", "gemini://example.org/x"),
        ("gemini://bücher.example/", "gemini://xn--bcher-kva.example/"),
        ("HTTPS://example.org/page", "https://example.org/page"),
        ("mailto:someone@example.org", "mailto:someone@example.org"),
    ],
)
def test_typed_urls(typed, expected):
    assert typed_url(typed) == expected


@pytest.mark.parametrize("typed", ["", "   ", "gemini://user@example.org/", "https:nohost"])
def test_unusable_typed_urls(typed):
    with pytest.raises(InvalidURL):
        typed_url(typed)


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        ("https://example.org/", "only gemini"),
        ("gemini://localhost/", "local name"),
        ("gemini://printer.local/", "local name"),
        ("gemini://127.0.0.1/", "not a public address"),
        ("gemini://10.1.2.3:1965/", "not a public address"),
        ("gemini://[::1]/", "not a public address"),
        ("gemini://intranet/", "not a full host name"),
        ("gemini://user@example.org/", "userinfo"),
        ("gemini://example.org/" + "a" * 1100, "1024"),
    ],
)
def test_seed_validation_refuses_with_a_reason(typed, reason):
    with pytest.raises(InvalidURL, match=reason):
        validate_seed(typed)


def test_seed_validation_accepts_public_capsules():
    assert validate_seed(" example.org ") == "gemini://example.org/"
    assert validate_seed("gemini://93.184.216.34/x") == "gemini://93.184.216.34/x"


def test_lines_never_let_foreign_text_become_markup():
    hostile = "Title\n=> gemini://evil.example/ click\r\n# heading\n```\n* item"
    page = lines.document(
        [
            lines.link("gemini://ok.example/a b", hostile),
            lines.text(hostile),
            lines.text("=> looks like a link"),
            lines.text("```toggle"),
            lines.quote(hostile),
            lines.item(hostile),
            lines.heading(hostile, 2),
            *lines.preformatted("```\n=> x\nplain", alt="alt\ntext"),
            lines.text("after"),
        ]
    )
    doc = parse_gemtext(page)
    assert [link.url for link in doc.links] == ["gemini://ok.example/a%20b"]
    assert len(doc.headings) == 1
    assert page.endswith("after\n")
    assert page.count("\n") == 13  # 7 lines, a 5-line block, "after"


def test_link_urls_encode_what_would_end_or_disguise_the_line():
    url = "gemini://ok.example/a b\u3000c\x9b\u202ed\x7f"
    assert lines.link(url, "label") == (
        "=> gemini://ok.example/a%20b%E3%80%80c%C2%9B%E2%80%AEd%7F label"
    )


def test_human_sizes_and_dates():
    assert lines.human_size(None) == "size unknown"
    assert lines.human_size(999) == "999 B"
    assert lines.human_size(12_345) == "12.3 kB"
    assert lines.human_size(5_000_000) == "5.0 MB"
    assert lines.human_size(7 * 10**12) == "7000.0 GB"
    assert lines.day(datetime(2024, 5, 1, 12, 30)) == "2024-05-01"
    assert lines.minute(None) == "never"
    assert lines.plural(1, "page") == "1 page"
    assert lines.plural(12_000, "capsule") == "12,000 capsules"


def test_cache_expires_and_evicts_least_recently_used():
    clock = FakeClock()
    cache: TTLCache[str, int] = TTLCache(max_entries=2, ttl=10, clock=clock)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recently used
    cache.put("c", 3)
    assert cache.get("b") is None
    assert cache.get("a") == 1
    clock.now += 10
    assert cache.get("a") is None
    assert cache.get("c") is None
    assert len(cache) == 0
    assert (cache.hits, cache.misses) == (2, 3)
    with pytest.raises(ValueError, match="max_entries"):
        TTLCache(max_entries=0)


def test_throttle_allows_a_burst_then_asks_to_slow_down():
    clock = FakeClock()
    throttle = Throttle(rate=2.0, burst=3, clock=clock)
    assert [throttle.take("a") for _ in range(3)] == [0, 0, 0]
    assert throttle.take("a") == 1
    assert throttle.take("b") == 0  # another client is not affected
    clock.now += 0.5  # one token back at 2 per second
    assert throttle.take("a") == 0
    assert throttle.take("a") >= 1
    slow = Throttle(rate=0.1, burst=1, clock=clock)
    assert slow.take("x") == 0
    assert slow.take("x") == 10


def test_throttle_charges_search_time_and_lets_a_client_pay_it_off():
    clock = FakeClock()
    throttle = Throttle(rate=2.0, burst=4, cost_unit=0.025, clock=clock)
    assert throttle.take("a") == 0
    throttle.charge("a", 0.005)  # a cheap search: a fifth of a request more
    assert throttle.take("b") == 0
    throttle.charge("b", 0.25)  # a search that used its whole budget: ten requests' worth
    assert [throttle.take("a") for _ in range(2)] == [0, 0]  # a still has allowance left
    wait = throttle.take("b")
    assert wait == 4  # 3 tokens left, 10 charged: 8 short of one token at 2 a second
    clock.now += wait
    assert throttle.take("b") == 0
    throttle.charge("b", -1.0)  # a clock step backwards never credits a client
    assert throttle.take("b") >= 1


def test_throttle_memory_stays_bounded():
    clock = FakeClock()
    throttle = Throttle(rate=1.0, burst=1, clock=clock, max_clients=100)
    for n in range(1000):
        throttle.take(f"10.0.{n // 256}.{n % 256}")
        clock.now += 0.01
    assert len(throttle) <= 101


def test_exclude_rules_parse_with_sections_and_reasons():
    text = (
        "# header comment\n\n# --- Proxies: endless ---\n"
        "gemini://*/proxy/    web proxy: any page\nre:/cgi\\?x\tquery loop\n"
        "# --- Mirrors ----------\ngemini://m.example/mirror/   a mirror\nbare-pattern\n"
    )
    sections = parse_rules(text)
    assert [s.title for s in sections] == ["Proxies: endless", "Mirrors"]
    assert [(r.pattern, r.reason) for r in sections[0].rules] == [
        ("gemini://*/proxy/", "web proxy: any page"),
        ("re:/cgi\\?x", "query loop"),
    ]
    assert sections[1].rules[1].reason == ""


def test_the_crawlers_shipped_rules_all_have_reasons():
    sections = builtin_rules()
    rules = [rule for section in sections for rule in section.rules]
    assert len(rules) >= 10
    assert all(rule.reason for rule in rules)
    assert all(rule.pattern.startswith(("gemini://", "re:")) for rule in rules)
    assert builtin_rules(package="no_such_package_here") == ()


def test_a_stopped_search_says_so_above_its_results():
    def results(total: int, *, partial: bool) -> SearchResults:
        return SearchResults(
            query='"a b" OR c',
            total=total,
            page=1,
            page_size=10,
            hits=(),
            suggestion=None,
            seconds=0.25,
            partial=partial,
        )

    stopped = search_pages.STOPPED_EARLY
    assert stopped in search_pages.results_page(results(3, partial=True), verbose=False, max_page=9)
    nothing = search_pages.results_page(results(0, partial=True), verbose=True, max_page=9)
    assert stopped in nothing
    assert "No pages match" not in nothing  # it stopped before it could know
    complete = search_pages.results_page(results(3, partial=False), verbose=False, max_page=9)
    assert stopped not in complete


async def test_client_lanes_keep_each_client_in_order_and_forget_idle_clients():
    lanes = ClientLanes(per_client=1)
    order: list[str] = []
    release_first = await lanes.enter("a")

    async def search(client: str, name: str) -> None:
        release = await lanes.enter(client)
        order.append(name)
        release()
        release()  # twice is harmless: only the first counts

    async with trio.open_nursery() as nursery:
        for number in range(3):
            nursery.start_soon(search, "a", f"a{number}")
            await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(search, "b", "b")  # another client does not wait for "a"
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["b"]
        assert (lanes.in_flight("a"), lanes.waiting("a")) == (1, 3)
        release_first()
    assert order == ["b", "a0", "a1", "a2"]
    assert len(lanes) == 0
    with trio.move_on_after(0.01):  # a client cancelled while waiting leaves no trace
        hold = await lanes.enter("c")
        await lanes.enter("c")
    hold()
    assert len(lanes) == 0
