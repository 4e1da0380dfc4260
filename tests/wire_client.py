"""A deliberately dumb Gemini client for tests that need to see exactly what went over the wire.

It records every byte with its arrival time and how the connection ended (clean TLS
close_notify, a bare TCP close, or a reset), without any of the tolerance a real client
has, so server tests can assert on the wire itself.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field

import trio

from sextant.tls import client_context


@dataclass
class WireReply:
    chunks: list[tuple[float, bytes]] = field(default_factory=list)  # (time.monotonic(), data)
    close_notify: bool = False  # the server ended with a TLS close_notify
    ended: str = "open"  # "close_notify", "eof" (TCP close without close_notify), "reset", ...
    peer_certificate: bytes | None = None
    started: float = 0.0
    finished: float = 0.0

    @property
    def data(self) -> bytes:
        return b"".join(chunk for _, chunk in self.chunks)

    @property
    def header(self) -> bytes:
        head, _, _ = self.data.partition(b"\n")
        return head

    @property
    def status(self) -> int:
        return int(self.header[:2])

    @property
    def meta(self) -> str:
        return self.header[3:].rstrip(b"\r").decode("utf-8")

    @property
    def body(self) -> bytes:
        return self.data.partition(b"\n")[2]

    @property
    def elapsed(self) -> float:
        return self.finished - self.started


async def connect(
    address: tuple[str, int], *, sni: str | None = None, context: ssl.SSLContext | None = None
) -> trio.SSLStream[trio.SocketStream]:
    tcp = await trio.open_tcp_stream(*address)
    return trio.SSLStream(tcp, context or client_context(), server_hostname=sni)


async def exchange(
    address: tuple[str, int],
    request: bytes,
    *,
    sni: str | None = None,
    max_bytes: int | None = None,
    read_delay: float = 0.0,
    timeout: float = 5.0,
) -> WireReply:
    """Send ``request`` as is, then read until the server ends the connection.

    With ``max_bytes`` the client hangs up (TCP close, no close_notify) once it has that much,
    which is how tests play a client that disconnects mid-response. ``read_delay`` makes the
    client wait before reading, so the reply sits in its kernel buffer meanwhile.
    """
    reply = WireReply(started=time.monotonic())
    stream = await connect(address, sni=sni)
    with trio.fail_after(timeout):
        try:
            await stream.do_handshake()
            reply.peer_certificate = stream.getpeercert(binary_form=True)
            if request:
                await stream.send_all(request)
            await trio.sleep(read_delay)
            await read_until_end(stream, reply, max_bytes=max_bytes)
        finally:
            await trio.aclose_forcefully(stream)
    reply.finished = time.monotonic()
    return reply


async def read_until_end(
    stream: trio.SSLStream[trio.SocketStream], reply: WireReply, *, max_bytes: int | None = None
) -> None:
    received = 0
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__
            if isinstance(cause, ssl.SSLEOFError):
                reply.ended = "eof"
            elif isinstance(cause, ConnectionResetError):
                reply.ended = "reset"
            else:
                reply.ended = f"broken: {cause!r}"
            return
        if not chunk:
            reply.ended = "close_notify"
            reply.close_notify = True
            return
        reply.chunks.append((time.monotonic(), chunk))
        received += len(chunk)
        if max_bytes is not None and received >= max_bytes:
            reply.ended = "client hung up"
            return


async def request(
    address: tuple[str, int], url: str, *, sni: str | None = None, timeout: float = 5.0
) -> WireReply:
    """A well-formed request for ``url``."""
    return await exchange(address, url.encode("utf-8") + b"\r\n", sni=sni, timeout=timeout)
