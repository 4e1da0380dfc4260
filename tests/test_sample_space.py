"""The bundled sample space answers as documented, over real TLS.

Served in-process at 127.0.3.10… so it never collides with a running demo
(127.0.0.10…). Every gemtext link inside the space is followed once, which
proves the content and the server agree (no dead links by accident).
"""

from __future__ import annotations

import gzip
import io
import tarfile
import xml.etree.ElementTree as ET
from functools import partial

import pytest
import trio

from gemserve.sample_space.serve import RunningCapsule, serve_space
from gemserve.sample_space.space import CAPSULES, SEED_URL
from sextant import gemtext, urls
from tests import wire_client

BASE = "127.0.3.10"


@pytest.fixture
async def space(nursery: trio.Nursery) -> dict[str, RunningCapsule]:
    running = await nursery.start(partial(serve_space, base_address=BASE, port=1965))
    return {capsule.host: capsule for capsule in running}


async def get(space: dict[str, RunningCapsule], url: str) -> wire_client.WireReply:
    parsed = urls.parse(url)
    capsule = space[parsed.host]
    return await wire_client.request((capsule.address, capsule.port), url, sni=parsed.host)


async def test_every_capsule_listens_on_its_own_address(space: dict[str, RunningCapsule]) -> None:
    assert len(space) == len(CAPSULES) >= 8
    assert len({capsule.address for capsule in space.values()}) == len(space)
    reply = await get(space, SEED_URL)
    assert reply.status == 20
    assert reply.close_notify


@pytest.mark.parametrize(
    ("url", "status", "meta"),
    [
        ("gemini://rezepte.example/", 20, "text/gemini; charset=utf-8; lang=de"),
        ("gemini://poemes.example/ancien.gmi", 20, "text/gemini"),
        ("gemini://docs.example/old-spec", 31, "/spec/"),
        ("gemini://docs.example/guides", 30, "guides/"),
        ("gemini://pubnix.example/~carol/", 31, "gemini://gemlog.example/"),
        ("gemini://pubnix.example/~bob/robots.txt", 20, "text/gemini"),
        ("gemini://search.example/robots.txt", 20, "text/plain; charset=utf-8"),
        ("gemini://search.example/lookup", 10, "Which word should Lookup look for?"),
        (
            "gemini://docs.example/feedback",
            10,
            "Which part of the protocol should Protocol Notes explain next?",
        ),
        ("gemini://gemlog.example/atom.xml", 20, "application/atom+xml"),
        ("gemini://files.example/lighthouse.png", 20, "image/png"),
        ("gemini://files.example/no-such-file", 51, "no such page"),
        ("gemini://files.example/../etc/passwd", 51, "no such page"),
    ],
)
async def test_special_answers(
    space: dict[str, RunningCapsule], url: str, status: int, meta: str
) -> None:
    reply = await get(space, url)
    assert (reply.status, reply.meta) == (status, meta)


async def test_the_old_poem_is_latin1_without_a_declared_charset(
    space: dict[str, RunningCapsule],
) -> None:
    body = (await get(space, "gemini://poemes.example/ancien.gmi")).body
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    assert "poème" in body.decode("latin-1")


async def test_lookup_answers_a_query(space: dict[str, RunningCapsule]) -> None:
    reply = await get(space, "gemini://search.example/lookup?kartoffeln")
    assert reply.status == 20
    assert "gemini://rezepte.example/" in reply.body.decode()


async def test_binary_files_are_real_files(space: dict[str, RunningCapsule]) -> None:
    png = (await get(space, "gemini://files.example/lighthouse.png")).body
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    archive = (await get(space, "gemini://files.example/notes.tar.gz")).body
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive))) as tar:
        assert tar.getnames() == ["notes/talk.txt"]
    atom = (await get(space, "gemini://gemlog.example/atom.xml")).body
    assert ET.fromstring(atom).tag == "{http://www.w3.org/2005/Atom}feed"


async def test_the_gemlog_index_is_a_gemsub_feed(space: dict[str, RunningCapsule]) -> None:
    body = (await get(space, "gemini://gemlog.example/gemlog/")).body.decode()
    assert gemtext.is_gemsub(gemtext.parse(body))


async def test_another_host_on_a_capsule_address_is_refused(
    space: dict[str, RunningCapsule],
) -> None:
    capsule = space["station.example"]
    reply = await wire_client.request(
        (capsule.address, capsule.port), "gemini://docs.example/", sni="station.example"
    )
    assert reply.status == 53


async def test_every_link_inside_the_space_leads_somewhere(
    space: dict[str, RunningCapsule],
) -> None:
    seen: set[str] = set()
    queue = [SEED_URL]
    schemes: set[str] = set()
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        reply = await get(space, url)
        assert reply.status in (10, 20, 30, 31), (url, reply.status, reply.meta)
        if reply.status in (30, 31):
            queue.append(urls.resolve(url, reply.meta))
        if reply.status != 20 or not reply.meta.startswith("text/gemini"):
            continue
        text = reply.body.decode("utf-8", "replace")
        for link in gemtext.parse(text).links:
            target = urls.resolve(url, link.url)
            schemes.add(urls.scheme_of(target))
            if urls.scheme_of(target) == "gemini":
                queue.append(target)
    assert len({urls.parse(url).host for url in seen}) == len(CAPSULES)
    assert len(seen) > 40
    assert {"gemini", "https", "gopher", "mailto"} <= schemes
