"""44 SLOW DOWN over real TLS: obeyed exactly as asked, no more (rule 3 of
crawler/politeness.py).

The capsule records when each request arrived, so these tests check both halves of the
rule: nothing is asked sooner than the capsule said, and nothing is held back longer than
it said.
"""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

from gemserve.server import Response
from sextant.store import utcnow
from tests.crawler.crawling import crawl
from tests.gemini_server import ScriptedCapsule, gemtext

ASKED = 1.0
# Request times are taken by the capsule on arrival; the crawler starts waiting only once
# the 44 has reached it, so a gap is never shorter than asked. The tolerance is for clock
# granularity alone.
CLOCK = 0.005
OTHERS = ("/about", "/a", "/b", "/c", "/d")


async def test_one_page_answering_44_neither_stops_its_capsule_nor_is_asked_too_soon(
    tmp_path, capsules
):
    site = ScriptedCapsule("busy.test")
    # The always-busy endpoint is linked first: it is asked before every other page.
    links = "".join(f"=> {path}\n" for path in ("/cgi", *OTHERS))
    site.routes({"/": gemtext(f"# Busy\n{links}"), "/cgi": Response(44, f"{ASKED:g}")})
    for path in OTHERS:
        site.route(path, gemtext(f"# {path}\n"))
    running = await capsules(site)
    url = running["busy.test"].url
    result = await crawl(tmp_path, running, url("/"), max_time=4.5)

    # Every other page of the capsule was fetched in the same run, once.
    pages = result.pages()
    assert {path: pages[url(path)].state for path in ("/", *OTHERS)} == dict.fromkeys(
        ("/", *OTHERS), "ok"
    )
    assert all(len(site.hits(path)) == 1 for path in ("/", *OTHERS))
    # No request to the capsule came sooner than a 44 asked.
    hits = site.requests
    assert [hit.path for hit in hits].count("/cgi") >= 2
    for answered, following in pairwise(hits):
        if answered.path == "/cgi":
            assert following.at - answered.at >= ASKED - CLOCK, (answered, following)
    # The page itself backs off: asked, then twice as long.
    cgi = site.hits("/cgi")
    for index, (earlier, later) in enumerate(pairwise(cgi)):
        assert later - earlier >= ASKED * 2**index - CLOCK
    # It is still due, on its own back-off, with its 44s counted.
    row = result.frontier()[url("/cgi")]
    assert row.attempts == len(cgi)
    assert row.due_at > utcnow()
    assert result.page(url("/cgi")).status == 44


async def test_different_pages_answering_44_in_a_row_defer_the_capsule(tmp_path, capsules):
    site = ScriptedCapsule("limited.test")
    busy = [f"/x{n}" for n in range(5)]
    site.route("/", gemtext("# Rate-limited\n" + "".join(f"=> {path}\n" for path in busy)))
    for path in busy:
        site.route(path, Response(44, f"{ASKED:g}"))
    running = await capsules(site)
    url = running["limited.test"].url
    result = await crawl(tmp_path, running, url("/"), max_time=15)

    # The third different page in a row answering 44 sends the capsule away for an hour:
    # the run ends by itself, two pages never asked.
    assert result.summary.stats["stop_reason"] == "nothing left to fetch: finished"
    asked = [path for path in site.paths if path in busy]
    assert asked == busy[:3]
    for answered, following in pairwise(site.requests):
        if answered.path in busy:
            assert following.at - answered.at >= ASKED - CLOCK
    frontier = result.frontier()
    assert {path for path in busy if url(path) in frontier} == set(busy)
    later = utcnow() + timedelta(minutes=59)
    assert all(frontier[url(path)].due_at > later for path in busy)
