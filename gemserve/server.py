"""The one Gemini server: the search capsule, the sample space and the test capsules all run it.

Two layers share one listener:

- :func:`serve_raw` accepts TLS connections with bounded concurrency and hands each stream to
  a handler; whatever the handler does wrong (or the client does wrong) stays inside that one
  connection. A client address over its share of connections is closed before any TLS work
  (:mod:`gemserve.admission`). Tests use it directly to misbehave on the wire.
- :func:`serve` runs a Gemini application on top: it reads and validates the request line
  (:func:`receive_request`), calls the app (cancelling it if the client hangs up meanwhile),
  and writes the response (:func:`respond`). Those steps are public so a raw handler can
  speak correct Gemini where it wants to.

Spec references are to the Gemini protocol specification (geminiprotocol.net): §2 requests,
§3.1 response headers, §3.2 status codes, §4 TLS (close_notify).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from gemserve.admission import Admission
from sextant import urls
from sextant.errors import InvalidURL, MalformedRequest
from sextant.protocol import MAX_REQUEST_BYTES, ResponseHeader, Status, parse_request

log = logging.getLogger(__name__)

# The longest valid request line: the URL plus CR LF (§2).
_MAX_LINE = MAX_REQUEST_BYTES + 2
# How much of an over-long request we read past the limit looking for its end.
_MAX_DISCARD = 64 * 1024

# Running out of file descriptors or memory is a reason to pause accepting, not to die.
_ACCEPT_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_ACCEPT_RETRY_SECONDS = 0.1
# accept() failing with one of _CLOSED_ERRNOS means the listening socket was closed; with
# one of _IGNORED_ACCEPT_ERRNOS only that one client is lost (it reset, or a firewall refused
# it) and accepting goes on.
_CLOSED_ERRNOS = {errno.EBADF, errno.ENOTSOCK}
_IGNORED_ACCEPT_ERRNOS = {
    getattr(errno, name)
    for name in (
        "ECONNABORTED",
        "ECONNRESET",
        "EPERM",
        "EPROTO",
        "ETIMEDOUT",
        "ENETDOWN",
        "ENETUNREACH",
        "EHOSTDOWN",
        "EHOSTUNREACH",
        "ENONET",
        "ENOPROTOOPT",
        "EOPNOTSUPP",
    )
    if hasattr(errno, name)
}

# What a broken or hostile peer can make a connection raise. Each ends that connection only.
_CONNECTION_ERRORS = (
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    ssl.SSLError,
    OSError,
)

Body = bytes | AsyncIterator[bytes]


class ConnectionShare(Protocol):
    """How sibling server processes share the connections of one listening socket.

    Kept to an interface here so this package stays a leaf: the search capsule brings the
    shared-memory implementation (:mod:`search_capsule.loadshare`).
    """

    def opened(self) -> None: ...

    def closed(self) -> None: ...

    async def wait_turn(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Request:
    """A request that passed validation: ``url`` is parsed and normalised."""

    url: urls.GeminiURL
    raw: str  # the request line as received, without CRLF
    peer: tuple[str, int]


@dataclass(frozen=True, slots=True)
class Response:
    """A response to send. Constructing one validates the header, so apps fail early.

    ``body`` is only allowed for 2x (§3.2: no other status has a body). An async iterator is
    streamed chunk by chunk, so large or generated bodies never sit in memory whole.
    """

    status: int
    meta: str
    body: Body | None = None

    def __post_init__(self) -> None:
        header = ResponseHeader(self.status, self.meta)  # raises MalformedHeader
        if self.body is not None and header.status // 10 != 2:
            raise ValueError(f"status {self.status} cannot carry a body; only 2x responses can")

    @property
    def header(self) -> bytes:
        return ResponseHeader(self.status, self.meta).encode()

    @classmethod
    def success(cls, body: Body, mime: str = "text/gemini; charset=utf-8") -> Response:
        return cls(Status.SUCCESS, mime, body)

    @classmethod
    def gemtext(cls, text: str, lang: str | None = None) -> Response:
        mime = "text/gemini; charset=utf-8" + (f"; lang={lang}" if lang else "")
        return cls(Status.SUCCESS, mime, text.encode("utf-8"))

    @classmethod
    def input(cls, prompt: str, *, sensitive: bool = False) -> Response:
        return cls(Status.SENSITIVE_INPUT if sensitive else Status.INPUT, prompt)

    @classmethod
    def redirect(cls, url: str, *, permanent: bool = False) -> Response:
        return cls(Status.REDIRECT_PERMANENT if permanent else Status.REDIRECT_TEMPORARY, url)

    @classmethod
    def temporary_failure(cls, message: str = "temporary failure") -> Response:
        return cls(Status.TEMPORARY_FAILURE, message)

    @classmethod
    def slow_down(cls, seconds: int) -> Response:
        return cls(Status.SLOW_DOWN, str(seconds))

    @classmethod
    def not_found(cls, message: str = "not found") -> Response:
        return cls(Status.NOT_FOUND, message)

    @classmethod
    def gone(cls, message: str = "gone") -> Response:
        return cls(Status.GONE, message)

    @classmethod
    def bad_request(cls, message: str = "bad request") -> Response:
        return cls(Status.BAD_REQUEST, message)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    # Seconds to receive the whole request line, TLS handshake included: slow clients are cut
    # so they cannot hold connection slots.
    request_timeout: float = 10.0
    # Connections served at once; further clients wait in the kernel's accept backlog.
    max_connections: int = 256
    # Seconds any single write may take: a client that stops reading is cut.
    send_timeout: float = 30.0
    # Seconds to keep reading (and discarding) after our last byte before closing; see
    # LingeringStream for why.
    close_linger: float = 2.0
    # Connections one client address may hold at once; one more is closed as soon as it is
    # accepted, before its TLS handshake (gemserve.admission). None: no cap.
    max_connections_per_address: int | None = None
    # The request timeout for connections accepted while more than half of
    # ``max_connections`` are open: idle clients cannot hold a crowded server's slots long.
    crowded_request_timeout: float = 2.0

    def admission(self) -> Admission:
        return Admission(
            per_address=self.max_connections_per_address,
            request_timeout=self.request_timeout,
            crowded_at=self.max_connections // 2,
            crowded_timeout=self.crowded_request_timeout,
        )


def _quick_ack(sock: trio.socket.SocketType) -> None:
    """Acknowledge the client's next segment at once instead of up to 40 ms later.

    A client that leaves Nagle's algorithm on (Python's and many other socket libraries'
    default) sends its request right after its TLS Finished, and Nagle holds the request
    until the Finished is acknowledged. Linux delays that ACK (it piggybacks ACKs on replies,
    and the server has nothing to send yet), so every such request waited about 40 ms
    before it reached us. The option lasts only until the kernel's next mode change, so it
    is set again after each read. Elsewhere (no ``TCP_QUICKACK``) nothing changes.
    """
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


class LingeringStream(trio.abc.HalfCloseableStream):
    """A TCP stream that closes the way careful HTTP servers do ("lingering close").

    Closing a socket that still has unread input makes the kernel send a RST instead of a
    FIN, and a RST can destroy the response (and the close_notify) still in flight to the
    client. That happens whenever a client sends more than we read, e.g. a request longer
    than 1024 bytes. So the close sends FIN first and drains the client's leftovers until it
    closes too, bounded in time and bytes.
    """

    _DRAIN_LIMIT = 256 * 1024

    def __init__(
        self,
        inner: trio.SocketStream,
        linger: float,
        client: str = "",
        request_timeout: float = math.inf,
    ) -> None:
        self._inner = inner
        self._linger = linger
        # Who the connection was counted under, and the deadline it was admitted with.
        self.client = client
        self.request_timeout = request_timeout

    @property
    def socket(self) -> trio.socket.SocketType:
        return self._inner.socket

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._inner.receive_some(max_bytes)
        _quick_ack(self._inner.socket)
        return data

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        try:
            with trio.move_on_after(self._linger):
                await self._inner.send_eof()
                drained = 0
                while drained < self._DRAIN_LIMIT:
                    data = await self._inner.receive_some(65536)
                    if not data:
                        break
                    drained += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client is gone already; nothing left to protect
        finally:
            await self._inner.aclose()


class _Listener(trio.abc.Listener[LingeringStream]):
    """Accepts from one listening socket, possibly shared with sibling server processes.

    With a :class:`ConnectionShare` (the capsule's
    :class:`search_capsule.loadshare.LoadShare`), a process busier than a sibling lets a
    waiting connection go to that sibling first; so this waits for a pending connection,
    then for its turn, and only then accepts (without blocking: the sibling may have taken
    it meanwhile).
    """

    def __init__(
        self,
        listening: socket.socket,
        linger: float,
        share: ConnectionShare | None,
        admission: Admission,
    ) -> None:
        listening.setblocking(False)
        self._socket = listening
        self._linger = linger
        self._share = share
        self._admission = admission

    async def accept(self) -> LingeringStream:
        while True:
            await trio.lowlevel.wait_readable(self._socket)
            if self._share is not None:
                await self._share.wait_turn()
            try:
                connection, address = self._socket.accept()
            except BlockingIOError:
                continue  # another process took it
            except OSError as exc:
                if exc.errno in _CLOSED_ERRNOS:
                    raise trio.ClosedResourceError("the listening socket was closed") from None
                if exc.errno in _IGNORED_ACCEPT_ERRNOS:
                    continue  # that client gave up (or was refused) before we got to it
                raise
            admitted = self._admission.admit(address[0] if isinstance(address, tuple) else "")
            if admitted is None:
                # Over its share: no task, no handshake, no slot; the client sees a close.
                connection.close()
                continue
            client, timeout = admitted
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(connection))
            _quick_ack(stream.socket)
            return LingeringStream(stream, self._linger, client, timeout)

    async def aclose(self) -> None:
        trio.lowlevel.notify_closing(self._socket)
        self._socket.close()
        await trio.lowlevel.checkpoint()


App = Callable[[Request], Awaitable[Response]]
ServerStream = trio.SSLStream[LingeringStream]
RawHandler = Callable[[ServerStream], Awaitable[None]]


# --- the listener --------------------------------------------------------------------------


def bind_sockets(host: str, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Listening sockets for ``host:port`` (every address it resolves to), made before any
    event loop runs, so that several server processes can accept from the same ones."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            listening = socket.socket(family, kind, proto)
            sockets.append(listening)
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listening.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:  # the same port on every address
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            listening.bind(address)
            listening.listen(backlog)
    except OSError:
        for listening in sockets:
            listening.close()
        raise
    return sockets


async def serve_raw(
    handler: RawHandler,
    *,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext,
    limits: ServerLimits = ServerLimits(),
    sockets: list[socket.socket] | None = None,
    share: ConnectionShare | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept TLS connections on ``host:port`` and run ``handler`` for each, until cancelled.

    The handshake happens lazily on the handler's first read or write. After the handler
    returns, a stream it left open is closed *without* close_notify; a handler that wants a
    clean end calls ``await stream.aclose()`` itself. ``task_status.started`` reports the
    bound port (useful with ``port=0``). ``sockets`` (from :func:`bind_sockets`) are used
    instead of binding ``host:port`` when given: the way server processes share a port, and
    ``share`` (when they do) spreads the connections evenly over them.
    """
    if sockets is None:
        sockets = bind_sockets(host, port)
    admission = limits.admission()
    listeners = [
        trio.SSLListener(_Listener(listening, limits.close_linger, share, admission), ssl_context)
        for listening in sockets
    ]
    limiter = trio.CapacityLimiter(limits.max_connections)
    try:
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(
                    _accept_loop, listener, handler, limiter, share, admission, nursery
                )
            bound = sockets[0].getsockname()[1]
            log.info("listening on %s port %d", host, bound)
            task_status.started(bound)
    finally:
        # Free the port at once when cancelled, rather than whenever the GC gets to it.
        for listener in listeners:
            await trio.aclose_forcefully(listener)


async def _accept_loop(
    listener: trio.SSLListener[LingeringStream],
    handler: RawHandler,
    limiter: trio.CapacityLimiter,
    share: ConnectionShare | None,
    admission: Admission,
    nursery: trio.Nursery,
) -> None:
    while True:
        # Take the slot before accepting, so that at the limit new clients queue in the
        # kernel backlog instead of costing us a task and a TLS handshake each.
        token = object()
        await limiter.acquire_on_behalf_of(token)
        try:
            stream = await listener.accept()
        except OSError as exc:
            limiter.release_on_behalf_of(token)
            if exc.errno not in _ACCEPT_RESOURCE_ERRNOS:
                raise
            log.error("accept failed (%s); retrying in %.1f s", exc, _ACCEPT_RETRY_SECONDS)
            await trio.sleep(_ACCEPT_RETRY_SECONDS)
            continue
        except BaseException:
            limiter.release_on_behalf_of(token)
            raise
        if share is not None:
            share.opened()
        nursery.start_soon(_run_connection, handler, stream, limiter, token, share, admission)


async def _run_connection(
    handler: RawHandler,
    stream: ServerStream,
    limiter: trio.CapacityLimiter,
    token: object,
    share: ConnectionShare | None,
    admission: Admission,
) -> None:
    try:
        await handler(stream)
    except _CONNECTION_ERRORS as exc:
        log.debug("connection from %s ended: %r", _peer_of(stream), exc)
    except Exception:
        log.exception("connection handler failed for %s", _peer_of(stream))
    finally:
        try:
            await trio.aclose_forcefully(stream)
        finally:
            limiter.release_on_behalf_of(token)
            admission.release(stream.transport_stream.client)
            if share is not None:
                share.closed()


def _peer_of(stream: ServerStream) -> tuple[str, int]:
    try:
        address = stream.transport_stream.socket.getpeername()
    except OSError:  # the client is already gone
        return ("", 0)
    return (address[0], address[1])


def _local_port_of(stream: ServerStream) -> int:
    return int(stream.transport_stream.socket.getsockname()[1])


# --- Gemini on top -------------------------------------------------------------------------


async def serve(
    app: App,
    *,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext,
    hostnames: Collection[str] | None = None,
    limits: ServerLimits = ServerLimits(),
    sockets: list[socket.socket] | None = None,
    share: ConnectionShare | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` over Gemini until cancelled (``sockets`` and ``share``: see :func:`serve_raw`).

    With ``hostnames``, requests for any other host (or for another port than the one the
    connection arrived on) get 53 PROXY REQUEST REFUSED, as §3.2 asks of servers that are not
    proxies. Without it, any gemini:// host is accepted.
    """
    accepted = accepted_hosts(hostnames)

    async def handle(stream: ServerStream) -> None:
        outcome = await receive_request(stream, limits=limits, hostnames=accepted)
        if isinstance(outcome, Request):
            response = await call_app_while_connected(app, outcome, stream)
            if response is None:
                return  # the client hung up; nobody reads an answer
        else:
            response = outcome
        await respond(stream, response, limits=limits)

    await serve_raw(
        handle,
        host=host,
        port=port,
        ssl_context=ssl_context,
        limits=limits,
        sockets=sockets,
        share=share,
        task_status=task_status,
    )


def accepted_hosts(hostnames: Collection[str] | None) -> frozenset[str] | None:
    """Host names in the form :class:`~sextant.urls.GeminiURL` uses (punycode, lower-case)."""
    if hostnames is None:
        return None
    return frozenset(
        urls.parse(f"gemini://[{name}]/" if ":" in name else f"gemini://{name}/").host
        for name in hostnames
    )


async def receive_request(
    stream: ServerStream,
    *,
    limits: ServerLimits,
    hostnames: frozenset[str] | None = None,
) -> Request | Response:
    """Read and validate one request line; return the request, or the error response to send.

    ``hostnames`` comes from :func:`accepted_hosts`. Errors are 59 BAD REQUEST for anything
    that is not a well-formed absolute URL line (§2), and 53 PROXY REQUEST REFUSED for a
    well-formed request that is not ours to answer (another scheme, host or port). Raises
    ``trio.TooSlowError`` when the client did not even finish the TLS handshake in time.
    The deadline is ``limits.request_timeout``, or the shorter one the connection was
    admitted with when the server was crowded (:mod:`gemserve.admission`).
    """
    timeout = min(limits.request_timeout, stream.transport_stream.request_timeout)
    with trio.move_on_after(timeout):
        line = await _read_request_line(stream)
        return _validate(line, stream, hostnames)
    try:
        stream.version()  # only answers once the handshake is done
    except trio.NeedHandshakeError:
        # Nothing can be said without a finished handshake, and finishing it for a client
        # this slow would hold the slot longer; the caller just drops the connection.
        raise trio.TooSlowError("TLS handshake not completed in time") from None
    return Response.bad_request(f"request not received within {timeout:g} seconds")


async def _read_request_line(stream: ServerStream) -> bytes:
    """Bytes up to and including the first LF, or what came before EOF or the length limit.

    Reads never ask for more than a valid line could still need, so a client cannot make us
    buffer more than ``_MAX_LINE`` bytes. The rest of an over-long line is read and dropped
    (up to a limit) before we answer: input left unread when we close makes the TLS layer
    fail to send close_notify and the kernel answer with a RST, either of which can cost the
    client our 59.
    """
    buffer = bytearray()
    while len(buffer) < _MAX_LINE:
        chunk = await stream.receive_some(_MAX_LINE - len(buffer))
        if not chunk:
            return bytes(buffer)
        newline = chunk.find(b"\n")
        if newline >= 0:
            buffer += chunk[: newline + 1]
            return bytes(buffer)
        buffer += chunk
    discarded = 0
    while discarded < _MAX_DISCARD:
        chunk = await stream.receive_some(65536)
        if not chunk or b"\n" in chunk:
            break
        discarded += len(chunk)
    return bytes(buffer)


def _validate(
    line: bytes,
    stream: ServerStream,
    hostnames: frozenset[str] | None,
) -> Request | Response:
    if len(line) >= _MAX_LINE and not line.endswith(b"\n"):
        return Response.bad_request(f"request is longer than {MAX_REQUEST_BYTES} bytes")
    try:
        raw = parse_request(line)
    except MalformedRequest as exc:
        return Response.bad_request(str(exc))
    if urls.scheme_of(raw) != "gemini":
        return Response(Status.PROXY_REQUEST_REFUSED, "this server only serves gemini:// URLs")
    try:
        url = urls.parse(raw)
    except InvalidURL:
        # The URL module's message echoes the URL; a fixed text keeps client bytes out of meta.
        return Response.bad_request("request is not a valid gemini:// URL")
    if hostnames is not None and (url.host not in hostnames or url.port != _local_port_of(stream)):
        return Response(Status.PROXY_REQUEST_REFUSED, "this server does not serve that host")
    return Request(url=url, raw=raw, peer=_peer_of(stream))


async def call_app(app: App, request: Request) -> Response:
    """Run the app; its failure becomes 42 (CGI error) for this request and nothing more."""
    try:
        response = await app(request)
    except Exception:
        log.exception("application failed on %s", request.url)
        return Response(Status.CGI_ERROR, "internal server error")
    if not isinstance(response, Response):
        log.error("application returned %r for %s, not a Response", response, request.url)
        return Response(Status.CGI_ERROR, "internal server error")
    return response


async def call_app_while_connected(
    app: App, request: Request, stream: ServerStream
) -> Response | None:
    """:func:`call_app`, abandoned (trio-cancelled) if the client hangs up meanwhile: None then.

    A Gemini client sends nothing after its request line (§2), so anything the stream
    reports while the app works is the client going away: EOF (close_notify), a bare TCP
    close, or a reset. Cancelling the app lets it drop work nobody will read, such as a
    search still waiting for the search thread. A client that half-closes its side after
    the request (nothing in the spec asks for it) is taken for gone as well.
    """
    response: Response | None = None
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            await _until_hung_up(stream)
            log.debug("client %s hung up before its answer", request.peer)
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        response = await call_app(app, request)
        nursery.cancel_scope.cancel()
    return response


async def _until_hung_up(stream: ServerStream) -> None:
    """Return when the client ends its side of the connection; bytes it sends are dropped
    (up to ``_MAX_DISCARD``, after which it is not watched any more)."""
    discarded = 0
    while discarded < _MAX_DISCARD:
        try:
            chunk = await stream.receive_some(4096)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not chunk:
            return
        discarded += len(chunk)
    await trio.sleep_forever()


async def respond(
    stream: ServerStream,
    response: Response,
    *,
    limits: ServerLimits,
) -> None:
    """Send header and body, then close with close_notify (§4) so the client knows the body
    is complete. If the body fails half-way, the connection is cut *without* close_notify:
    that is how a Gemini client can tell a truncated body from a finished one."""
    body = response.body
    try:
        if isinstance(body, bytes):
            # One write for header and body: fewer TLS records and packets for small pages.
            await _send(stream, response.header + body, limits)
        else:
            await _send(stream, response.header, limits)
            if body is not None:
                async for chunk in body:
                    if chunk:
                        await _send(stream, chunk, limits)
    except _CONNECTION_ERRORS:
        raise
    except Exception:
        log.exception("response body failed; cutting the connection without close_notify")
        await trio.aclose_forcefully(stream)
        return
    finally:
        await _close_iterator(body)
    with trio.move_on_after(limits.send_timeout):
        await stream.aclose()


async def _send(stream: ServerStream, data: bytes, limits: ServerLimits) -> None:
    with trio.fail_after(limits.send_timeout):
        await stream.send_all(data)


async def _close_iterator(body: Any) -> None:
    """Let an async generator body run its cleanup even when the client went away."""
    aclose = getattr(body, "aclose", None)
    if aclose is not None:
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await aclose()
