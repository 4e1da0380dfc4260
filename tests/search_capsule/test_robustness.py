"""The capsule under abuse: malformed requests, slow and vanishing clients, crowds, overload."""

from __future__ import annotations

import dataclasses
import random
import socket
import struct
import time
from urllib.parse import quote

import pytest
import trio
from sqlalchemy.orm import Session

from gemserve.server import Request
from indexer.build import run_index
from search_capsule.services import CapsuleLimits
from sextant import urls
from sextant.store import utcnow
from sextant.store.migrate import open_store
from sextant.tls import client_context
from tests.search_capsule import space
from tests.search_capsule.client import from_address
from tests.search_capsule.conftest import (
    FAST_SERVER,
    HOSTNAME,
    NOTES,
    settings_in,
    start_capsule,
)
from tests.search_capsule.gate import occupied


def wire(origin: str, rest: str) -> bytes:
    return (origin + rest).encode("utf-8") + b"\r\n"


@pytest.mark.parametrize(
    ("line", "status", "meta_part"),
    [
        (b"{origin}/" + b"a" * 1100 + b"\r\n", 59, "longer than 1024"),
        (b"{origin}/search?" + b"%20" * 400 + b"\r\n", 59, "longer than 1024"),
        (b"{origin}/\n", 59, "bare LF"),
        (b"{origin}/search?\xff\xfe\r\n", 59, "UTF-8"),
        (b"\xef\xbb\xbf{origin}/\r\n", 59, "byte order mark"),
        (b"/search?relative\r\n", 59, "absolute URL"),
        (b"search.test/\r\n", 59, "absolute URL"),
        (b"gemini://user:pw@{authority}/\r\n", 59, "userinfo"),
        (b"{origin}/about#fragment\r\n", 59, "fragment"),
        (b"#only-a-fragment\r\n", 59, "absolute URL"),
        (b"\r\n", 59, "empty"),
        (b"{origin}/sea\x00rch\r\n", 59, "control"),
        # A raw space is percent-encoded by the URL parser, and no page has that name.
        (b"{origin}/a b\r\n", 51, "no such page"),
        (b"gemini://\r\n", 59, "host"),
        (b"gemini://[::1/\r\n", 59, "host"),
        (b"https://{authority}/\r\n", 53, "gemini://"),
        (b"titan://{authority}/\r\n", 53, "gemini://"),
        (b"gemini://elsewhere.test:{port}/\r\n", 53, "does not serve"),
        (b"gemini://{hostname}:{wrong_port}/\r\n", 53, "does not serve"),
        (b"gemini://{hostname}/\r\n", 53, "does not serve"),  # port 1965 is not ours
        # Our own refusals: input that is not UTF-8 once percent-decoded.
        (b"{origin}/search?caf%E9\r\n", 59, "UTF-8"),
        (b"{origin}/search?%C3\r\n", 59, "UTF-8"),
        (b"{origin}/backlinks?a%00b\r\n", 59, "control"),
    ],
)
async def test_malformed_and_foreign_requests(capsule, line, status, meta_part):
    _host, port = capsule.address
    filled = (
        line.replace(b"{origin}", f"gemini://{HOSTNAME}:{port}".encode())
        .replace(b"{authority}", f"{HOSTNAME}:{port}".encode())
        .replace(b"{hostname}", HOSTNAME.encode())
        .replace(b"{wrong_port}", str(port + 1 if port < 65535 else port - 1).encode())
        .replace(b"{port}", str(port).encode())
    )
    reply = await capsule.client.raw(filled)
    assert reply.status == status, (reply.status, reply.meta)
    if meta_part:
        assert meta_part in reply.meta


async def test_our_host_names_are_served(capsule):
    _host, port = capsule.address
    for origin in (
        f"gemini://{HOSTNAME}:{port}",
        f"gemini://SEARCH.test:{port}",
        capsule.client.origin,
    ):
        reply = await capsule.client.raw(wire(origin, "/about"))
        assert reply.status == 20, origin


async def test_random_requests_never_break_the_app(capsule):
    """Whatever the path and query, the app answers with a deliberate status (never 42)."""
    rng = random.Random(1965)
    alphabet = ["search", "v", "1", "02", "%2F", "%", "%zz", "..", ".", "~", "é", "+", "?", "/"]
    app = capsule.app
    statuses = set()
    for _ in range(400):
        path = "/" + "/".join(rng.choices(alphabet, k=rng.randint(0, 5)))
        query = "".join(rng.choices([*alphabet, "%FF", "%C3%A9", "%0A", '"', "(", "-", ":"], k=3))
        raw = f"gemini://{HOSTNAME}{path}?{query}" if rng.random() < 0.7 else f"gemini://x{path}"
        try:
            url = urls.parse(raw)
        except urls.InvalidURL:
            continue
        response = await app(Request(url=url, raw=raw, peer=("127.0.0.1", 1)))
        statuses.add(response.status)
        assert response.status in {10, 20, 30, 31, 51, 59}, (raw, response)
    assert {10, 20, 51} <= statuses


async def test_request_without_crlf_is_answered_after_the_timeout(capsule):
    started = time.monotonic()
    reply = await capsule.client.raw(wire(capsule.client.origin, "/")[:-2], timeout=30)
    assert reply.status == 59
    assert "not received within 1 seconds" in reply.meta
    assert 0.9 < time.monotonic() - started < 10  # 10 x the timeout: a loaded machine


#: Long enough that "answered while the slow clients were still connected" cannot be luck
#: of timing: an ordinary search takes a few hundredths of a second.
SLOW_CLIENT_TIMEOUT = 2.0


async def test_slow_clients_are_cut_and_do_not_delay_others(nursery, full_settings, tls_context):
    limits = dataclasses.replace(FAST_SERVER, request_timeout=SLOW_CLIENT_TIMEOUT)
    capsule = await start_capsule(nursery, full_settings, tls_context, server_limits=limits)
    request = wire(capsule.client.origin, "/search?solar")
    outcomes: dict[str, object] = {}
    dripping, silent = trio.Event(), trio.Event()

    async def dripper() -> None:
        stream = trio.SSLStream(
            await trio.open_tcp_stream(*capsule.address), client_context(), server_hostname=None
        )
        started = time.monotonic()
        received = b""
        try:
            await stream.do_handshake()
            # A byte every 0.25 s: about 11 s for the whole request, if nothing cut it.
            for byte in request:
                await stream.send_all(bytes([byte]))
                dripping.set()
                with trio.move_on_after(0.25):
                    received += await stream.receive_some(4096)
                    break  # the server answered (or closed) before the request was complete
        except trio.BrokenResourceError:
            pass  # cut while still dripping
        finally:
            await trio.aclose_forcefully(stream)
        outcomes["drip"] = (received, time.monotonic(), time.monotonic() - started)

    async def silent_tcp() -> None:
        # Connects but never even starts the TLS handshake.
        sock = trio.socket.socket()
        await sock.connect(capsule.address)
        silent.set()
        started = time.monotonic()
        with trio.fail_after(10 * SLOW_CLIENT_TIMEOUT):
            data = await sock.recv(100)
        outcomes["silent"] = (data, time.monotonic(), time.monotonic() - started)
        sock.close()

    async def normal() -> None:
        await dripping.wait()
        await silent.wait()
        reply = await capsule.client.get("/search?solar")
        outcomes["normal"] = (reply.status, time.monotonic())

    try:
        async with trio.open_nursery() as clients:
            clients.start_soon(dripper)
            clients.start_soon(silent_tcp)
            clients.start_soon(normal)
    finally:
        capsule.app.close()
    status, answered = outcomes["normal"]
    assert status == 20
    drip, drip_cut, drip_elapsed = outcomes["drip"]
    data, silent_cut, silent_elapsed = outcomes["silent"]
    # Not delayed by them: answered while both slow clients still held their connections.
    assert answered < min(drip_cut, silent_cut)
    within = f"59 request not received within {SLOW_CLIENT_TIMEOUT:g} seconds"
    assert drip == b"" or drip.startswith(within.encode()), drip
    # Cut by the request timeout, not served once the 11 s drip was over.
    assert SLOW_CLIENT_TIMEOUT - 0.1 < drip_elapsed < 4 * SLOW_CLIENT_TIMEOUT
    assert data == b""
    assert SLOW_CLIENT_TIMEOUT - 0.1 < silent_elapsed < 10 * SLOW_CLIENT_TIMEOUT


async def test_two_hundred_concurrent_clients(capsule):
    queries = ["lighthouse", "solar", "Bücher", "alpha", "radio", "keeper", "station", "zzz"]
    paths = [f"/search?{quote(queries[n % len(queries)])}" for n in range(150)]
    paths += [f"/search/{2 + n % 2}?lighthouse" for n in range(20)]
    paths += ["/", "/statistics", "/known-hosts", "/about", "/robots.txt"] * 6
    assert len(paths) == 200
    replies: dict[int, object] = {}

    async def fetch(n: int, path: str) -> None:
        replies[n] = await capsule.client.get(path, timeout=30)

    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        for n, path in enumerate(paths):
            nursery.start_soon(fetch, n, path)
    elapsed = time.monotonic() - started
    assert len(replies) == 200
    assert all(reply.status == 20 for reply in replies.values())
    lighthouse = [replies[n] for n, path in enumerate(paths) if path == "/search?lighthouse"]
    assert all(f"{NOTES} results · page 1 of 3" in reply.text for reply in lighthouse)
    assert elapsed < 20  # 2-3 s on a busy two-core machine: only a server that stalls fails


async def test_clients_that_vanish_mid_exchange_do_not_hurt_the_server(capsule):
    request = wire(capsule.client.origin, "/known-excludes")

    async def vanish(after: str) -> None:
        stream = trio.SSLStream(
            await trio.open_tcp_stream(*capsule.address), client_context(), server_hostname=None
        )
        sock = stream.transport_stream.socket
        # SO_LINGER 0: closing sends a TCP reset, the rudest way to leave.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if after != "connect":
            await stream.do_handshake()
        if after in ("request", "header"):
            await stream.send_all(request)
        if after == "header":
            assert (await stream.receive_some(10))[:2] == b"20"
        sock.close()

    for after in ("connect", "handshake", "request", "header") * 5:
        await vanish(after)
    reply = await capsule.client.get("/known-excludes")
    assert reply.status == 20
    assert reply.wire.close_notify


async def test_the_throttle_slows_down_one_busy_client_only(nursery, full_settings, tls_context):
    # Search time costs next to nothing here: this test is about the count of requests.
    limits = CapsuleLimits(rate_per_client=0.5, burst_per_client=3, search_cost_unit=60.0)
    running = await start_capsule(nursery, full_settings, tls_context, limits=limits)
    statuses = [(await running.client.get("/search?solar")).status for _ in range(4)]
    assert statuses == [20, 20, 20, 44]
    slow = await running.client.get("/known-hosts")
    assert (slow.status, slow.meta) == (44, "2")
    # Pages that cost nothing are never throttled.
    assert (await running.client.get("/about")).status == 20
    # Another client address still gets its full burst.
    other = await from_address("127.0.0.2", running.address, wire(running.client.origin, "/"))
    assert other.status == 20


async def test_overload_is_refused_with_41_instead_of_queueing(nursery, full_settings, tls_context):
    limits = CapsuleLimits(rate_per_client=None, search_workers=1, store_workers=1, max_waiting=0)
    running = await start_capsule(nursery, full_settings, tls_context, limits=limits)
    services = running.app.services
    async with occupied(services.search.workers):  # a long search holds the only thread
        busy = await running.client.get("/search?solar")
        assert (busy.status, busy.meta) == (
            41,
            "the search capsule is busy; please try again in a few seconds",
        )
    assert (await running.client.get("/search?solar")).status == 20
    async with occupied(services.store.workers):
        assert (await running.client.get("/known-hosts")).status == 41
        assert (await running.client.get("/about")).status == 20
    assert (await running.client.get("/known-hosts")).status == 20


async def test_identical_queries_are_answered_from_the_cache(capsule):
    search = capsule.app.services.search
    first = await capsule.client.get("/search?lighthouse")
    again = await capsule.client.get("/search?lighthouse")
    assert search.computed == 1
    assert again.text == first.text
    await capsule.client.get("/search/2?lighthouse")
    await capsule.client.get("/v/search?lighthouse")  # the verbose view reuses the results
    assert search.computed == 2
    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(capsule.client.get, "/search?keeper")
    assert search.computed == 3


async def test_a_new_index_is_picked_up_and_the_cache_follows_it(nursery, tmp_path, tls_context):
    settings = settings_in(tmp_path / "later")
    running = await start_capsule(nursery, settings, tls_context)
    before = await running.client.get("/search?lighthouse")
    assert before.gemtext.title == "Nothing to search yet"
    engine = open_store(settings.db_url)
    space.populate(engine)
    space.add_notes(engine, 3)
    await trio.to_thread.run_sync(run_index, settings.index_dir, settings.db_url)
    first = await running.client.get("/search?lighthouse")
    assert "3 results · page 1 of 1" in first.text
    # More notes arrive and an incremental index run commits them: no stale cached page.
    more = space.capsule("more.example", last_success_at=space.NOW)
    with Session(engine) as session:
        session.add(more)
        session.add(
            space.page(
                "gemini://more.example/",
                more,
                title="Another lighthouse",
                body="lighthouse",
                updated_at=utcnow(),  # what the crawler does: past the index's watermark
            )
        )
        session.commit()
    engine.dispose()
    await trio.to_thread.run_sync(run_index, settings.index_dir, settings.db_url)
    after = await running.client.get("/search?lighthouse")
    assert "4 results · page 1 of 1" in after.text
