"""A strict Gemini client for the capsule's tests.

It checks what any Gemini client relies on, on every response: the header is exactly
``<2 digits><space><meta><CR><LF>`` (spec section 3.1), only 2x responses have a body,
bodies declared ``text/gemini; charset=utf-8`` decode as UTF-8, and the server ended the
connection with TLS close_notify (section 4). A test that fetches through it therefore
checks the protocol as well as the page.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from urllib.parse import quote

import trio

from sextant.gemtext import Document
from sextant.gemtext import parse as parse_gemtext
from sextant.tls import client_context
from tests.wire_client import WireReply, exchange, read_until_end

_STRICT_HEADER = re.compile(rb"([1-6][0-9]) ([^\r\n]*)\r\n")


@dataclass
class Reply:
    status: int
    meta: str
    body: bytes
    wire: WireReply

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    @property
    def gemtext(self) -> Document:
        return parse_gemtext(self.text)

    @property
    def links(self) -> list[str]:
        return [link.url for link in self.gemtext.links]

    def link_labelled(self, needle: str) -> str:
        found = [link.url for link in self.gemtext.links if needle in link.label]
        assert found, f"no link labelled {needle!r} in:\n{self.text}"
        return found[0]


def check(wire: WireReply) -> Reply:
    data = wire.data
    match = _STRICT_HEADER.match(data)
    assert match is not None, f"malformed header: {data[:200]!r}"
    status, meta = int(match.group(1)), match.group(2).decode("utf-8")
    assert len(match.group(2)) <= 1024
    body = data[match.end() :]
    if status // 10 != 2:
        assert body == b"", f"status {status} must not carry a body"
    elif meta.startswith("text/"):
        assert "charset=utf-8" in meta, meta
        body.decode("utf-8")
    assert wire.close_notify, f"connection ended without close_notify ({wire.ended})"
    return Reply(status, meta, body, wire)


class Client:
    """Requests for one capsule address; ``origin`` is what goes before the path."""

    def __init__(self, address: tuple[str, int], origin: str | None = None) -> None:
        self.address = address
        self.origin = origin or f"gemini://{address[0]}:{address[1]}"

    def url(self, path: str) -> str:
        return self.origin + path

    async def get(self, path: str, *, timeout: float = 10.0) -> Reply:
        line = (self.url(path)).encode("utf-8") + b"\r\n"
        return check(await exchange(self.address, line, timeout=timeout))

    async def raw(self, line: bytes, *, timeout: float = 10.0) -> Reply:
        return check(await exchange(self.address, line, timeout=timeout))

    async def answer(self, path: str, typed: str) -> Reply:
        """What a client does after a 10 prompt: the input, percent-encoded, as the query."""
        prompt = await self.get(path)
        assert prompt.status == 10, (prompt.status, prompt.meta)
        return await self.get(f"{path}?{quote(typed, safe='')}")


async def from_address(local: str, address: tuple[str, int], request: bytes) -> Reply:
    """``request`` sent from loopback address ``local`` (127.0.0.2, ...): another client."""
    tcp = await trio.open_tcp_stream(*address, local_address=local)
    stream = trio.SSLStream(tcp, client_context(), server_hostname=None)
    reply = WireReply(started=time.monotonic())
    try:
        await stream.send_all(request)
        await read_until_end(stream, reply)
    finally:
        await trio.aclose_forcefully(stream)
    reply.finished = time.monotonic()
    return check(reply)
