"""Permanent redirects are remembered (sextant/store/redirects.py): crawled over real TLS,
indexed into a real Whoosh index, searched and asked for backlinks like a user would.
"""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select

from gemserve.server import Response
from indexer.build import run_index
from search_capsule import store_views
from sextant.store import Page
from tests.crawler.crawling import Crawled, crawl, settings_for
from tests.crawler.test_show import run_cli
from tests.gemini_server import ScriptedCapsule, gemtext


def moving_site(status: int) -> ScriptedCapsule:
    site = ScriptedCapsule("moving.test")
    site.routes(
        {
            "/": gemtext("# Home\n=> /old Zeppelin notes\n=> /about About\n"),
            "/about": gemtext("# About\n=> /old Airship history\n"),
            "/old": Response(status, "/new"),
            "/new": gemtext("# Zeppelins\nRigid dirigibles of the last century.\n"),
        }
    )
    return site


def found(tmp_path, words: str) -> list[str]:
    output = run_cli(tmp_path, "search", "--json", words).output
    return [result["url"] for result in json.loads(output)["results"]]


def a_day_passes(crawled: Crawled) -> None:
    """Every page with a recrawl time is due."""
    shift = timedelta(days=1, seconds=1)
    with crawled.session() as session, session.begin():
        for page in session.scalars(select(Page).where(Page.next_crawl_at.is_not(None))):
            page.next_crawl_at -= shift


async def test_a_permanent_redirect_moves_results_backlinks_and_recrawls(tmp_path, capsules):
    site = moving_site(31)
    running = await capsules(site)
    url = running["moving.test"].url
    first = await crawl(tmp_path, running, url("/"))
    assert (len(site.hits("/old")), len(site.hits("/new"))) == (1, 1)
    old = first.page(url("/old"))
    assert (old.state, old.status, old.redirect_target) == ("redirect", 31, url("/new"))

    assert run_cli(tmp_path, "index").exit_code == 0
    assert found(tmp_path, "dirigibles") == [url("/new")]
    # The labels of links to the old address are the new page's anchor text.
    assert url("/new") in found(tmp_path, "zeppelin notes")
    assert url("/old") not in found(tmp_path, "zeppelin notes")

    with first.session() as session:
        backlinks = store_views.backlinks(session, url("/new"))
    assert [(link.source_url, link.label) for link in backlinks.same_capsule] == [
        (url("/"), "Zeppelin notes"),
        (url("/about"), "Airship history"),
    ]
    assert backlinks.same_total == 2

    # The next crawl asks the new address only, also when everything is due again.
    a_day_passes(first)
    second = await crawl(tmp_path, running, recrawl=True)
    assert (len(site.hits("/old")), len(site.hits("/new"))) == (1, 2)
    assert second.page(url("/old")).next_crawl_at is None
    assert second.frontier() == {}


async def test_a_temporary_redirect_keeps_the_old_address(tmp_path, capsules):
    site = moving_site(30)
    running = await capsules(site)
    url = running["moving.test"].url
    first = await crawl(tmp_path, running, url("/"))
    assert first.page(url("/old")).next_crawl_at is not None
    with first.session() as session:
        backlinks = store_views.backlinks(session, url("/new"))
    assert backlinks.same_total == 0  # the links name /old, which stays the address to use

    a_day_passes(first)
    await crawl(tmp_path, running, recrawl=True)
    assert len(site.hits("/old")) == 2


async def test_a_page_moving_for_good_later_gives_its_links_to_the_indexed_target(
    tmp_path, capsules
):
    site = moving_site(31)
    site.route("/old", gemtext("# Old notes\nStill here for now.\n"))
    site.route("/about", gemtext("# About\n=> /new Fresh\n"))
    running = await capsules(site)
    url = running["moving.test"].url
    first = await crawl(tmp_path, running, url("/"))
    index = settings_for(tmp_path).index_dir, settings_for(tmp_path).db_url
    # No watermark slack: the second run looks only at what changed since the first.
    assert run_index(*index, watermark_slack=timedelta()).mode == "full"
    assert set(found(tmp_path, "zeppelin notes")) == {url("/"), url("/old")}

    # /old moves to /new, which was indexed already and does not change itself: the
    # incremental index still gives it the labels of the links to /old.
    site.route("/old", Response(31, "/new"))
    a_day_passes(first)
    await crawl(tmp_path, running, recrawl=True)
    assert len(site.hits("/old")) == 2
    assert run_index(*index, watermark_slack=timedelta()).mode == "incremental"
    assert set(found(tmp_path, "zeppelin notes")) == {url("/"), url("/new")}
    assert url("/old") not in found(tmp_path, "still here")
