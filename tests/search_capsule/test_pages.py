"""Every page of the capsule, fetched over real TLS from a real store and index."""

from __future__ import annotations

import re
from datetime import date, datetime
from urllib.parse import quote
from xml.etree import ElementTree

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from crawler.removals import forget
from search_capsule.excludes import REMOVALS_TITLE, builtin_rules, operator_removals
from search_capsule.pages.static import shipped_document
from sextant.gemtext import feed_entries, is_gemsub
from sextant.robots import RobotsPolicy
from sextant.store.migrate import open_store
from sextant.store.models import SeedRequest
from tests.search_capsule import space
from tests.search_capsule.conftest import NOTES, start_capsule

GEMTEXT = "text/gemini; charset=utf-8"
ATOM = "{http://www.w3.org/2005/Atom}"
# Gemsub: a link line whose label starts with an ISO date is an entry.
DATED_LINK = re.compile(r"=> (\S+) ([0-9]{4}-[0-9]{2}-[0-9]{2}) (.+)")


def result_urls(reply) -> list[str]:
    return [url for url in reply.links if url.startswith("gemini://")]


async def test_home_page_links_to_every_section_and_shows_headline_numbers(capsule):
    home = await capsule.client.get("/")
    assert (home.status, home.meta) == (20, GEMTEXT + "; lang=en")
    assert home.gemtext.title == "Sextant — search Geminispace"
    # 6 pages of the space plus the notes are indexable; 4 capsules ever answered.
    assert f"{6 + NOTES} pages from 4 capsules" in home.text
    assert "Last crawl: 2026-07-01 10:00 UTC" in home.text
    expected = {
        "/search",
        "/v/search",
        "/backlinks",
        "/statistics",
        "/known-hosts",
        "/newest-hosts",
        "/newest-pages",
        "/known-feeds",
        "/capsule",
        "/documentation/searching",
        "/documentation/indexing",
        "/known-excludes",
        "/add-seed",
        "/about",
    }
    assert set(home.links) == expected
    # Crawl our own capsule: every page the start page links to answers 20 or a prompt.
    for path in sorted(expected):
        reply = await capsule.client.get(path)
        assert reply.status in (10, 20), (path, reply.status, reply.meta)


@pytest.mark.parametrize(
    ("path", "prompt"),
    [
        ("/search", "Search Geminispace"),
        ("/v/search", "Search Geminispace"),
        ("/search?", "Search Geminispace"),  # an empty answer asks again
        ("/search?%20%20", "Search Geminispace"),
        ("/backlinks", "URL whose backlinks"),
        ("/capsule", "Host name of the capsule"),
        ("/add-seed", "URL of a Gemini capsule"),
    ],
)
async def test_prompts(capsule, path, prompt):
    reply = await capsule.client.get(path)
    assert reply.status == 10
    assert reply.meta.startswith(prompt)


async def test_search_results(capsule):
    reply = await capsule.client.answer("/search", "solar panels")
    assert reply.status == 20
    assert reply.meta == GEMTEXT
    lines = reply.text.splitlines()
    assert lines[0] == "# Search: “solar panels”"
    assert lines[2].startswith("1 result · page 1 of 1 · ")
    hit = lines.index("=> gemini://alpha.example/ Alpha's capsule")
    assert lines[hit + 1] == "alpha.example · 1.5 kB · en"
    assert lines[hit + 2].startswith("> ")
    assert "**Solar** **panels**" in lines[hit + 2]
    assert reply.link_labelled("Verbose view") == "/v/search?solar%20panels"
    assert "Next page" not in reply.text
    assert "Previous page" not in reply.text


async def test_verbose_search_shows_the_details_of_each_result(capsule):
    reply = await capsule.client.get("/v/search?solar")
    assert reply.status == 20
    text = reply.text
    assert "=> gemini://alpha.example/ Alpha's capsule" in text
    assert re.search(r"\* score: [0-9.]+ · link-analysis score: [0-9.]+", text)
    assert "* type: text/gemini · charset: utf-8 · language: en · size: 1.5 kB" in text
    assert re.search(r"\* dated: [0-9-]+ · fetched: 2026-06-30 · inbound links: [0-9]+", text)
    assert reply.link_labelled("Compact view") == "/search?solar"


async def test_utf8_and_plus_in_queries(capsule):
    # Percent-encoded UTF-8 reaches the index decoded: "Bücher" finds the German page.
    books = await capsule.client.get("/search?" + quote("Bücher"))
    assert "# Search: “Bücher”" in books.text
    assert space.BUECHER in result_urls(books)
    assert "bücher.example · 2.0 kB · de" in books.text
    # Raw UTF-8 in the request line is accepted too and means the same.
    raw = await capsule.client.get("/search?Bücher")
    assert result_urls(raw) == result_urls(books)
    # A literal "+" is a plus, not a space; links back to the query keep it as %2B.
    plus = await capsule.client.get("/search?solar+panels")
    assert "# Search: “solar+panels”" in plus.text
    assert plus.link_labelled("Verbose view") == "/v/search?solar%2Bpanels"
    encoded_plus = await capsule.client.get("/search?solar%2Bpanels")
    assert encoded_plus.text.splitlines()[0] == plus.text.splitlines()[0]


async def test_pagination(capsule):
    client = capsule.client
    first = await client.get("/search?lighthouse")
    assert f"{NOTES} results · page 1 of 3" in first.text
    seen = result_urls(first)
    assert len(seen) == 10
    assert first.link_labelled("Next page (2)") == "/search/2?lighthouse"
    second = await client.get("/search/2?lighthouse")
    assert "page 2 of 3" in second.text
    assert second.link_labelled("Previous page (1)") == "/search?lighthouse"
    assert second.link_labelled("Next page (3)") == "/search/3?lighthouse"
    third = await client.get(second.link_labelled("Next page"))
    assert "Next page" not in third.text
    pages = [seen, result_urls(second), result_urls(third)]
    assert [len(page) for page in pages] == [10, 10, NOTES - 20]
    every = [url for page in pages for url in page]
    assert sorted(every) == sorted(f"gemini://notes.example/{n:03d}.gmi" for n in range(NOTES))
    # The verbose view pages the same way, with links that stay verbose.
    verbose = await client.get("/v/search/2?lighthouse")
    assert result_urls(verbose)[::2] == pages[1][::2] or result_urls(verbose) == pages[1]
    assert verbose.link_labelled("Next page") == "/v/search/3?lighthouse"


async def test_pagination_edges(capsule):
    client = capsule.client
    origin = client.origin
    past = await client.get("/search/4?lighthouse")
    assert past.status == 20
    assert "There is no page 4" in past.text
    assert past.link_labelled("Last page (3)") == "/search/3?lighthouse"
    far = await client.get("/search/999999?lighthouse")
    assert far.status == 20
    assert "There is no page 999999" in far.text
    # Canonical spellings: page 1 has no number, numbers have no leading zeros.
    for path, target in [
        ("/search/1?lighthouse", "/search?lighthouse"),
        ("/search/02?lighthouse", "/search/2?lighthouse"),
        ("/v/search/1?solar", "/v/search?solar"),
        ("/search/?solar", "/search?solar"),
    ]:
        reply = await client.get(path)
        assert (reply.status, reply.meta) == (31, origin + target), path
    for path in ["/search/0?lighthouse", "/search/-1?x", "/search/two?x", "/search/2/3?x"]:
        assert (await client.get(path)).status == 51, path
    # A page number without a query sends the user back to the prompt.
    bare = await client.get("/search/2")
    assert (bare.status, bare.meta) == (30, origin + "/search")


async def test_no_results_and_did_you_mean(capsule):
    reply = await capsule.client.get("/search?%21solr")  # as typed: no correction
    assert reply.status == 20
    assert "No pages match “!solr”." in reply.text
    assert reply.link_labelled("Did you mean “solar”?") == "/search?solar"
    nothing = await capsule.client.get("/search?zyxwvutsrq")
    assert "No pages match" in nothing.text
    assert "Did you mean" not in nothing.text


async def test_a_correction_that_finds_pages_is_shown_at_once(capsule):
    reply = await capsule.client.get("/search?solr")
    assert reply.status == 20
    assert "No pages match “solr”: showing results for “solar”." in reply.text
    assert reply.link_labelled("Search instead for “solr”") == "/search?%21solr"
    assert "**solar**" in reply.text.lower()
    verbose = await capsule.client.get("/v/search?solr")
    assert verbose.link_labelled("Search instead for “solr”") == "/v/search?%21solr"
    typed = await capsule.client.get("/search?%21solr")
    assert "No pages match “!solr”." in typed.text


@pytest.mark.parametrize("query", ['"unclosed', "(solar", "-solar", "size:>lots"])
async def test_malformed_queries_get_an_explanation(capsule, query):
    reply = await capsule.client.get("/search?" + quote(query))
    assert reply.status == 20
    assert reply.gemtext.title == "That query could not be understood"
    assert f"> {query}" in reply.text
    assert "/documentation/searching" in reply.links


async def test_the_documented_examples_all_work(capsule):
    doc = shipped_document("/documentation/searching")
    examples = doc.split("## Examples", 1)[1].split("##", 1)[0]
    queries = [line[2:].split(" — ")[0] for line in examples.splitlines() if line.startswith("* ")]
    assert len(queries) >= 5
    for query in queries:
        reply = await capsule.client.get("/search?" + quote(query))
        assert reply.status == 20
        assert reply.text.startswith("# Search: "), (query, reply.text)


async def test_backlinks(capsule):
    reply = await capsule.client.answer("/backlinks", space.ALPHA)
    assert reply.status == 20
    text = reply.text
    assert "## From other capsules: 3" in text
    assert "=> gemini://beta.example:1966/ Beta station — “Alpha, a fine capsule”" in text
    assert "=> gemini://xn--bcher-kva.example/ Bücherstube — “Alpha auf Englisch”" in text
    assert "## From the same capsule: 1" in text
    assert "=> gemini://alpha.example/about.gmi About alpha — “home”" in text
    # Typed without the scheme, or spelled differently, it is the same URL.
    typed = await capsule.client.get("/backlinks?" + quote("ALPHA.example:1965/./"))
    assert typed.text == text
    web = await capsule.client.get("/backlinks?" + quote("https://example.org/"))
    assert "=> gemini://alpha.example/ Alpha's capsule" in web.text
    none = await capsule.client.get("/backlinks?" + quote("gemini://nowhere.example/"))
    assert "No page the crawler has seen links here." in none.text
    bad = await capsule.client.get("/backlinks?" + quote("gemini://user@host.example/"))
    assert bad.status == 20
    assert "that URL cannot be used" in bad.text
    assert "userinfo" in bad.text


async def test_statistics(capsule):
    reply = await capsule.client.get("/statistics")
    assert (reply.status, reply.meta) == (20, GEMTEXT + "; lang=en")
    text = reply.text
    for line in [
        f"* indexable pages: {6 + NOTES}",
        "* capsules: 5, of which 4 answered",
        "* links within a capsule: 2",
        "* links to other protocols: 2",
        "* last crawl: 2026-07-01 10:00 UTC",
        "* TLSv1.3: 1 (50.0%)",
        "* self-signed: 1 (50.0%)",
        "* expired: 1",
        "* changes seen (TOFU events): 1",
        "* application/atom+xml: 1 (2.9%)",
        "* de: 1 (3.3%)",
    ]:
        assert line in text, line
    for section in ["MIME types", "Languages", "Character sets", "Status families"]:
        assert f"## {section}" in text


async def test_host_and_page_listings(capsule):
    client = capsule.client
    hosts = await client.get("/known-hosts")
    assert result_urls(hosts) == [space.ALPHA, space.BETA, "gemini://notes.example/", space.BUECHER]
    assert "=> gemini://xn--bcher-kva.example/ bücher.example (1 page)" in hosts.text
    assert "/capsule?beta.example%3A1966" in hosts.links
    assert "gamma" not in hosts.text
    newest = await client.get("/newest-hosts")
    assert result_urls(newest) == [
        space.BUECHER,
        space.BETA,
        "gemini://notes.example/",
        space.ALPHA,
    ]
    pages = await client.get("/newest-pages")
    assert result_urls(pages)[:2] == [space.BETA_FEED, space.ALPHA_LOG]
    assert "=> gemini://beta.example:1966/atom.xml 2026-07-01 Beta news (beta.example:1966)" in (
        pages.text
    )
    feeds = await client.get("/known-feeds")
    assert "## Atom feeds" in feeds.text
    assert "## Gemini subscriptions (gemsub)" in feeds.text
    assert result_urls(feeds) == [space.BETA_FEED, space.ALPHA_LOG]


async def test_newest_pages_is_a_gemsub_feed_of_every_page_listed(capsule):
    reply = await capsule.client.get("/newest-pages")
    doc = reply.gemtext
    assert is_gemsub(doc)
    assert [h.text for h in doc.headings if h.level == 1] == ["Newest pages"]
    pages = result_urls(reply)
    assert len(pages) == 6 + NOTES
    # Every page listed is an entry; no other line of ours reads as one.
    assert [entry.url for entry in feed_entries(doc)] == pages
    dated = [DATED_LINK.fullmatch(line) for line in reply.text.splitlines()]
    days = [date.fromisoformat(m[2]) for m in dated if m]
    assert [m[1] for m in dated if m] == pages
    assert days == sorted(days, reverse=True)  # newest first
    assert days[0] == space.NOW.date()  # the day the crawler first met the page
    assert "=> /newest-pages.atom Atom feed of the newest pages" in reply.text


async def test_newest_pages_as_atom_parse_and_match_the_gemsub_feed(capsule):
    reply = await capsule.client.get("/newest-pages.atom")
    assert (reply.status, reply.meta) == (20, "application/atom+xml")
    feed = ElementTree.fromstring(reply.body)
    assert feed.tag == ATOM + "feed"
    self_url = capsule.client.url("/newest-pages.atom")
    assert feed.findtext(ATOM + "id") == self_url
    assert feed.findtext(ATOM + "title") == "Newest pages"
    links = {link.get("rel"): link.get("href") for link in feed.findall(ATOM + "link")}
    assert links == {"self": self_url, "alternate": capsule.client.url("/newest-pages")}
    assert feed.findtext(ATOM + "updated") == "2026-07-01T00:00:00Z"  # the newest entry's
    entries = feed.findall(ATOM + "entry")
    gemsub = result_urls(await capsule.client.get("/newest-pages"))
    assert [entry.findtext(ATOM + "id") for entry in entries] == gemsub
    first = entries[0]
    assert first.findtext(ATOM + "title") == "Beta news"
    assert first.find(ATOM + "link").get("href") == space.BETA_FEED
    assert first.findtext(ATOM + "author/" + ATOM + "name") == "beta.example:1966"
    for entry in entries:
        updated = entry.findtext(ATOM + "updated")
        assert datetime.strptime(updated, "%Y-%m-%dT%H:%M:%SZ") <= space.NOW


async def test_capsule_health(capsule):
    reply = await capsule.client.answer("/capsule", "alpha.example")
    text = reply.text
    assert reply.gemtext.title == "Capsule alpha.example"
    assert "* Disallow: /private/" in text
    assert "User-agent: indexer" in text  # the robots.txt itself, preformatted
    assert "* ~ann (fetched 2026-" in text
    assert "Disallow: /drafts/; Crawl-delay: 5 s" in text
    assert "none (status 51)" in text.split("~bob (fetched", 1)[1].split("\n", 1)[0]
    beta = await capsule.client.answer("/capsule", "beta.example:1966")
    assert "robots.txt of users" not in beta.text
    assert f"* SHA-256 fingerprint {space.FINGERPRINT}" in text
    assert "changed-before-expiry" in text
    assert "* ok: 3" in text
    assert "=> /capsule?beta.example%3A1966 beta.example:1966 (3 links)" in text
    assert "* https: 1" in text
    assert "1 URL failed at the last attempt; the most recent first:" in text
    assert "=> gemini://alpha.example/old.gmi /old.gmi — 51 (2026-06-30 12:00 UTC)" in text
    assert "Not failures, so not listed: 1 page robots.txt disallows." in text
    gamma = await capsule.client.answer("/capsule", "gamma.example")
    assert "=> gemini://gamma.example/ / — connect-failed (2026-07-01 06:00 UTC)" in gamma.text
    # No port given and the host has only one capsule, on another port: that one.
    beta = await capsule.client.get("/capsule?beta.example")
    assert beta.gemtext.title == "Capsule beta.example:1966"
    assert "EXPIRED" in beta.text
    assert "There is none (status 5x)" in beta.text
    assert "None: the last fetch of every page worked." in beta.text
    # A URL, or the unicode name, work as well as the punycode host.
    by_url = await capsule.client.get("/capsule?" + quote("gemini://bücher.example/x"))
    assert by_url.gemtext.title == "Capsule bücher.example"
    unknown = await capsule.client.get("/capsule?nowhere.example")
    assert unknown.gemtext.title == "Unknown capsule"
    assert "/add-seed?gemini%3A%2F%2Fnowhere.example%2F" in unknown.links
    bad = await capsule.client.get("/capsule?" + quote("a b"))
    assert "that URL cannot be used" in bad.text


async def test_known_excludes_publish_every_rule_with_its_reason(capsule):
    reply = await capsule.client.get("/known-excludes")
    assert reply.status == 20
    rules = [rule for section in builtin_rules() for rule in section.rules]
    for rule in rules:
        assert f"* {rule.pattern} — {rule.reason}" in reply.text
    for section in builtin_rules():
        assert f"## {section.title}" in reply.text


async def test_known_excludes_publish_the_operators_removals_too(
    nursery, empty_settings, tls_context
):
    engine = open_store(empty_settings.db_url)
    forget(engine, "gone.example", "removal requested by the author")
    forget(engine, "gemini://pubnix.example/~ann/", "private diary")
    engine.dispose()
    running = await start_capsule(nursery, empty_settings, tls_context)
    reply = await running.client.get("/known-excludes")
    assert reply.status == 20
    assert f"## {REMOVALS_TITLE}" in reply.text
    assert "* gemini://gone.example/ — removal requested by the author" in reply.text
    assert "* gemini://pubnix.example/~ann/ — private diary" in reply.text
    first_builtin = builtin_rules()[0].rules[0]
    assert f"* {first_builtin.pattern} — {first_builtin.reason}" in reply.text


def test_the_removals_listed_are_capped(empty_settings):
    engine = open_store(empty_settings.db_url)
    for n in range(5):
        forget(engine, f"gone{n}.example", "asked")
    with Session(engine) as session:
        (section,) = operator_removals(session, limit=3)
    engine.dispose()
    assert len(section.rules) == 3
    assert section.title.endswith("(the first 3 of 5)")


async def test_add_seed_stores_a_request_for_the_crawler(capsule, full_settings):
    reply = await capsule.client.answer("/add-seed", "new-capsule.example/start")
    assert reply.status == 20
    assert "Thank you! The URL is queued." in reply.text
    assert "=> gemini://new-capsule.example/start" in reply.text
    again = await capsule.client.get("/add-seed?" + quote("gemini://NEW-capsule.example/start"))
    assert "already waiting" in again.text
    known = await capsule.client.get("/add-seed?" + quote(space.ALPHA))
    assert "already knows" in known.text
    refused = await capsule.client.get("/add-seed?" + quote("gemini://127.0.0.1/"))
    assert "not a public address" in refused.text
    web = await capsule.client.get("/add-seed?" + quote("https://example.org/"))
    assert "only gemini:// URLs" in web.text
    engine = open_store(full_settings.db_url)
    with Session(engine) as session:
        rows = session.scalars(
            select(SeedRequest).where(SeedRequest.url == "gemini://new-capsule.example/start")
        ).all()
    engine.dispose()
    assert [(row.source, row.processed_at) for row in rows] == [("capsule", None)]


@pytest.mark.parametrize(
    ("path", "title"),
    [
        ("/about", "About this search capsule"),
        ("/documentation/searching", "Searching"),
        ("/documentation/indexing", "How the crawler and the indexer work"),
    ],
)
async def test_documentation(capsule, path, title):
    reply = await capsule.client.get(path)
    assert (reply.status, reply.meta) == (20, GEMTEXT + "; lang=en")
    assert reply.gemtext.title == title
    for link in reply.links:
        if link.startswith("/"):
            assert (await capsule.client.get(link)).status in (10, 20), link


async def test_robots_txt_keeps_other_crawlers_out_of_dynamic_pages(capsule):
    reply = await capsule.client.get("/robots.txt")
    assert (reply.status, reply.meta) == (20, "text/plain; charset=utf-8")
    policy = RobotsPolicy.parse(reply.text)
    for agent in ("indexer", "researcher", "sextant", "somebot"):
        for path in ["/search?x", "/v/search/2?x", "/backlinks?x", "/capsule?x", "/add-seed?x"]:
            assert not policy.allowed(path, (agent, "*")), (agent, path)
        for path in ["/", "/about", "/known-hosts", "/statistics", "/documentation/indexing"]:
            assert policy.allowed(path, (agent, "*")), (agent, path)


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/about/", "/about"),
        ("/statistics//", "/statistics"),
        ("/index.gmi", "/"),
        ("/v", "/v/search"),
        ("/v/", "/v/search"),
        ("/documentation", "/documentation/searching"),
        ("/documentation/", "/documentation/searching"),
        ("/backlinks/?x", "/backlinks?x"),
        ("/./about", None),  # normalized by the URL parser: served directly
    ],
)
async def test_canonical_redirects(capsule, path, target):
    reply = await capsule.client.get(path)
    if target is None:
        assert reply.status == 20
    else:
        assert (reply.status, reply.meta) == (31, capsule.client.origin + target)


@pytest.mark.parametrize("path", ["/nothing", "/search/x/y", "/about.gmi", "/v/x", "/robots.txt/x"])
async def test_unknown_paths(capsule, path):
    reply = await capsule.client.get(path)
    assert reply.status == 51
    assert reply.meta == "no such page here; the start page links to all of them"


# --- nothing crawled, nothing indexed -------------------------------------------------------


async def test_empty_store_and_no_index_give_friendly_pages(empty_capsule):
    client = empty_capsule.client
    home = await client.get("/")
    assert "has not visited any capsule yet" in home.text
    search = await client.get("/search?anything")
    assert search.status == 20
    assert search.gemtext.title == "Nothing to search yet"
    for path, sentence in [
        ("/v/search?anything", "Nothing to search yet"),
        ("/known-hosts", "No capsules yet"),
        ("/newest-hosts", "No capsules yet"),
        ("/newest-pages", "No pages yet"),
        ("/known-feeds", "No feeds found yet"),
        ("/backlinks?example.org", "No page the crawler has seen links here."),
        ("/capsule?example.org", "The crawler knows no capsule at example.org."),
        ("/statistics", "* indexable pages: 0"),
    ]:
        reply = await client.get(path)
        assert reply.status == 20, path
        assert sentence in reply.text, (path, reply.text)
