"""Issue 20 end to end: every robots.txt group that addresses the crawler is obeyed.

A real TLS capsule on loopback serves the file from the issue, where ``*`` closes
``/private/`` and ``indexer`` closes ``/noindex/``. Reading only the most specific group
(RFC 9309) the crawler fetched ``/private/``; the companion spec wants both obeyed.
"""

from __future__ import annotations

from sqlalchemy import select

from sextant.census import census
from sextant.graph.researcher import left_out
from sextant.store import Page
from sextant.urls import parse
from tests.crawler.crawling import crawl
from tests.gemini_server import ScriptedCapsule, gemtext, plain

ISSUE_ROBOTS = "User-agent: *\nDisallow: /private/\n\nUser-agent: indexer\nDisallow: /noindex/\n"
HOME = """\
# Home
=> /public/one
=> /public/two
=> /private/diary
=> /noindex/drafts
=> /noindex/
"""


def issue_capsule() -> ScriptedCapsule:
    site = ScriptedCapsule("groups.test")
    site.route("/robots.txt", plain(ISSUE_ROBOTS))
    site.route("/", gemtext(HOME))
    site.route("/public/one", gemtext("# One\n=> /private/more\n"))
    site.route("/public/two", gemtext("# Two\n"))
    for secret in ("/private/diary", "/private/more", "/noindex/drafts", "/noindex/"):
        site.route(secret, gemtext("# Not for crawlers\n"))
    return site


async def test_star_and_indexer_groups_are_both_obeyed(tmp_path, capsules):
    site = issue_capsule()
    running = await capsules(site)
    result = await crawl(tmp_path, running, running["groups.test"].url("/"))

    asked = set(site.paths)
    assert {"/robots.txt", "/", "/public/one", "/public/two"} <= asked
    assert not [path for path in asked if path.startswith(("/private/", "/noindex/"))], asked
    for path in ("/private/diary", "/private/more", "/noindex/drafts", "/noindex/"):
        page = result.page(running["groups.test"].url(path))
        assert page.state == "disallowed", path
        assert page.fetched_at is None, path
    assert result.page(running["groups.test"].url("/public/two")).state == "ok"


async def test_the_census_of_that_crawl_answers_to_researcher_not_indexer(tmp_path, capsules):
    site = issue_capsule()
    running = await capsules(site)
    result = await crawl(tmp_path, running, running["groups.test"].url("/"))
    with result.session() as session:
        left = left_out(session)
        counted = census(session, left=left)
        urls = dict(session.execute(select(Page.id, Page.url)).all())
    # "*" keeps /private/ from everyone; /noindex/ is only the indexer's to avoid.
    left_paths = {parse(urls[int(page_id)]).path for page_id in left.page_ids}
    assert left_paths == {"/private/diary", "/private/more"}
    assert counted.pages_left_out == 2
    assert counted.pages == len(urls) - 2
    assert dict(counted.pages_by_state)["disallowed"] == 2  # the two /noindex/ pages
