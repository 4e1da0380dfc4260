"""Host name to address, with curl-style pins and a small cache.

Politeness is enforced per server address as well as per host (many capsules share one IP),
so the engine needs the address before it queues a request; resolving once per host and
remembering the answer for a while also keeps a crawl from flooding the local DNS resolver.

``--resolve HOST:PORT:ADDR`` pins work like curl's: the crawl can be pointed at test capsules on
loopback while URLs, SNI and the store keep the real host names.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping

import trio

from sextant.errors import ConnectFailed, InvalidURL
from sextant.urls import parse

DEFAULT_TTL = 300.0  # seconds an answer is reused; capsule addresses rarely move
NEGATIVE_TTL = 60.0  # a failed lookup is not retried for every queued URL of a dead host
LOOKUP_TIMEOUT = 10.0


def _ip_literal(text: str) -> str | None:
    """The canonical form of an IP address, or ``None`` if ``text`` is not one."""
    try:
        return ipaddress.ip_address(text.removeprefix("[").removesuffix("]")).compressed
    except ValueError:
        return None


class Resolver:
    def __init__(
        self,
        pins: Mapping[tuple[str, int], str] | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        negative_ttl: float = NEGATIVE_TTL,
        lookup_timeout: float = LOOKUP_TIMEOUT,
    ) -> None:
        self._pins = dict(pins or {})
        self._ttl = ttl
        self._negative_ttl = negative_ttl
        self._lookup_timeout = lookup_timeout
        # (host, port) -> (expiry on trio's clock, address or the failure to repeat)
        self._cache: dict[tuple[str, int], tuple[float, str | ConnectFailed]] = {}

    @property
    def pins(self) -> Mapping[tuple[str, int], str]:
        return dict(self._pins)

    @staticmethod
    def parse_pin(text: str) -> tuple[tuple[str, int], str]:
        """Parse ``HOST:PORT:ADDR`` (curl's ``--resolve``); ADDR may be IPv6, bracketed or not.

        The host is normalized like a URL host (lower case, punycode) so the pin matches the
        hosts of parsed URLs. Raises :class:`InvalidURL` (a ``ValueError``) saying what is wrong.
        """
        host, sep1, rest = text.strip().partition(":")
        port_text, sep2, address_text = rest.partition(":")
        if not (sep1 and sep2) or not host or not address_text:
            raise InvalidURL(
                f"--resolve {text!r}: expected HOST:PORT:ADDRESS, e.g. example.org:1965:127.0.0.1"
            )
        if not port_text.isascii() or not port_text.isdigit():
            raise InvalidURL(f"--resolve {text!r}: port {port_text!r} is not a number")
        address = _ip_literal(address_text)
        if address is None:
            raise InvalidURL(f"--resolve {text!r}: {address_text!r} is not an IP address")
        try:
            url = parse(f"gemini://{host}:{port_text}/")
        except InvalidURL as exc:
            raise InvalidURL(f"--resolve {text!r}: {exc}") from None
        return (url.host, url.port), address

    async def resolve(self, host: str, port: int) -> str:
        """The address to connect to for ``host:port``; raises :class:`ConnectFailed`.

        Pins first, then IP literals as they are, then the system resolver (first answer,
        which getaddrinfo orders by the RFC 6724 preference rules).
        """
        pinned = self._pins.get((host, port))
        if pinned is not None:
            return pinned
        literal = _ip_literal(host)
        if literal is not None:
            return literal
        key = (host, port)
        now = trio.current_time()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            if isinstance(cached[1], ConnectFailed):
                raise ConnectFailed(str(cached[1]))
            return cached[1]
        try:
            address = await self._lookup(host, port)
        except ConnectFailed as exc:
            self._cache[key] = (trio.current_time() + self._negative_ttl, exc)
            raise
        self._cache[key] = (trio.current_time() + self._ttl, address)
        return address

    async def _lookup(self, host: str, port: int) -> str:
        with trio.move_on_after(self._lookup_timeout):
            try:
                answers = await trio.socket.getaddrinfo(
                    host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                )
            except (OSError, UnicodeError) as exc:
                # gaierror for unknown names; UnicodeError for names the idna codec refuses.
                reason = getattr(exc, "strerror", None) or str(exc)
                raise ConnectFailed(f"cannot resolve {host}: {reason}") from None
            for _family, _type, _proto, _name, sockaddr in answers:
                return str(sockaddr[0])
            raise ConnectFailed(f"cannot resolve {host}: no addresses")
        raise ConnectFailed(f"cannot resolve {host}: no answer within {self._lookup_timeout:g} s")
