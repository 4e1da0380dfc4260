"""The scripted test capsules do on the wire exactly what they promise."""

from __future__ import annotations

import itertools
import json
import socket
import ssl
from datetime import datetime

import pytest
import trio

from gemserve.server import Response
from sextant.tls import certificate_facts, client_context
from tests.gemini_server import (
    ScriptedCapsule,
    allocate_address,
    bom_body,
    capsule_process,
    endless_body,
    garbage_header,
    gemtext,
    hang_up,
    header_without_crlf,
    huge_body,
    no_close_notify,
    non_utf8,
    open_capsules,
    plain,
    slow_drip,
    stall_before_header,
    synthetic_site,
)
from tests.wire_client import exchange, request


async def get(running, hostname, path, **kwargs):
    capsule = running[hostname]
    return await request(capsule.address, capsule.url(path), sni=hostname, **kwargs)


async def test_scripted_routes_and_request_log(capsules):
    alpha = ScriptedCapsule("alpha.test")
    alpha.route("/", gemtext("# Home\n=> /a A\n"))
    alpha.route("/robots.txt", plain("User-agent: *\nDisallow: /private\n"))
    alpha.route("/search", Response.input("Query?"))
    alpha.route("/search?gemini", gemtext("# Results for gemini\n"))

    async def dynamic(request):
        return gemtext(f"# You asked for {request.url.path}\n")

    alpha.route("/dynamic", dynamic)
    running = await capsules(alpha)

    home = await get(running, "alpha.test", "/")
    assert (home.status, home.body) == (20, b"# Home\n=> /a A\n")
    assert home.close_notify
    robots = await get(running, "alpha.test", "/robots.txt")
    assert robots.header == b"20 text/plain\r"
    assert (await get(running, "alpha.test", "/search")).status == 10
    assert (await get(running, "alpha.test", "/search?gemini")).body == b"# Results for gemini\n"
    assert (await get(running, "alpha.test", "/dynamic")).body == b"# You asked for /dynamic\n"
    assert (await get(running, "alpha.test", "/missing")).status == 51
    assert alpha.paths == ["/", "/robots.txt", "/search", "/search?gemini", "/dynamic", "/missing"]
    times = [hit.at for hit in alpha.requests]
    assert times == sorted(times)
    assert alpha.hits("/") == [times[0]]


async def test_each_capsule_has_its_own_address_and_certificate(capsules):
    alpha, beta = ScriptedCapsule("alpha.test"), ScriptedCapsule("beta.test")
    for capsule in (alpha, beta):
        capsule.route("/", gemtext(f"# {capsule.hostname}\n"))
    running = await capsules(alpha, beta)
    assert running["alpha.test"].ip != running["beta.test"].ip
    assert all(
        ip.startswith("127.1.") for ip in (running["alpha.test"].ip, running["beta.test"].ip)
    )
    assert running.resolve_args == [
        f"alpha.test:{running['alpha.test'].port}:{running['alpha.test'].ip}",
        f"beta.test:{running['beta.test'].port}:{running['beta.test'].ip}",
    ]
    for host in ("alpha.test", "beta.test"):
        reply = await get(running, host, "/")
        facts = certificate_facts(reply.peer_certificate)
        assert facts.names == (host,)
        assert facts.fingerprint_sha256 == running[host].capsule.fingerprint
        assert reply.body == f"# {host}\n".encode()


async def test_capsules_can_share_an_address(capsules):
    shared = allocate_address()
    one, two = (
        ScriptedCapsule("one.test", address=shared),
        ScriptedCapsule("two.test", address=shared),
    )
    running = await capsules(one, two)
    assert running["one.test"].ip == running["two.test"].ip == shared
    assert running["one.test"].port != running["two.test"].port
    assert (await get(running, "two.test", "/")).status == 51


async def test_requests_for_another_host_are_refused(capsules):
    running = await capsules(ScriptedCapsule("alpha.test").route("/", gemtext("hi")))
    alpha = running["alpha.test"]
    reply = await request(alpha.address, f"gemini://other.test:{alpha.port}/")
    assert reply.status == 53
    assert alpha.capsule.requests == []


async def test_rotating_the_certificate_changes_it_for_new_connections(capsules):
    alpha = ScriptedCapsule("alpha.test").route("/", gemtext("hi"))
    running = await capsules(alpha)
    before = certificate_facts((await get(running, "alpha.test", "/")).peer_certificate)
    new_fingerprint = alpha.rotate_certificate(
        not_before=datetime(2020, 1, 1), not_after=datetime(2021, 1, 1)
    )
    assert new_fingerprint != before.fingerprint_sha256
    for sni in ("alpha.test", None):  # the swap must not depend on the client sending SNI
        reply = await request(running["alpha.test"].address, running.url("alpha.test"), sni=sni)
        after = certificate_facts(reply.peer_certificate)
        assert after.fingerprint_sha256 == new_fingerprint
        assert after.not_after == datetime(2021, 1, 1)
        assert reply.body == b"hi"


async def test_mismatched_and_rsa_certificates(capsules):
    odd = ScriptedCapsule("alpha.test", cert_names=["someone-else.test"], key_type="rsa")
    running = await capsules(odd)
    facts = certificate_facts((await get(running, "alpha.test", "/")).peer_certificate)
    assert facts.names == ("someone-else.test",)
    assert facts.key_type == "RSA 2048"


async def test_response_delay_holds_every_answer(capsules):
    running = await capsules(ScriptedCapsule("slow.test", response_delay=0.2))
    reply = await get(running, "slow.test", "/")
    assert reply.status == 51
    assert reply.chunks[0][0] - reply.started >= 0.2


async def test_open_capsules_context_manager_stops_them():
    capsule = ScriptedCapsule("alpha.test").route("/", gemtext("hi"))
    async with open_capsules([capsule]) as running:
        address = running["alpha.test"].address
        assert (await get(running, "alpha.test", "/")).body == b"hi"
    with pytest.raises(OSError):  # noqa: PT011 - refused; the errno text varies
        await trio.open_tcp_stream(*address)


# --- hostile behaviours, checked on the wire ---------------------------------------------


@pytest.fixture
async def hostile(capsules):
    capsule = ScriptedCapsule("hostile.test")
    capsule.routes(
        {
            "/endless": endless_body(),
            "/drip": slow_drip(0.05, b"abcdef"),
            "/drip-header": slow_drip(0.05, b"ab", drip_header=True, chunk_size=4),
            "/huge": huge_body(3_000_000),
            "/lf": header_without_crlf(b"# body\n"),
            "/no-terminator": header_without_crlf(b"", terminator=b""),
            "/http": garbage_header(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            "/truncated": no_close_notify(b"# Complete?\n"),
            "/latin1": non_utf8("# Café\n", declare=True),
            "/latin1-undeclared": non_utf8("# Café\n", declare=False),
            "/bom": bom_body("# Title\n"),
            "/stall": stall_before_header(0.3),
            "/hang-up": hang_up(),
        }
    )
    running = await capsules(capsule)
    return running


async def test_endless_body_never_ends(hostile):
    capsule = hostile["hostile.test"]
    line = capsule.url("/endless").encode() + b"\r\n"
    reply = await exchange(capsule.address, line, max_bytes=2_000_000)
    assert reply.header == b"20 text/gemini\r"
    assert len(reply.data) >= 2_000_000
    assert reply.ended == "client hung up"
    assert set(reply.body.splitlines()) == {b"All work and no play."}


async def test_slow_drip_drips(hostile):
    reply = await get(hostile, "hostile.test", "/drip")
    assert reply.body == b"abcdef"
    body_chunks = [(at, data) for at, data in reply.chunks if not data.startswith(b"20 ")]
    assert len(body_chunks) == 6  # one byte per piece
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(body_chunks)]
    # Spaced by the 0.05 s interval as the client saw it: half of that allows for a read
    # that a loaded machine ran late, and still tells a drip from one burst.
    assert min(gaps) >= 0.025
    assert reply.close_notify

    header_drip = await get(hostile, "hostile.test", "/drip-header")
    assert header_drip.data == b"20 text/gemini\r\nab"
    assert header_drip.chunks[0][1] == b"20 t"  # even the header comes in pieces
    assert len(header_drip.chunks) == 5


async def test_huge_body_is_exactly_that_big(hostile):
    reply = await get(hostile, "hostile.test", "/huge")
    assert reply.header == b"20 text/plain\r"
    assert len(reply.body) == 3_000_000
    assert reply.close_notify


async def test_broken_headers_are_sent_verbatim(hostile):
    lf = await get(hostile, "hostile.test", "/lf")
    assert lf.data == b"20 text/gemini\n# body\n"
    assert (await get(hostile, "hostile.test", "/no-terminator")).data == b"20 text/gemini"
    http = await get(hostile, "hostile.test", "/http")
    assert http.data == b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    assert http.close_notify


def _stdlib_fetch(address, line):
    raw = socket.create_connection(address, timeout=5)
    with client_context().wrap_socket(raw, suppress_ragged_eofs=False) as tls:
        tls.sendall(line)
        data = b""
        try:
            while chunk := tls.recv(65536):
                data += chunk
        except ssl.SSLEOFError:
            return data, "eof"
        return data, "close_notify"


async def test_no_close_notify_really_omits_it(hostile):
    capsule = hostile["hostile.test"]
    reply = await get(hostile, "hostile.test", "/truncated")
    assert reply.data == b"20 text/gemini\r\n# Complete?\n"
    assert reply.ended == "eof"
    # The standard library agrees: a TCP EOF without close_notify.
    data, ending = await trio.to_thread.run_sync(
        _stdlib_fetch, capsule.address, capsule.url("/truncated").encode() + b"\r\n"
    )
    assert (data, ending) == (b"20 text/gemini\r\n# Complete?\n", "eof")
    # Control: a well-behaved route seen by the same stdlib client does end cleanly.
    _, ending = await trio.to_thread.run_sync(
        _stdlib_fetch, capsule.address, capsule.url("/lf").encode() + b"\r\n"
    )
    assert ending == "close_notify"


async def test_charset_and_bom_bodies(hostile):
    declared = await get(hostile, "hostile.test", "/latin1")
    assert declared.header == b"20 text/gemini; charset=latin-1\r"
    assert declared.body == "# Café\n".encode("latin-1")
    undeclared = await get(hostile, "hostile.test", "/latin1-undeclared")
    assert undeclared.header == b"20 text/gemini\r"
    with pytest.raises(UnicodeDecodeError):
        undeclared.body.decode("utf-8")
    bom = await get(hostile, "hostile.test", "/bom")
    assert bom.body == b"\xef\xbb\xbf# Title\n"


async def test_stall_before_header_and_hang_up(hostile):
    stalled = await get(hostile, "hostile.test", "/stall")
    assert stalled.chunks[0][0] - stalled.started >= 0.3
    assert stalled.body == b"# Finally\n"
    hung = await get(hostile, "hostile.test", "/hang-up")
    assert hung.data == b""
    assert hung.ended == "eof"


def test_synthetic_site_is_deterministic_and_connected():
    site = synthetic_site(50, links_per_page=4, seed=3)
    assert site == synthetic_site(50, links_per_page=4, seed=3)
    assert site != synthetic_site(50, links_per_page=4, seed=4)
    reachable, todo = set(), ["/"]
    while todo:
        path = todo.pop()
        if path in reachable:
            continue
        reachable.add(path)
        for line in site[path].body.decode().splitlines():
            if line.startswith("=> "):
                todo.append(line.split()[1])
    assert reachable == set(site)
    assert len(site) == 51


async def test_capsules_in_a_separate_process(tmp_path):
    spec = {
        "capsules": [
            {
                "hostname": "alpha.test",
                "routes": {
                    "/": {"gemtext": "# Alpha\n=> {url:beta.test}/ Beta\n"},
                    "/robots.txt": {"status": 20, "meta": "text/plain", "body": "User-agent: *\n"},
                    "/drip": {"hostile": "slow_drip", "interval": 0.01, "body": "abc"},
                },
            },
            {"hostname": "beta.test", "synthetic": {"pages": 5, "seed": 1}},
        ]
    }
    log = tmp_path / "requests.jsonl"
    with capsule_process(spec, tmp_path, requests_log=log) as served:
        beta_url = served.url("beta.test", "/")
        home = await request(served.address("alpha.test"), served.url("alpha.test"))
        assert home.body == f"# Alpha\n=> {beta_url} Beta\n".encode()
        drip = await request(served.address("alpha.test"), served.url("alpha.test", "/drip"))
        assert drip.body == b"abc"
        page = await request(served.address("beta.test"), served.url("beta.test", "/p/0"))
        assert page.body.startswith(b"# Page 0\n")
        assert len(served.resolve_args) == 2
        assert (
            served.ready["capsules"]["alpha.test"]["fingerprint"]
            == certificate_facts(home.peer_certificate).fingerprint_sha256
        )
    hits = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(hit["host"], hit["path"]) for hit in hits] == [
        ("alpha.test", "/"),
        ("alpha.test", "/drip"),
        ("beta.test", "/p/0"),
    ]
    assert served.process.returncode is not None  # stopped when the block ended
