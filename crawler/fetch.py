"""One Gemini request over TLS, with every limit enforced and every failure turned into a value.

This is the only module that sees trio, ``ssl`` and socket exceptions: it translates them into
:mod:`sextant.errors` types inside a :class:`FetchResult`, so the engine deals with outcomes,
never with transport details. Nothing the network or a server does makes :func:`fetch` raise;
cancellation (Ctrl-C, a cancelled nursery) does propagate, because swallowing it would make a
crawl impossible to stop.

Spec references are to the Gemini protocol specification (geminiprotocol.net): §2 requests,
§3.1 response headers, §3.3 bodies, §4 TLS (SNI, close_notify).
"""

from __future__ import annotations

import ipaddress
import math
import os
import socket
import ssl
from dataclasses import dataclass
from functools import cache, lru_cache

import trio

from sextant.errors import ConnectFailed, FetchError, FetchTimeout, InvalidURL, MalformedHeader
from sextant.protocol import MAX_HEADER_BYTES, Family, MimeType, ResponseHeader, build_request
from sextant.tls import CertificateFacts, certificate_facts, client_context
from sextant.urls import GeminiURL

_BOM = b"\xef\xbb\xbf"
_RECEIVE_BYTES = 64 * 1024

# Feeds are worth reading even though their type is not text/*: they list a capsule's posts.
_INDEXABLE_APPLICATION_TYPES = frozenset(
    {"application/atom+xml", "application/rss+xml", "application/xml"}
)

# Everything the transport can throw at us for something the peer (or the path to it) did.
# ssl.SSLError and socket errors are OSError subclasses.
_TRANSPORT_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


@dataclass(frozen=True, slots=True)
class FetchLimits:
    connect_timeout: float = 10.0  # TCP connect and TLS handshake
    header_timeout: float = 15.0  # from the TCP connection to a complete header line
    total_timeout: float = 60.0
    min_rate: float = 512.0  # body bytes/s averaged after `rate_grace` seconds: drips are cut
    rate_grace: float = 5.0
    max_body_bytes: int = 5 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "header_timeout", "total_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds")
        if self.min_rate < 0 or self.rate_grace < 0:
            raise ValueError("min_rate and rate_grace must not be negative (0 turns the check off)")
        if self.max_body_bytes < 0:
            raise ValueError("max_body_bytes must not be negative")


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What one request produced. ``ok`` means a valid header arrived and nothing failed after.

    On a failure after the header (a timeout mid-body) ``body`` keeps what arrived, marked
    ``possibly_truncated``, so the engine can log its size; such a result is not ``ok``.
    """

    url: GeminiURL
    address: str | None  # the IP we connected to
    duration: float  # seconds
    header: ResponseHeader | None = None  # None when the fetch failed before a valid header
    body: bytes | None = None  # 2x only; possibly cut at the size limit
    truncated: bool = False  # cut at max_body_bytes (kept, marked)
    possibly_truncated: bool = False  # ended without TLS close_notify (§4: not an error)
    body_skipped: bool = False  # a type we cannot index: header read, connection closed
    tls_version: str | None = None  # "TLSv1.3"
    certificate: CertificateFacts | None = None
    error: FetchError | MalformedHeader | None = None  # never raised
    mime: MimeType | None = None  # parsed 2x meta
    bytes_read: int = 0  # everything received after the handshake, header included

    @property
    def ok(self) -> bool:
        return self.error is None and self.header is not None


def indexable_mime(mime: MimeType) -> bool:
    """Whether we read a body of this type: text of any kind and XML feeds; the rest (images,
    audio, archives...) is recorded from its header alone."""
    return mime.is_text or mime.essence in _INDEXABLE_APPLICATION_TYPES


@lru_cache(maxsize=4096)
def _certificate_facts(der: bytes) -> CertificateFacts:
    # A capsule serves the same certificate for months, and reading one (parsing, checking
    # the self-signature) measured about 0.3 ms: a third of a crawled page's CPU.
    return certificate_facts(der)


@cache
def _default_context() -> ssl.SSLContext:
    # Building a context costs about a millisecond; one per process is enough.
    return client_context()


@lru_cache(maxsize=4096)
def _server_name(host: str) -> str | None:
    """The SNI to send for ``host``: §4 makes it mandatory for host names (punycode, as
    url.host already is); RFC 6066 forbids it for IP addresses."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    return None


@lru_cache(maxsize=4096)
def _address_family(address: str) -> socket.AddressFamily | None:
    """The family of an IP literal we can connect to without any lookup, else ``None``.

    Scoped IPv6 addresses (``fe80::1%eth0``) are left to trio's resolution, which knows how
    to turn the scope into the socket address's scope id.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if ip.version == 4:
        return socket.AF_INET
    return None if "%" in address else socket.AF_INET6


@lru_cache(maxsize=256)
def _mime_type(meta: str) -> MimeType:
    # Nearly every page of a crawl has one of a handful of metas; MimeType is immutable.
    return MimeType.parse(meta)


async def _open_tcp(address: str, port: int) -> trio.SocketStream:
    """A TCP connection to ``address``, raising OSError like the socket's connect.

    The engine hands us addresses it already resolved (or pinned), so for IP literals the
    getaddrinfo call, nursery and task of trio.open_tcp_stream's happy-eyeballs machinery are
    pure overhead: about a tenth of the fetch's own CPU. Only scoped IPv6 literals still go
    through it. A host *name* is refused: resolving it here would connect to an address
    nobody checked against the public-address rule (crawler/resolver.py).
    """
    family = _address_family(address)
    if family is None:
        try:
            ipaddress.ip_address(address)  # a scoped IPv6 literal
        except ValueError:
            raise OSError(
                f"{address!r} is not an IP address (fetch never resolves names)"
            ) from None
        return await trio.open_tcp_stream(address, port)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setblocking(False)
        try:
            sock.connect((address, port))
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                raise OSError(error, os.strerror(error)) from None
        else:
            await trio.lowlevel.checkpoint()
    except BaseException:
        sock.close()
        raise
    # SocketStream sets TCP_NODELAY, so the small request line never waits on Nagle.
    return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


def _describe(exc: BaseException) -> str:
    """A one-line account of a transport error, looking through trio's wrapping."""
    inner = exc
    # trio wraps ssl errors in BrokenResourceError, and a failed connect in an OSError caused
    # by a group of per-address errors (one here), each caused by the socket's own error.
    for _ in range(4):
        cause = inner.__cause__
        if isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        if cause is None or isinstance(inner, ssl.SSLError):
            break
        inner = cause
    if isinstance(inner, ssl.SSLEOFError):
        return "connection closed abruptly (no TLS close_notify)"
    if isinstance(inner, ssl.SSLError):
        reason = inner.reason or str(inner)
        if reason == "WRONG_VERSION_NUMBER":
            return "TLS error: WRONG_VERSION_NUMBER (the server does not speak TLS here)"
        return f"TLS error: {reason}"
    if isinstance(inner, OSError) and inner.errno:
        return os.strerror(inner.errno)  # trio's strerror repeats the address we already name
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror
    return str(inner) or type(inner).__name__


class _Exchange:
    """The state of one fetch in progress; :func:`fetch` turns it into a FetchResult."""

    def __init__(self, url: GeminiURL, address: str, limits: FetchLimits) -> None:
        self.url = url
        self.address = address
        self.limits = limits
        self.started = trio.current_time()
        self.connected = self.started  # moved to the end of the TCP connect
        self.tcp: trio.SocketStream | None = None
        self.stream: trio.SSLStream[trio.SocketStream] | None = None
        self.header: ResponseHeader | None = None
        self.mime: MimeType | None = None
        self.body: bytearray | None = None
        self.truncated = False
        self.possibly_truncated = False
        self.body_skipped = False
        self.tls_version: str | None = None
        self.certificate: CertificateFacts | None = None
        self.bytes_read = 0

    def result(self, error: FetchError | MalformedHeader | None) -> FetchResult:
        return FetchResult(
            url=self.url,
            address=self.address,
            duration=trio.current_time() - self.started,
            header=self.header,
            body=None if self.body is None else bytes(self.body),
            truncated=self.truncated,
            possibly_truncated=self.possibly_truncated,
            body_skipped=self.body_skipped,
            tls_version=self.tls_version,
            certificate=self.certificate,
            error=error,
            mime=self.mime,
            bytes_read=self.bytes_read,
        )

    async def connect(self, context: ssl.SSLContext) -> None:
        """TCP then TLS; raises ConnectFailed or FetchTimeout."""
        with trio.move_on_at(self.started + self.limits.connect_timeout) as scope:
            try:
                tcp = self.tcp = await _open_tcp(self.address, self.url.port)
            except OSError as exc:
                raise ConnectFailed(
                    f"cannot connect to {self.address} port {self.url.port}: {_describe(exc)}"
                ) from None
            self.connected = trio.current_time()
            sni = _server_name(self.url.host)
            stream = trio.SSLStream(tcp, context, server_hostname=sni, https_compatible=False)
            self.stream = stream
            try:
                await stream.do_handshake()
            except _TRANSPORT_ERRORS as exc:
                raise ConnectFailed(
                    f"TLS handshake with {self.address} failed: {_describe(exc)}"
                ) from None
        if scope.cancelled_caught:
            raise FetchTimeout(
                f"no TLS connection to {self.address} port {self.url.port} "
                f"within {self.limits.connect_timeout:g} s"
            )
        self.tls_version = stream.version()
        der = stream.getpeercert(binary_form=True)
        if der:
            try:
                self.certificate = _certificate_facts(der)
            except ValueError:
                self.certificate = None  # unreadable: TOFU sees "no certificate facts"

    async def exchange(self, request: bytes) -> None:
        """Send the request, read the header and, when it is worth it, the body."""
        stream = self.stream
        assert stream is not None
        await stream.send_all(request)
        rest = await self._read_header(stream)
        header = self.header
        assert header is not None
        if header.family != Family.SUCCESS:
            return  # §3.2: only 2x responses have a body
        self.mime = _mime_type(header.meta)  # MalformedHeader if it is no MIME type
        if not indexable_mime(self.mime):
            self.body_skipped = True
            return
        await self._read_body(stream, rest)

    async def _read_header(self, stream: trio.SSLStream[trio.SocketStream]) -> bytes:
        """Read up to the first LF; return the bytes after it (the start of the body)."""
        deadline = self.connected + self.limits.header_timeout
        buffer = bytearray()
        with trio.move_on_at(deadline):
            while True:
                newline = buffer.find(b"\n")
                limit = MAX_HEADER_BYTES + (len(_BOM) if buffer.startswith(_BOM) else 0)
                if newline >= 0:
                    if newline + 1 > limit:
                        break
                    self.header = ResponseHeader.parse(bytes(buffer[: newline + 1]))
                    return bytes(buffer[newline + 1 :])
                if len(buffer) >= limit:
                    break
                try:
                    data = await stream.receive_some(_RECEIVE_BYTES)
                except _TRANSPORT_ERRORS as exc:
                    raise self._header_cut_short(buffer, _describe(exc)) from None
                if not data:
                    raise self._header_cut_short(buffer, "connection closed")
                self.bytes_read += len(data)
                buffer += data
            raise MalformedHeader(
                f"header line longer than {MAX_HEADER_BYTES} bytes (§3.1 allows a 1024-byte meta)"
            )
        raise FetchTimeout(
            f"no complete header line within {self.limits.header_timeout:g} s "
            f"({len(buffer)} bytes received without a line end)"
        )

    @staticmethod
    def _header_cut_short(buffer: bytearray, why: str) -> FetchError | MalformedHeader:
        if not buffer:
            return FetchError(f"{why} before any response header")
        return MalformedHeader(f"{why} after {len(buffer)} bytes of header without a line end")

    async def _read_body(self, stream: trio.SSLStream[trio.SocketStream], rest: bytes) -> None:
        limits = self.limits
        body = self.body = bytearray(rest[: limits.max_body_bytes])
        if len(rest) > limits.max_body_bytes:
            self.truncated = True
            return
        start = trio.current_time()
        while True:
            # If nothing more arrives, the average rate falls below min_rate at this moment;
            # waiting on that deadline cuts a drip (or a silent stall) without polling.
            rate_deadline = (
                start + max(limits.rate_grace, len(body) / limits.min_rate)
                if limits.min_rate
                else math.inf
            )
            with trio.move_on_at(rate_deadline) as scope:
                try:
                    data = await stream.receive_some(_RECEIVE_BYTES)
                except _TRANSPORT_ERRORS:
                    # §4: a server should end with close_notify, many just close the socket.
                    # trio reports that as a broken stream; the body so far is kept.
                    self.possibly_truncated = True
                    return
            if scope.cancelled_caught:
                self.possibly_truncated = True
                elapsed = trio.current_time() - start
                raise FetchTimeout(
                    f"body slower than {limits.min_rate:g} bytes/s "
                    f"({len(body)} bytes in {elapsed:.1f} s)"
                )
            if not data:
                return  # close_notify: the body is complete
            self.bytes_read += len(data)
            room = limits.max_body_bytes - len(body)
            if len(data) > room:
                body += data[:room]
                self.truncated = True
                return
            body += data


async def fetch(
    url: GeminiURL,
    *,
    address: str,
    limits: FetchLimits = FetchLimits(),
    ssl_context: ssl.SSLContext | None = None,
) -> FetchResult:
    """Fetch ``url`` from ``address`` (already resolved). Never raises for network trouble."""
    state = _Exchange(url, address, limits)
    error: FetchError | MalformedHeader | None = None
    try:
        request = build_request(str(url))
    except InvalidURL as exc:  # only a GeminiURL built by hand, bypassing urls.parse
        return state.result(FetchError(f"cannot request {url}: {exc}"))
    try:
        with trio.move_on_at(state.started + limits.total_timeout) as total:
            try:
                await state.connect(ssl_context or _default_context())
                await state.exchange(request)
            except (FetchError, MalformedHeader) as exc:
                error = exc
            except _TRANSPORT_ERRORS as exc:
                # Only sending the request can get here: every read handles its own errors.
                error = FetchError(f"connection lost while sending the request: {_describe(exc)}")
        if total.cancelled_caught:
            if state.body is not None:
                state.possibly_truncated = True
            error = FetchTimeout(f"request took longer than {limits.total_timeout:g} s in total")
    finally:
        if state.tcp is not None:
            # Forceful: a server still streaming an image or a drip must not hold us up, and
            # we owe no close_notify to a peer that may have vanished. Closing the TCP stream
            # itself sends exactly what aclose_forcefully(SSLStream) did (its close_notify is
            # cancelled before it reaches the socket) without building that alert first.
            await trio.aclose_forcefully(state.tcp)
    return state.result(error)
