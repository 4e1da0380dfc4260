"""The generated Geminispace of bench_scale keeps the real one's shape at a small size.

The benchmark's figures only say something about Geminispace if the space it crawls has
its shape: pubnixes with many ~user directories, about 5 % binaries, links mostly inside
their capsule, several languages that the indexer's detector recognises, traps and
robots.txt. Pages are rendered for real here (no server needed: rendering is a function).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from bench.scale_server import answer
from bench.scale_space import BINARY_SHARE, FULL_PAGES, PUBNIX_USERS, ScaleSpace
from gemserve.server import Request
from indexer.analysis import detect_language
from sextant.urls import parse

PAGES = 12_000


@pytest.fixture(scope="module")
def space():
    return ScaleSpace(PAGES)


def origin_of(space):
    return lambda index: f"gemini://{space.capsules[index].host}:1965"


def test_page_count_follows_the_knob(space):
    assert abs(space.pages - PAGES) < PAGES * 0.02
    assert len(space.capsules) == round(4_200 * PAGES / FULL_PAGES)


def test_pubnixes_have_their_scaled_users_on_one_host(space):
    pubnixes = [c for c in space.capsules if c.kind == "pubnix"]
    scale = PAGES / FULL_PAGES
    assert [len(p.users) for p in pubnixes] == [round(u * scale) for u in PUBNIX_USERS]
    root = space.render(pubnixes[0], 0, origin_of(space)).decode()
    assert root.count("/~user") == len(pubnixes[0].users)
    assert space.number_of(pubnixes[0], "/~user3/") == pubnixes[0].user_starts[3]


def test_about_five_percent_binaries_and_a_realistic_mean_size(space):
    binaries = sizes = pages = 0
    for capsule in space.capsules:
        for number in range(capsule.pages):
            binaries += space.is_binary(capsule, number)
            sizes += space.size_of(capsule, number)
            pages += 1
    assert BINARY_SHARE * 0.8 < binaries / pages < BINARY_SHARE * 1.2
    assert 15_000 < sizes / pages < 40_000  # the census's mean resource is about 26 KB


def test_links_stay_mostly_inside_their_capsule(space):
    rng = random.Random(1)
    inside = across = 0
    for _ in range(3_000):
        capsule = space.capsules[rng.randrange(len(space.capsules) - 1)]  # not the aggregator
        number = rng.randrange(capsule.pages)
        if space.is_binary(capsule, number):
            continue
        for target, _page in space.links(capsule, number):
            inside += target == capsule.index
            across += target != capsule.index
    assert across > 0
    assert 0.75 < inside / (inside + across) < 0.97


def test_several_languages_that_the_indexer_detects(space):
    langs = Counter(c.lang for c in space.capsules)
    assert {"en", "de", "fr", "es", "it", "ru"} <= set(langs)
    assert langs["en"] > len(space.capsules) / 2
    origin = origin_of(space)
    for lang in ("de", "fr", "ru"):
        capsule = next(c for c in space.capsules if c.lang == lang and c.kind == "site")
        text = space.render(capsule, 0, origin).decode()
        prose = "\n".join(line for line in text.splitlines() if not line.startswith("=>"))
        assert detect_language(prose) == lang


def test_every_page_path_names_its_page_and_nothing_else(space):
    for capsule in space.capsules:
        for number in range(0, capsule.pages, max(1, capsule.pages // 20)):
            assert space.number_of(capsule, space.path(capsule, number)) == number
        assert space.number_of(capsule, f"/p/{capsule.pages + 5}.gmi") is None


def request(url):
    return Request(url=parse(url), raw=url, peer=("127.0.0.1", 1))


def test_traps_robots_and_feeds_answer(space):
    ports = {c.index: 1965 for c in space.capsules}
    calendar = next(c for c in space.capsules if c.kind == "trap-calendar")
    month = answer(space, ports, request(f"gemini://{calendar.host}/cal/2026/12/"))
    assert b"/cal/2027/01/" in month.body  # next month, for ever
    cgi = next(c for c in space.capsules if c.kind == "trap-cgi")
    results = answer(space, ports, request(f"gemini://{cgi.host}/search?a+b"))
    assert b"/search?a+b+solar" in results.body
    closed = next(c for c in space.capsules if c.robots)
    robots = answer(space, ports, request(f"gemini://{closed.host}/robots.txt"))
    assert robots.body == b"User-agent: *\nDisallow: /private/\n"
    assert sum(c.robots for c in space.capsules) > len(space.capsules) / 5
    gemlog = next(c for c in space.capsules if c.kind == "gemlog" and c.pages > 20)
    feed = answer(space, ports, request(f"gemini://{gemlog.host}/atom.xml"))
    assert feed.meta == "application/atom+xml"
    assert b"<entry>" in feed.body
    entries = answer(space, ports, request(f"gemini://{gemlog.host}/gemlog/"))
    assert entries.body.count(b"=> /gemlog/") > 5
