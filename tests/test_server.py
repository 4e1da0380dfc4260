"""The generic Gemini server, exercised through real TLS on loopback."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import time
from functools import partial

import pytest
import trio

from gemserve.admission import client_key, share_of
from gemserve.server import Request, Response, ServerLimits, serve, serve_raw
from sextant.errors import MalformedHeader
from sextant.tls import client_context, make_self_signed, server_context_from_pem
from tests.wire_client import WireReply, connect, exchange, read_until_end, request

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def tls_context() -> ssl.SSLContext:
    return server_context_from_pem(*make_self_signed(["capsule.test", HOST]))


async def echo(request: Request) -> Response:
    return Response.gemtext(f"# {request.url}\n{request.raw}\n{request.peer[0]}\n")


async def start(nursery, tls_context, app=echo, **kwargs) -> tuple[str, int]:
    port = await nursery.start(
        partial(serve, app, host=HOST, port=0, ssl_context=tls_context, **kwargs)
    )
    return (HOST, port)


async def test_normal_request(nursery, tls_context):
    address = await start(nursery, tls_context)
    reply = await request(
        address, f"gemini://Capsule.Test:{address[1]}/a/./b?q", sni="capsule.test"
    )
    assert reply.header == b"20 text/gemini; charset=utf-8\r"
    url = f"gemini://capsule.test:{address[1]}/a/b?q"
    assert reply.body.decode() == f"# {url}\ngemini://Capsule.Test:{address[1]}/a/./b?q\n{HOST}\n"
    assert reply.close_notify, reply.ended


def url_of(address, path="/"):
    return f"gemini://{address[0]}:{address[1]}{path}"


@pytest.mark.parametrize(
    ("line", "status", "meta_part"),
    [
        (b"gemini://{host}/" + b"a" * 1100 + b"\r\n", 59, "longer than 1024"),
        (b"gemini://{host}/\n", 59, "bare LF"),
        (b"gemini://{host}/\xff\xfe\r\n", 59, "UTF-8"),
        (b"/relative/path\r\n", 59, "absolute URL"),
        (b"gemini://user@{host}/\r\n", 59, "userinfo"),
        (b"\r\n", 59, "empty"),
        (b"gemini://{host}/a b\tc\r\n", 59, "control"),
        (b"gemini://{host}/#frag\r\n", 59, "fragment"),
        (b"gemini://[::1/\r\n", 59, "invalid host"),
        (b"https://{host}/\r\n", 53, "gemini://"),
        (b"gopher://{host}/\r\n", 53, "gemini://"),
        (b"gemini://elsewhere.test:{port}/\r\n", 53, "does not serve"),
        (b"gemini://capsule.test:1/\r\n", 53, "does not serve"),
        (b"gemini://capsule.test/\r\n", 53, "does not serve"),  # default port 1965 is not ours
    ],
)
async def test_malformed_and_foreign_requests_are_refused(
    nursery, tls_context, line, status, meta_part
):
    address = await start(nursery, tls_context, hostnames=["capsule.test"])
    wire = line.replace(b"{host}", f"capsule.test:{address[1]}".encode())
    wire = wire.replace(b"{port}", str(address[1]).encode())
    reply = await exchange(address, wire)
    assert reply.status == status
    assert meta_part in reply.meta
    assert reply.body == b""
    assert reply.close_notify


async def test_request_length_boundary_is_exactly_1024_bytes(nursery, tls_context):
    address = await start(nursery, tls_context)
    prefix = url_of(address, "/")
    longest = prefix + "a" * (1024 - len(prefix))
    assert (await request(address, longest)).status == 20
    assert (await request(address, longest + "a")).status == 59


async def test_hostnames_compare_as_punycode_lower_case(nursery, tls_context):
    address = await start(nursery, tls_context, hostnames=["Bücher.Test", "::1", HOST])
    for host in ("xn--bcher-kva.test", "BÜCHER.test", "[::1]", HOST):
        reply = await request(address, f"gemini://{host}:{address[1]}/")
        assert reply.status == 20, host


async def test_no_crlf_is_answered_with_59_after_the_request_timeout(nursery, tls_context):
    address = await start(nursery, tls_context, limits=ServerLimits(request_timeout=0.3))
    reply = await exchange(address, url_of(address).encode())  # no terminator, then wait
    assert reply.status == 59
    assert "within 0.3 seconds" in reply.meta
    assert 0.25 < reply.elapsed < 3.0  # 10 x the timeout: room for a loaded machine


async def test_slow_client_is_cut_by_the_request_timeout(nursery, tls_context):
    address = await start(nursery, tls_context, limits=ServerLimits(request_timeout=0.3))
    stream = await connect(address)
    reply = WireReply(started=time.monotonic())
    async with trio.open_nursery() as inner:

        async def drip() -> None:
            # Faster than the timeout byte by byte, about 13 s for the whole line.
            for byte in url_of(address, "/" + "a" * 100).encode():
                await stream.send_all(bytes([byte]))
                await trio.sleep(0.1)

        inner.start_soon(drip)
        await read_until_end(stream, reply)
        inner.cancel_scope.cancel()
    reply.finished = time.monotonic()
    await trio.aclose_forcefully(stream)
    assert reply.status == 59
    # Cut by the 0.3 s timeout for the whole line, not one that restarts with each byte.
    assert 0.25 < reply.elapsed < 3.0


async def test_client_that_never_handshakes_is_dropped(nursery, tls_context):
    address = await start(nursery, tls_context, limits=ServerLimits(request_timeout=0.3))
    tcp = await trio.open_tcp_stream(*address)
    started = time.monotonic()
    with trio.fail_after(10):
        assert await tcp.receive_some(100) == b""  # the server closed the TCP connection
    assert 0.25 < time.monotonic() - started < 3.0  # 10 x the timeout: a loaded machine
    await tcp.aclose()


async def test_app_exception_becomes_42_and_the_server_goes_on(nursery, tls_context, caplog):
    async def app(request: Request) -> Response:
        if request.url.path == "/boom":
            raise RuntimeError("app bug")
        if request.url.path == "/wrong-type":
            return "not a response"  # type: ignore[return-value]
        return Response.gemtext("fine")

    address = await start(nursery, tls_context, app=app)
    with caplog.at_level(logging.ERROR, logger="gemserve.server"):
        boom = await request(address, url_of(address, "/boom"))
        wrong = await request(address, url_of(address, "/wrong-type"))
    assert (boom.status, boom.meta, boom.body) == (42, "internal server error", b"")
    assert boom.close_notify
    assert wrong.status == 42
    assert "app bug" in caplog.text
    assert (await request(address, url_of(address, "/"))).body == b"fine"


async def test_streaming_body_arrives_in_pieces(nursery, tls_context):
    async def chunks():
        for number in range(4):
            yield f"chunk {number}\n".encode()
            await trio.sleep(0.05)

    async def app(request: Request) -> Response:
        return Response.success(chunks(), "text/plain")

    address = await start(nursery, tls_context, app=app)
    reply = await request(address, url_of(address))
    assert reply.header == b"20 text/plain\r"
    assert reply.body == b"".join(f"chunk {n}\n".encode() for n in range(4))
    assert len(reply.chunks) >= 4
    # Three 0.05 s pauses as the client saw them: 0.1 allows for a first read run late.
    assert reply.chunks[-1][0] - reply.chunks[0][0] >= 0.1
    assert reply.close_notify


async def test_body_failing_half_way_ends_without_close_notify(nursery, tls_context):
    async def chunks():
        yield b"first part\n"
        raise OSError("disk went away")

    async def app(request: Request) -> Response:
        return Response.success(chunks(), "text/plain")

    address = await start(nursery, tls_context, app=app)
    reply = await request(address, url_of(address))
    assert reply.body == b"first part\n"
    assert not reply.close_notify
    assert reply.ended == "eof"


async def test_client_leaving_mid_response_does_not_affect_others(nursery, tls_context):
    cleanups = []
    all_cleaned = trio.Event()

    async def endless():
        try:
            while True:
                yield b"x" * 16384
        finally:
            cleanups.append(True)
            if len(cleanups) == 3:
                all_cleaned.set()

    async def app(request: Request) -> Response:
        if request.url.path == "/endless":
            return Response.success(endless(), "text/plain")
        return Response.gemtext("still here")

    address = await start(nursery, tls_context, app=app)

    async def leave() -> None:
        line = url_of(address, "/endless").encode() + b"\r\n"
        reply = await exchange(address, line, max_bytes=100_000)
        assert reply.data.startswith(b"20 text/plain")
        assert len(reply.data) >= 100_000

    async def stay() -> None:
        reply = await request(address, url_of(address, "/ok"))
        assert reply.body == b"still here"
        assert reply.close_notify

    async with trio.open_nursery() as inner:
        for _ in range(3):
            inner.start_soon(leave)
        inner.start_soon(stay)
    with trio.fail_after(5):
        await all_cleaned.wait()  # each generator's cleanup ran once its client was gone
    await stay()


async def test_garbage_instead_of_tls_does_not_disturb_the_server(nursery, tls_context):
    address = await start(nursery, tls_context)
    tcp = await trio.open_tcp_stream(*address)
    await tcp.send_all(b"GET / HTTP/1.0\r\n\r\n")
    with trio.fail_after(3):
        answer = await tcp.receive_some(1000)  # a TLS alert or nothing, then the close
        while answer:
            answer = await tcp.receive_some(1000)
    await tcp.aclose()
    assert (await request(address, url_of(address))).status == 20


async def test_200_concurrent_clients_are_all_answered(nursery, tls_context):
    address = await start(nursery, tls_context)
    replies: dict[int, WireReply] = {}

    async def one(number: int) -> None:
        replies[number] = await request(address, url_of(address, f"/{number}"), timeout=30)

    async with trio.open_nursery() as inner:
        for number in range(200):
            inner.start_soon(one, number)
    assert len(replies) == 200
    for number, reply in replies.items():
        assert reply.status == 20
        assert f"/{number}\n".encode() in reply.body
        assert reply.close_notify


async def test_max_connections_queues_further_clients(nursery, tls_context):
    limits = ServerLimits(request_timeout=0.4, max_connections=1, close_linger=0.1)
    address = await start(nursery, tls_context, limits=limits)
    hog = await connect(address)
    await hog.do_handshake()  # takes the only slot and then says nothing
    started = time.monotonic()
    queued = await request(address, url_of(address, "/queued"))
    assert queued.status == 20
    # Served only after the silent client was cut by the request timeout.
    assert time.monotonic() - started >= 0.3
    await trio.aclose_forcefully(hog)


def _blocking_fetch(address: tuple[str, int], line: bytes) -> tuple[bytes, str]:
    """The standard library's view of the close: b'' from recv means a TLS close_notify."""
    context = client_context()
    raw = socket.create_connection(address, timeout=5)
    with context.wrap_socket(raw, suppress_ragged_eofs=False) as tls:
        tls.sendall(line)
        data = b""
        try:
            while chunk := tls.recv(65536):
                data += chunk
        except ssl.SSLEOFError:
            return data, "eof without close_notify"
        return data, "close_notify"


async def test_close_notify_is_sent_as_seen_by_the_stdlib(nursery, tls_context):
    address = await start(nursery, tls_context)
    data, ending = await trio.to_thread.run_sync(
        _blocking_fetch, address, url_of(address).encode() + b"\r\n"
    )
    assert data.startswith(b"20 ")
    assert ending == "close_notify"


async def test_tcp_nodelay_is_set_on_accepted_connections(nursery, tls_context):
    seen: list[int] = []

    async def handler(stream: trio.SSLStream) -> None:
        seen.append(
            stream.transport_stream.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        )
        await stream.aclose()

    port = await nursery.start(
        partial(serve_raw, handler, host=HOST, port=0, ssl_context=tls_context)
    )
    reply = await exchange((HOST, port), b"")
    assert reply.close_notify
    assert seen == [1]


def _first_byte_seconds(address: tuple[str, int], line: bytes) -> float:
    """Time from sending the request to the reply's first byte, for a client that leaves
    Nagle's algorithm on (Python's ``socket``, as AV-98 and agunua use it)."""
    context = client_context()
    with socket.create_connection(address, timeout=5) as raw:
        assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        with context.wrap_socket(raw) as tls:
            started = time.perf_counter()
            tls.sendall(line)
            tls.recv(1)
            return time.perf_counter() - started


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="Linux TCP option")
async def test_a_client_with_nagle_on_gets_its_reply_without_a_delayed_ack_stall(
    nursery, tls_context
):
    # The client's request follows its TLS Finished, so Nagle holds it until that is
    # acknowledged; a server in delayed-ACK mode took 40 ms to, on every request.
    address = await start(nursery, tls_context)
    line = url_of(address).encode() + b"\r\n"
    delays = [await trio.to_thread.run_sync(_first_byte_seconds, address, line) for _ in range(5)]
    assert sorted(delays)[2] < 0.02, delays


async def test_raw_handler_failures_stay_in_their_connection(nursery, tls_context):
    async def handler(stream: trio.SSLStream) -> None:
        line = await stream.receive_some(100)
        if line.startswith(b"crash"):
            raise RuntimeError("handler bug")
        if line.startswith(b"leave"):
            await stream.send_all(b"20 text/plain\r\nleft open")
            return  # no aclose: the listener closes it, without close_notify
        await stream.send_all(b"ok")
        await stream.aclose()

    port = await nursery.start(
        partial(serve_raw, handler, host=HOST, port=0, ssl_context=tls_context)
    )
    crashed = await exchange((HOST, port), b"crash")
    assert crashed.data == b""
    assert not crashed.close_notify
    left = await exchange((HOST, port), b"leave")
    assert left.body == b"left open"
    assert left.ended == "eof"
    fine = await exchange((HOST, port), b"hello")
    assert fine.data == b"ok"
    assert fine.close_notify


def test_response_validates_header_and_body():
    with pytest.raises(ValueError, match="cannot carry a body"):
        Response(51, "not found", b"body")
    with pytest.raises(MalformedHeader):
        Response(20, "text/gemini\r\n20 text/plain")
    with pytest.raises(MalformedHeader):
        Response(200, "OK")
    assert Response.gemtext("hi", lang="de").meta == "text/gemini; charset=utf-8; lang=de"
    assert Response.redirect("/x", permanent=True).status == 31
    assert Response.input("Query?", sensitive=True).status == 11
    assert Response.slow_down(30).meta == "30"
    assert Response.success(b"%PDF", "application/pdf").header == b"20 application/pdf\r\n"


@pytest.mark.parametrize("linger", [2.0, 0.0])
async def test_lingering_close_keeps_unread_input_from_resetting_the_reply(
    nursery, tls_context, linger
):
    async def handler(stream: trio.SSLStream) -> None:
        await stream.receive_some(10)  # most of what the client sends stays unread
        await stream.send_all(b"20 text/plain\r\n" + b"r" * 50_000)
        await stream.aclose()

    limits = ServerLimits(close_linger=linger)
    port = await nursery.start(
        partial(serve_raw, handler, host=HOST, port=0, ssl_context=tls_context, limits=limits)
    )
    client = await connect((HOST, port))
    reply = WireReply()

    async def push() -> None:
        with contextlib.suppress(trio.BrokenResourceError):
            await client.send_all(b"x" * 200_000)  # under the drain limit

    async with trio.open_nursery() as inner:
        inner.start_soon(push)
        await trio.sleep(0.2)  # the reply waits in our buffer while the server closes
        await read_until_end(client, reply)
    await trio.aclose_forcefully(client)
    if linger:
        assert len(reply.body) == 50_000
        assert reply.ended == "eof"
    else:  # the control: closing on unread input makes the kernel reset the connection
        assert reply.ended not in ("eof", "close_notify")


# --- admission: connections per client address, and a crowded server's short deadline ----


async def idle_from(local: str, address: tuple[str, int]) -> trio.SocketStream:
    """A plain TCP connection from loopback address ``local`` that never says anything."""
    return await trio.open_tcp_stream(*address, local_address=local)


async def closed_without_a_word(tcp: trio.SocketStream) -> bool:
    """Whether the server closed this connection without sending a byte (no TLS at all)."""
    await tcp.send_all(b"\x16\x03\x01")  # the start of a ClientHello
    with trio.fail_after(3):
        try:
            return await tcp.receive_some(100) == b""
        except trio.BrokenResourceError:  # a reset: closed with our bytes unread
            return True


async def test_a_client_over_its_connection_cap_is_closed_before_any_tls(nursery, tls_context):
    limits = ServerLimits(max_connections_per_address=3, request_timeout=10.0)
    address = await start(nursery, tls_context, limits=limits)
    held = [await idle_from("127.0.0.2", address) for _ in range(3)]
    extra = await idle_from("127.0.0.2", address)
    assert await closed_without_a_word(extra)
    await extra.aclose()
    # Another address is served at once, though the first holds its connections.
    other = await request(address, url_of(address, "/other"))
    assert other.status == 20
    # A connection given up frees its place for the same address.
    await held.pop().aclose()
    with trio.fail_after(5):
        while True:
            tcp = await idle_from("127.0.0.2", address)
            stream = trio.SSLStream(tcp, client_context(), server_hostname=None)
            try:
                await stream.send_all((url_of(address, "/again") + "\r\n").encode())
                reply = WireReply()
                await read_until_end(stream, reply)
            except trio.BrokenResourceError:
                await trio.sleep(0.05)  # the server has not seen the close yet
                continue
            finally:
                await trio.aclose_forcefully(stream)
            break
    assert reply.status == 20
    for tcp in held:
        await tcp.aclose()


async def test_a_crowded_server_gives_new_connections_a_short_deadline(nursery, tls_context):
    limits = ServerLimits(max_connections=8, request_timeout=10.0, crowded_request_timeout=0.3)
    address = await start(nursery, tls_context, limits=limits)
    early = [await idle_from(f"127.0.0.{n}", address) for n in range(2, 6)]  # half of 8
    late = await connect(address)
    await late.do_handshake()
    reply = WireReply(started=time.monotonic())
    with trio.fail_after(5):
        await read_until_end(late, reply)
    reply.finished = time.monotonic()
    assert reply.status == 59
    assert reply.meta == "request not received within 0.3 seconds"
    assert reply.elapsed < 3.0  # 10 x the crowded deadline, far from the usual 10 s
    await trio.aclose_forcefully(late)
    for tcp in early:
        await tcp.aclose()


async def test_an_app_is_cancelled_when_its_client_hangs_up(nursery, tls_context):
    started, abandoned = trio.Event(), trio.Event()

    async def slow(request: Request) -> Response:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            abandoned.set()
        raise AssertionError("not reached")

    address = await start(nursery, tls_context, app=slow)
    for hang_up in (trio.aclose_forcefully, lambda stream: stream.aclose()):  # TCP / close_notify
        started, abandoned = trio.Event(), trio.Event()
        stream = await connect(address)
        await stream.send_all((url_of(address, "/slow") + "\r\n").encode())
        with trio.fail_after(5):
            await started.wait()
            await hang_up(stream)
            await abandoned.wait()


def test_clients_are_counted_by_address_and_ipv6_by_64():
    assert client_key("192.0.2.7") == "192.0.2.7"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_key("fe80::1%eth0") == "fe80::/64"
    assert share_of(32, 2) == 16
    assert share_of(32, 3) == 11
    assert share_of(1, 8) == 1
    assert share_of(None, 4) is None
