"""A capsule whose author needs the capsule pages: sixty URLs failing, hostile text everywhere.

Its error messages and metas carry terminal commands, a line break that would forge a link,
and a thousand characters of noise; a page title carries what breaks XML (``<``, ``&``,
``]]>``, NUL, ESC, U+FFFE). The capsule page must list the failures newest first, capped,
with that text made harmless, and the Atom feed must stay a well-formed document.
"""

from __future__ import annotations

import re
from datetime import timedelta
from xml.etree import ElementTree

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from search_capsule.pages import atom
from search_capsule.store_views import FAILING_LIMIT, Listing, PageRow
from sextant.config import Settings
from sextant.gemtext import feed_entries, is_gemsub
from sextant.store.migrate import open_store
from sextant.urls import parse
from tests.hostile_space import HOSTILE, unsafe_characters
from tests.search_capsule.conftest import settings_in, start_capsule
from tests.search_capsule.space import NOW, capsule, page

HOST = "broken.example"
FAILURES = 60
FORGED = "gemini://forged.example/"
LONG = "x" * 5000
XML_BREAKERS = "<b>&amp; ]]> \x00nul \x1besc \ufffenon"
HOSTILE_TITLE = f"Notes {XML_BREAKERS} {HOSTILE}"
ATOM = "{http://www.w3.org/2005/Atom}"
# XML 1.0 section 2.2: the characters a document may hold at all.
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _failing(n: int) -> dict:
    """The n-th failure (fetched n minutes before NOW), of each kind in turn."""
    kind = n % 4
    if kind == 0:
        return {"state": "error", "status": None, "error_kind": "timeout", "error_message": LONG}
    if kind == 1:
        return {"state": "gone", "status": 51, "meta": f"Not found {HOSTILE}\n=> {FORGED} x"}
    if kind == 2:
        return {"state": "certificate", "status": 60, "meta": "Certificate required"}
    return {
        "state": "error",
        "status": 40,
        "error_kind": "temporary-failure",
        "error_message": f"40 busy {HOSTILE}",
    }


def populate(engine: Engine) -> list[str]:
    """The store; returns the failing URLs, the most recently fetched first."""
    with Session(engine) as session:
        broken = capsule(HOST, last_success_at=NOW - timedelta(hours=1))
        session.add(broken)
        url = f"gemini://{HOST}/"
        # Indexed, then its latest fetch timed out: a failure although the page stays "ok".
        failing = [url + "kept.gmi"]
        session.add(
            page(
                failing[0],
                broken,
                title="Kept",
                fetched_at=NOW - timedelta(seconds=30),
                error_kind="timeout",
                error_message="no answer within 30 s",
            )
        )
        for n in range(1, FAILURES):
            failing.append(f"{url}{n:02d}.gmi")
            facts = _failing(n) | {"fetched_at": NOW - timedelta(minutes=n)}
            session.add(page(failing[-1], broken, title=None, **facts))
        # Fetched more recently than any failure: listed first if counted as failures.
        recent = NOW - timedelta(seconds=1)
        session.add_all(
            [
                page(url, broken, title=HOSTILE_TITLE, discovered_at=NOW, fetched_at=recent),
                page(
                    url + "private/",
                    broken,
                    state="disallowed",
                    error_kind="disallowed",
                    error_message="robots.txt disallows it",
                    fetched_at=recent,
                ),
                page(
                    url + "cgi/",
                    broken,
                    state="excluded",
                    error_kind="excluded",
                    error_message="an endless place",
                    status=51,
                    fetched_at=recent,
                ),
                page(url + "moved", broken, state="redirect", status=31, fetched_at=recent),
                page(url + "never", broken, state="new", status=None, fetched_at=None),
            ]
        )
        session.commit()
    return failing


@pytest.fixture(scope="module")
def broken_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, list[str]]:
    settings = settings_in(tmp_path_factory.mktemp("broken"))
    engine = open_store(settings.db_url)
    failing = populate(engine)
    engine.dispose()
    return settings, failing


@pytest.fixture
async def broken_capsule(nursery, broken_store, tls_context):
    running = await start_capsule(nursery, broken_store[0], tls_context)
    yield running
    running.app.close()


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


async def test_capsule_page_lists_the_latest_failures_capped_and_sanitized(
    broken_capsule, broken_store
):
    failing = broken_store[1]
    reply = await broken_capsule.client.answer("/capsule", HOST)
    assert reply.status == 20
    assert unsafe_characters(reply.text) == [], reply.text
    section = _section(reply.text, "URLs the crawler could not read")
    assert f"{FAILURES} URLs failed at the last attempt; the {FAILING_LIMIT} most recent:" in (
        section
    )
    listed = [line.split()[1] for line in section.splitlines() if line.startswith("=>")]
    assert listed == failing[:FAILING_LIMIT]
    assert FORGED not in reply.links
    assert "Not failures, so not listed: 1 page robots.txt disallows, 1 page excluded by rule." in (
        section
    )
    lines = {line.split()[1]: line for line in section.splitlines() if line.startswith("=>")}
    kept = "/kept.gmi — timeout: no answer within 30 s (2026-07-01 11:59 UTC)"
    assert lines[failing[0]].endswith(kept)
    assert "/01.gmi — 51 Not found clear\ufffd[2J osc" in lines[failing[1]]
    assert f"=> {FORGED} x (2026-07-01 11:59 UTC)" in lines[failing[1]]  # on its own line no more
    assert "/02.gmi — 60 Certificate required (2026-07-01 11:58 UTC)" in lines[failing[2]]
    assert "/03.gmi — temporary-failure: 40 busy clear\ufffd[2J" in lines[failing[3]]
    # A thousand-character error is cut: the start says what went wrong.
    assert f"timeout: {'x' * 200}… (2026-07-01 11:56 UTC)" in lines[failing[4]]
    assert max(map(len, section.splitlines())) < 400


async def test_feeds_of_hostile_titles_stay_well_formed(broken_capsule):
    gemsub = await broken_capsule.client.get("/newest-pages")
    assert unsafe_characters(gemsub.text) == []
    assert is_gemsub(gemsub.gemtext)
    entries = feed_entries(gemsub.gemtext)
    assert entries[0].url == f"gemini://{HOST}/"
    assert entries[0].title.startswith("Notes <b>&amp; ]]> \ufffdnul \ufffd")

    reply = await broken_capsule.client.get("/newest-pages.atom")
    assert reply.status == 20
    text = reply.body.decode("utf-8")
    assert NOT_XML.findall(text) == []
    feed = ElementTree.fromstring(reply.body)
    titles = [entry.findtext(ATOM + "title") for entry in feed.findall(ATOM + "entry")]
    assert len(titles) == len(entries) == 2  # the home page, and kept.gmi
    assert titles[0].startswith("Notes <b>&amp; ]]> \ufffdnul \ufffdesc \ufffdnon clear\ufffd[2J")
    assert unsafe_characters(titles[0]) == []
    assert titles[1] == "Kept"


def test_atom_replaces_what_xml_forbids_even_where_the_store_could_not_hold_it():
    """A lone surrogate cannot be written to SQLite, so the feed is built here directly."""
    row = PageRow(
        url="gemini://odd.example/\ud800 x",
        title="odd \ud800\udfff title \uffff",
        display_host="odd.example",
        when=NOW,
    )
    body = atom.newest_pages(
        Listing((row,), 1), parse("gemini://search.test/newest-pages.atom"), now=NOW
    )
    feed = ElementTree.fromstring(body)
    entry = feed.find(ATOM + "entry")
    assert entry.findtext(ATOM + "title") == "odd \ufffd\ufffd title \ufffd"
    assert entry.findtext(ATOM + "id") == "gemini://odd.example/\ufffd%20x"
    assert feed.findtext(ATOM + "updated") == "2026-07-01T12:00:00Z"
