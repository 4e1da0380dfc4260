"""Host name to address, with curl-style pins and a small cache.

Politeness is enforced per server address as well as per host (many capsules share one IP),
so the engine needs the address before it queues a request; resolving once per host and
remembering the answer for a while also keeps a crawl from flooding the local DNS resolver.

``--resolve HOST:PORT:ADDR`` pins work like curl's: the crawl can be pointed at test capsules on
loopback while URLs, SNI and the store keep the real host names.

Every address the crawler connects to comes from :meth:`Resolver.resolve`, so that is where
the public-address rule (:mod:`sextant.addresses`) is enforced: on the answer itself, after
resolution, and the caller connects to exactly the address that was checked, so a DNS answer
that changes between a check and a connection (rebinding) has nothing to slip through. Only
hosts the operator named (a pin, an exact ``--allow-host``) or a run with ``--allow-private``
may resolve to loopback, private or other non-public addresses.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping

import trio

from sextant.addresses import numeric_host, refusal
from sextant.errors import AddressRefused, ConnectFailed, InvalidURL
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


def _never(host: str, port: int) -> bool:
    return False


class Resolver:
    def __init__(
        self,
        pins: Mapping[tuple[str, int], str] | None = None,
        *,
        may_reach_private: Callable[[str, int], bool] = _never,
        ttl: float = DEFAULT_TTL,
        negative_ttl: float = NEGATIVE_TTL,
        lookup_timeout: float = LOOKUP_TIMEOUT,
    ) -> None:
        self._pins = dict(pins or {})
        self._may_reach_private = may_reach_private
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
        """The address to connect to for ``host:port``; raises :class:`ConnectFailed`, or
        :class:`AddressRefused` when the address is not public and the host was not named.

        Pins first (a pin names its host, so any address goes), then numeric hosts read as
        the C library reads them (``127.1`` is 127.0.0.1), then the system resolver (the
        first answer we may use, in getaddrinfo's RFC 6724 order).
        """
        pinned = self._pins.get((host, port))
        if pinned is not None:
            return pinned
        numeric = numeric_host(host)
        if numeric is not None:
            return self._checked(host, port, numeric.compressed)
        key = (host, port)
        now = trio.current_time()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            if isinstance(cached[1], ConnectFailed):
                raise ConnectFailed(str(cached[1]))
            return self._checked(host, port, cached[1])
        try:
            answers = await self._lookup(host, port)
        except ConnectFailed as exc:
            self._cache[key] = (trio.current_time() + self._negative_ttl, exc)
            raise
        if not self._may_reach_private(host, port):
            # A public answer first, if there is one (sorted keeps getaddrinfo's order).
            answers.sort(key=lambda address: refusal(address) is not None)
        self._cache[key] = (trio.current_time() + self._ttl, answers[0])
        return self._checked(host, port, answers[0])

    def _checked(self, host: str, port: int, address: str) -> str:
        """``address``, unless the public-address rule refuses it (AddressRefused).

        Checked on every call, cached answers included: the check costs a dictionary
        lookup, and it is the answer about to be connected to that must pass it.
        """
        why = refusal(address)
        if why is None or self._may_reach_private(host, port):
            return address
        said = f"{address} is" if host == address else f"{host} resolves to {address},"
        raise AddressRefused(
            f"not contacted: {said} {why}; the crawler only connects to public addresses "
            "unless the host is named with --allow-host or --resolve, "
            "or the crawl runs with --allow-private"
        )

    async def _lookup(self, host: str, port: int) -> list[str]:
        with trio.move_on_after(self._lookup_timeout):
            try:
                answers = await trio.socket.getaddrinfo(
                    host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                )
            except (OSError, UnicodeError) as exc:
                # gaierror for unknown names; UnicodeError for names the idna codec refuses.
                reason = getattr(exc, "strerror", None) or str(exc)
                raise ConnectFailed(f"cannot resolve {host}: {reason}") from None
            addresses = [str(sockaddr[0]) for *_, sockaddr in answers]
            if not addresses:
                raise ConnectFailed(f"cannot resolve {host}: no addresses")
            return addresses
        raise ConnectFailed(f"cannot resolve {host}: no answer within {self._lookup_timeout:g} s")
