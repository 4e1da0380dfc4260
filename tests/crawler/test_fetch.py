"""crawler.fetch and crawler.resolver against real TLS capsules on loopback."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
import trio

from crawler.fetch import FetchLimits, fetch, indexable_mime
from crawler.resolver import Resolver
from gemserve.server import Response
from sextant.errors import ConnectFailed, FetchError, FetchTimeout, InvalidURL, MalformedHeader
from sextant.protocol import MimeType
from sextant.urls import parse
from tests.gemini_server import (
    Hostile,
    ScriptedCapsule,
    allocate_address,
    endless_body,
    garbage_header,
    gemtext,
    hang_up,
    header_without_crlf,
    huge_body,
    no_close_notify,
    open_capsules,
    plain,
    slow_drip,
    stall_before_header,
)

KIB = 1024
FAST = FetchLimits(
    connect_timeout=2.0,
    header_timeout=2.0,
    total_timeout=5.0,
    min_rate=512.0,
    rate_grace=0.5,
    max_body_bytes=64 * KIB,
)
PAGE = "# Hello\n=> /next Next\n"


def stalls_mid_header(seconds: float = 30.0) -> Hostile:
    async def handler(stream, request):
        await stream.send_all(b"20 text/gemini")
        await trio.sleep(seconds)

    return Hostile("stalls_mid_header", handler)


def capsule_with(routes, hostname="alpha.test", **kwargs):
    return ScriptedCapsule(hostname, **kwargs).routes(routes)


async def get(running, path, *, limits=FAST, host="alpha.test"):
    capsule = running[host]
    return await fetch(parse(capsule.url(path)), address=capsule.ip, limits=limits)


@pytest.fixture
async def alpha():
    capsule = capsule_with(
        {
            "/": gemtext(PAGE),
            "/no-close-notify": no_close_notify(PAGE.encode()),
            "/endless": endless_body(),
            "/exact": huge_body(64 * KIB),
            "/one-over": huge_body(64 * KIB + 1),
            "/drip": slow_drip(0.05, b"x" * 200),
            "/quick-drip": slow_drip(0.005, b"y" * 20 * KIB, chunk_size=2 * KIB),
            "/steady-drip": slow_drip(0.05, b"z" * 400 * KIB, chunk_size=2 * KIB),  # 10 s
            "/stall": stall_before_header(30),
            "/lf-only": header_without_crlf(b"# LF only\n"),
            "/no-newline-closed": header_without_crlf(b"", terminator=b""),
            "/no-newline-stall": stalls_mid_header(),
            "/too-long": garbage_header(b"20 " + b"a" * 2000),
            "/http": garbage_header(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"),
            "/http-ish": garbage_header(b"200 OK\r\n"),
            "/binary": garbage_header(b"\x16\x03\x01\x00\xff junk\n"),
            "/empty-line": garbage_header(b"\r\n# body\n"),
            "/png": endless_body(mime="image/png", line=b"\x89PNG\r\n\x1a\n" * 64),
            "/bad-mime": Response(20, "gemini"),
            "/gone": Response(52, "gone for good"),
            "/moved": Response(31, "/new/place"),
            "/slow-down": Response(44, "30"),
            "/hang-up": hang_up(),
            "/latin": plain("café".encode("latin-1"), "text/plain; charset=iso-8859-1"),
        }
    )
    async with open_capsules([capsule]) as running:
        yield running


# --- success and truncation ---------------------------------------------------------------------


async def test_success_with_close_notify(alpha):
    result = await get(alpha, "/")
    assert result.ok
    assert result.error is None
    assert (result.header.status, result.header.meta) == (20, "text/gemini; charset=utf-8")
    assert result.mime.essence == "text/gemini"
    assert result.body == PAGE.encode()
    assert (result.truncated, result.possibly_truncated, result.body_skipped) == (False,) * 3
    assert result.address == alpha["alpha.test"].ip
    assert result.tls_version in ("TLSv1.2", "TLSv1.3")
    assert result.certificate.fingerprint_sha256 == alpha["alpha.test"].capsule.fingerprint
    assert result.certificate.names == ("alpha.test",)
    assert result.bytes_read == len(b"20 text/gemini; charset=utf-8\r\n") + len(PAGE)
    assert 0 < result.duration < 2  # seconds of this fetch (milliseconds here), not a clock


async def test_missing_close_notify_keeps_body_and_marks_it(alpha):
    result = await get(alpha, "/no-close-notify")
    assert result.ok
    assert result.body == PAGE.encode()
    assert result.possibly_truncated is True
    assert result.truncated is False


async def test_endless_body_is_cut_at_the_size_limit(alpha):
    result = await get(alpha, "/endless")
    assert result.ok
    assert result.truncated is True
    assert len(result.body) == 64 * KIB
    assert result.body.startswith(b"All work and no play.\n")
    assert result.duration < 2  # cut at the size, in milliseconds; not FAST's 5 s in total


async def test_size_limit_boundary(alpha):
    exact = await get(alpha, "/exact")
    assert (len(exact.body), exact.truncated, exact.possibly_truncated) == (64 * KIB, False, False)
    over = await get(alpha, "/one-over")
    assert (len(over.body), over.truncated) == (64 * KIB, True)
    assert over.body == exact.body


# --- slow servers -------------------------------------------------------------------------------


async def test_slow_drip_is_cut_by_the_minimum_rate(alpha):
    result = await get(alpha, "/drip")
    assert isinstance(result.error, FetchTimeout)
    assert "bytes/s" in str(result.error)
    assert not result.ok
    assert result.header.status == 20
    assert 0 < len(result.body) < 200  # what arrived is kept for the record
    assert result.possibly_truncated
    # Cut once rate_grace (0.5 s) is over; the bound, far from that on a loaded machine,
    # stays below FAST's 5 s in total and the drip's own 10 s.
    assert 0.4 < result.duration < 4


async def test_a_drip_fast_enough_is_read_whole(alpha):
    result = await get(alpha, "/quick-drip")
    assert result.ok, result.error
    assert result.body == b"y" * 20 * KIB


async def test_total_timeout_cuts_a_fast_enough_drip(alpha):
    limits = FetchLimits(total_timeout=0.3, rate_grace=5.0, min_rate=1.0)
    result = await get(alpha, "/steady-drip", limits=limits)
    assert isinstance(result.error, FetchTimeout)
    assert "in total" in str(result.error)
    assert result.possibly_truncated
    assert result.duration < 3  # 10 x the timeout, well before the drip's 10 s


async def test_stall_before_header_times_out(alpha):
    limits = FetchLimits(header_timeout=0.3, total_timeout=5.0)
    result = await get(alpha, "/stall", limits=limits)
    assert isinstance(result.error, FetchTimeout)
    assert "no complete header line within 0.3 s (0 bytes" in str(result.error)
    assert result.header is None
    assert result.certificate is not None  # the TLS part worked and is on record
    assert result.duration < 3  # 10 x the timeout, before the 5 s in total and the 30 s stall


# --- headers ------------------------------------------------------------------------------------


async def test_header_with_lf_only_is_accepted(alpha):
    result = await get(alpha, "/lf-only")
    assert result.ok
    assert result.header.meta == "text/gemini"
    assert result.body == b"# LF only\n"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/http", "status is not a number: HTTP/1.1 200 OK"),
        ("/http-ish", "has 3 digits"),
        ("/binary", "not valid UTF-8"),
        ("/empty-line", "empty response header"),
        ("/too-long", "longer than 1029 bytes"),
        ("/no-newline-closed", "connection closed after 14 bytes of header without a line end"),
    ],
)
async def test_malformed_headers(alpha, path, message):
    result = await get(alpha, path)
    assert isinstance(result.error, MalformedHeader)
    assert message in str(result.error)
    assert result.header is None
    assert result.body is None
    assert not result.ok


async def test_header_without_newline_that_stalls_is_a_timeout(alpha):
    result = await get(alpha, "/no-newline-stall", limits=FetchLimits(header_timeout=0.3))
    assert isinstance(result.error, FetchTimeout)
    assert "14 bytes received without a line end" in str(result.error)


async def test_success_with_a_meta_that_is_no_mime_type(alpha):
    result = await get(alpha, "/bad-mime")
    assert isinstance(result.error, MalformedHeader)
    assert result.header.status == 20
    assert not result.ok


@pytest.mark.parametrize(
    ("path", "status", "meta"),
    [("/gone", 52, "gone for good"), ("/moved", 31, "/new/place"), ("/slow-down", 44, "30")],
)
async def test_other_statuses_have_a_header_only(alpha, path, status, meta):
    result = await get(alpha, path)
    assert result.ok
    assert (result.header.status, result.header.meta) == (status, meta)
    assert result.body is None
    assert result.mime is None


async def test_server_hanging_up_without_an_answer(alpha):
    result = await get(alpha, "/hang-up")
    assert type(result.error) is FetchError
    assert str(result.error) == (
        "connection closed abruptly (no TLS close_notify) before any response header"
    )


async def test_declared_charset_body_is_passed_through_raw(alpha):
    result = await get(alpha, "/latin")
    assert result.body == "café".encode("latin-1")
    assert result.mime.charset == "iso-8859-1"


# --- bodies we do not read ----------------------------------------------------------------------


async def test_image_header_only_and_connection_closed_quickly(alpha):
    result = await get(alpha, "/png", limits=FetchLimits(max_body_bytes=1 * KIB))
    assert result.ok
    assert result.body_skipped is True
    assert result.body is None
    assert result.mime.essence == "image/png"
    assert result.bytes_read < 256 * KIB  # closed at once, not read to any limit
    assert result.duration < 1  # milliseconds; 1 s leaves room for a loaded machine


@pytest.mark.parametrize(
    ("meta", "indexable"),
    [
        ("text/gemini", True),
        ("text/plain; charset=latin-1", True),
        ("text/markdown", True),
        ("text/html", True),
        ("application/atom+xml", True),
        ("application/rss+xml", True),
        ("application/xml", True),
        ("image/png", False),
        ("audio/ogg", False),
        ("application/zip", False),
        ("application/pdf", False),
        ("application/octet-stream", False),
    ],
)
def test_indexable_mime(meta, indexable):
    assert indexable_mime(MimeType.parse(meta)) is indexable


# --- connections that fail ----------------------------------------------------------------------


async def test_connection_refused_is_connect_failed():
    address = allocate_address()
    probe = socket.socket()
    probe.bind((address, 0))
    port = probe.getsockname()[1]
    probe.close()  # bound, never listening: the kernel refuses
    result = await fetch(parse(f"gemini://closed.test:{port}/"), address=address, limits=FAST)
    assert isinstance(result.error, ConnectFailed)
    assert str(result.error) == f"cannot connect to {address} port {port}: Connection refused"
    assert result.header is None
    assert result.certificate is None


async def test_plain_tcp_server_fails_the_handshake(nursery):
    async def plain_gemini(stream):
        await stream.receive_some(4096)
        await stream.send_all(b"20 text/gemini\r\nno TLS here\n")
        await stream.aclose()

    address = allocate_address()
    listeners = await nursery.start(partial(trio.serve_tcp, plain_gemini, 0, host=address))
    port = listeners[0].socket.getsockname()[1]
    result = await fetch(parse(f"gemini://plain.test:{port}/"), address=address, limits=FAST)
    assert isinstance(result.error, ConnectFailed)
    assert "TLS handshake" in str(result.error)
    assert "does not speak TLS" in str(result.error)
    assert result.tls_version is None


async def test_silent_tcp_server_is_a_connect_timeout(nursery):
    async def silent(stream):
        await trio.sleep(30)

    address = allocate_address()
    listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host=address))
    port = listeners[0].socket.getsockname()[1]
    limits = FetchLimits(connect_timeout=0.3)
    result = await fetch(parse(f"gemini://silent.test:{port}/"), address=address, limits=limits)
    assert isinstance(result.error, FetchTimeout)
    assert "no TLS connection" in str(result.error)
    assert result.duration < 3  # 10 x the timeout, far from the silent server's 30 s


async def test_cancellation_propagates(alpha):
    finished = False
    with trio.move_on_after(0.2) as scope:
        await get(alpha, "/stall", limits=FetchLimits(header_timeout=30))
        finished = True
    assert scope.cancelled_caught
    assert not finished


# --- TLS facts ----------------------------------------------------------------------------------


def record_sni(capsule):
    names = []
    original = capsule.ssl_context.sni_callback

    def callback(connection, server_name, context):
        names.append(server_name)
        return original(connection, server_name, context)

    capsule.ssl_context.sni_callback = callback
    return names


async def test_sni_is_the_punycode_host_name():
    capsule = capsule_with({"/": gemtext(PAGE)}, hostname="bücher.test")
    names = record_sni(capsule)
    async with open_capsules([capsule]) as running:
        result = await get(running, "/", host="bücher.test")
    assert result.ok, result.error
    assert names == ["xn--bcher-kva.test"]
    assert str(result.url).startswith("gemini://xn--bcher-kva.test:")


async def test_no_sni_for_an_ip_address_host():
    address = allocate_address()
    capsule = capsule_with({"/": gemtext(PAGE)}, hostname=address, address=address)
    names = record_sni(capsule)
    async with open_capsules([capsule]) as running:
        result = await get(running, "/", host=address)
    assert result.ok, result.error
    assert names == [None]


async def test_expired_certificate_is_accepted_and_its_facts_recorded():
    now = datetime.now(UTC).replace(tzinfo=None)
    capsule = capsule_with(
        {"/": gemtext(PAGE)},
        not_before=now - timedelta(days=400),
        not_after=now - timedelta(days=30),
        key_type="rsa",
    )
    async with open_capsules([capsule]) as running:
        result = await get(running, "/")
    assert result.ok, result.error
    facts = result.certificate
    assert facts.fingerprint_sha256 == capsule.fingerprint
    assert facts.not_after < now
    assert not facts.is_valid_at(now)
    assert facts.self_signed is True
    assert facts.key_type == "RSA 2048"


# --- resolver -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alpha.test:1965:127.0.0.1", (("alpha.test", 1965), "127.0.0.1")),
        ("Alpha.TEST:2000:127.1.2.3", (("alpha.test", 2000), "127.1.2.3")),
        ("bücher.test:1965:127.0.0.2", (("xn--bcher-kva.test", 1965), "127.0.0.2")),
        ("six.test:1965:[::1]", (("six.test", 1965), "::1")),
        ("six.test:1965:0:0::1", (("six.test", 1965), "::1")),
    ],
)
def test_parse_pin(text, expected):
    assert Resolver.parse_pin(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alpha.test", "expected HOST:PORT:ADDRESS"),
        ("alpha.test:1965", "expected HOST:PORT:ADDRESS"),
        ("alpha.test:port:127.0.0.1", "is not a number"),
        ("alpha.test:1965:localhost", "is not an IP address"),
        ("alpha.test:70000:127.0.0.1", "out of range"),
        ("bad host:1965:127.0.0.1", "not allowed in a host name"),
    ],
)
def test_parse_pin_errors_say_what_is_wrong(text, message):
    with pytest.raises(InvalidURL, match=message) as caught:
        Resolver.parse_pin(text)
    assert isinstance(caught.value, ValueError)


async def test_resolver_pins_literals_and_system_lookup():
    pins = dict([Resolver.parse_pin("alpha.test:1966:127.1.0.9")])
    # Everything here is loopback: the public-address rule has tests of its own.
    resolver = Resolver(pins, may_reach_private=lambda host, port: True)
    assert await resolver.resolve("alpha.test", 1966) == "127.1.0.9"
    assert await resolver.resolve("127.1.0.7", 1965) == "127.1.0.7"
    assert await resolver.resolve("::1", 1965) == "::1"
    assert await resolver.resolve("localhost", 1965) in ("127.0.0.1", "::1")
    assert await resolver.resolve("localhost", 1965) in ("127.0.0.1", "::1")  # from the cache


async def test_resolver_failure_is_connect_failed():
    resolver = Resolver()
    bad = "x" * 70 + ".test"  # a label over 63 characters: refused without asking DNS
    with pytest.raises(ConnectFailed, match=f"cannot resolve {bad}: .*too long"):
        await resolver.resolve(bad, 1965)


async def test_resolved_address_is_used_for_a_real_fetch(alpha):
    running = alpha["alpha.test"]
    resolver = Resolver(dict([Resolver.parse_pin(running.resolve_arg)]))
    url = parse(running.url("/"))
    result = await fetch(url, address=await resolver.resolve(url.host, url.port), limits=FAST)
    assert result.ok
    assert result.address == running.ip


async def test_min_rate_zero_turns_the_rate_check_off(alpha):
    limits = FetchLimits(min_rate=0.0, rate_grace=0.0, total_timeout=0.6)
    result = await get(alpha, "/drip", limits=limits)
    assert isinstance(result.error, FetchTimeout)
    assert "in total" in str(result.error)  # only the total limit stopped the 20 bytes/s drip


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("connect_timeout", 0, "connect_timeout must be a positive"),
        ("total_timeout", -1, "total_timeout must be a positive"),
        ("min_rate", -5, "must not be negative"),
        ("max_body_bytes", -1, "max_body_bytes must not be negative"),
    ],
)
def test_limits_are_validated(field, value, message):
    with pytest.raises(ValueError, match=message):
        FetchLimits(**{field: value})
