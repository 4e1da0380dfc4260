"""The crawler connects to no loopback or private address unless the operator named the host.

Every address here is loopback (the spellings differ, the machine does not): a plain TCP
listener on 127.0.0.1 counts the connections it receives, and a crawled capsule on another
loopback address (pinned with --resolve, as the operator would) links and redirects to the
listener under every spelling the C library accepts. Refusals of private ranges proper are
tested on the pure functions (tests/test_addresses.py): no packet leaves the machine here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import trio

from crawler.fetch import fetch
from crawler.options import AllowedHosts, CrawlOptions
from crawler.resolver import Resolver
from gemserve.server import Response
from sextant.errors import AddressRefused, ConnectFailed
from sextant.urls import parse
from tests.crawler.crawling import crawl
from tests.crawler.test_show import run_cli
from tests.gemini_server import ScriptedCapsule, gemtext

# Spellings of 127.0.0.1 (and names for it) that a hostile page may link to.
LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "0x7f.1",
    "2130706433",
    "localhost",
    "LocalHost.",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
]


@dataclass
class Listener:
    """A plain TCP listener on 127.0.0.1 that counts the connections it accepts."""

    port: int
    accepted: int = 0


@pytest.fixture
async def listener(nursery: trio.Nursery) -> AsyncIterator[Listener]:
    (sock,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    counter = Listener(sock.socket.getsockname()[1])

    scope = trio.CancelScope()

    async def count() -> None:
        with scope:
            while True:
                stream = await sock.accept()
                counter.accepted += 1
                await stream.aclose()

    nursery.start_soon(count)
    yield counter
    scope.cancel()
    await sock.aclose()


def hostile_capsule(port: int) -> ScriptedCapsule:
    links = "".join(f"=> gemini://{spelling}:{port}/link\n" for spelling in LOOPBACK_SPELLINGS)
    site = ScriptedCapsule("page.test")
    site.routes(
        {
            "/": gemtext(f"# Links to the crawler's own machine\n{links}=> /go\n"),
            "/go": Response.redirect(f"gemini://0x7f.1:{port}/redirected"),
        }
    )
    return site


async def test_links_redirects_and_seeds_to_loopback_are_refused_without_a_connection(
    tmp_path, capsules, listener
):
    running = await capsules(hostile_capsule(listener.port))
    seed = f"gemini://0177.1:{listener.port}/seed"
    crawled = await crawl(tmp_path, running, running["page.test"].url("/"), seed)

    assert listener.accepted == 0
    pages = crawled.pages()
    refused = {
        str(parse(f"gemini://{spelling}:{listener.port}/link")) for spelling in LOOPBACK_SPELLINGS
    } | {f"gemini://0x7f.1:{listener.port}/redirected", seed}
    # "LocalHost." normalizes to "localhost", and the two mapped forms to one.
    assert len(refused) == len(LOOPBACK_SPELLINGS)
    for url in refused:
        page = pages[url]
        assert page.state == "excluded", url
        assert page.error_message.startswith("not contacted: "), page.error_message
        assert "loopback address" in page.error_message
        assert "--allow-private" in page.error_message
    assert pages[running["page.test"].url("/")].state == "ok"  # the pinned capsule is crawled
    assert not any(attempt.address == "127.0.0.1" for attempt in crawled.attempts())

    shown = run_cli(tmp_path, "show", "--no-body", f"gemini://127.1:{listener.port}/link")
    assert shown.exit_code == 0, shown.output
    assert (
        "error           excluded: not contacted: 127.1 resolves to 127.0.0.1, "
        "a loopback address (127.0.0.0/8)"
    ) in shown.output


async def test_allow_private_lets_the_same_links_through(tmp_path, capsules, listener):
    """The counterpart: the listener does see a crawler that was told it may connect."""
    running = await capsules(hostile_capsule(listener.port))
    await crawl(tmp_path, running, running["page.test"].url("/"), allow_private=True)
    assert listener.accepted >= 1


async def test_a_host_named_with_allow_host_may_be_private(tmp_path, capsules, listener):
    running = await capsules(hostile_capsule(listener.port))
    allowed = AllowedHosts.parse(["page.test", f"localhost:{listener.port}"])
    crawled = await crawl(tmp_path, running, running["page.test"].url("/"), allow_hosts=allowed)
    assert listener.accepted >= 1  # localhost:PORT was named, so it was asked
    # 127.1 was not named: outside --allow-host, never contacted.
    assert crawled.page(f"gemini://127.1:{listener.port}/link").state == "new"


def test_only_an_exact_allow_host_names_a_host():
    options = CrawlOptions(allow_hosts=AllowedHosts.parse(["*.test", "named.test:1966"]))
    assert options.allow_hosts.allows("any.test", 1965)
    assert not options.may_reach_private("any.test", 1965)  # a wildcard names no one
    assert options.may_reach_private("named.test", 1966)
    assert not options.may_reach_private("named.test", 1965)  # another port
    assert CrawlOptions(allow_private=True).may_reach_private("any.test", 1965)


@pytest.mark.parametrize("host", [s.strip("[]") for s in LOOPBACK_SPELLINGS if s != "LocalHost."])
async def test_resolver_refuses_every_spelling_unless_named(host):
    url = parse(f"gemini://{'[' + host + ']' if ':' in host else host}:1965/")
    with pytest.raises(AddressRefused, match="loopback address") as refused:
        await Resolver().resolve(url.host, url.port)
    assert isinstance(refused.value, ConnectFailed)
    allowed = Resolver(may_reach_private=lambda h, p: (h, p) == (url.host, url.port))
    assert await allowed.resolve(url.host, url.port) in ("127.0.0.1", "::1", "::ffff:7f00:1")
    pinned = Resolver({(url.host, 1965): "127.0.0.3"})
    assert await pinned.resolve(url.host, 1965) == "127.0.0.3"


async def test_fetch_never_resolves_a_name_itself(listener):
    """Connecting to a name would connect to an address nobody checked."""
    url = parse(f"gemini://localhost:{listener.port}/")
    result = await fetch(url, address="localhost")
    assert isinstance(result.error, ConnectFailed)
    assert "is not an IP address" in str(result.error)
    assert listener.accepted == 0
