"""Which IP addresses a crawler for the public Geminispace may connect to.

Anyone can make the crawler visit a URL (a link on a page, a redirect, the search capsule's
add-seed form), so without a rule it would connect wherever it is told: the machine it runs
on, the network behind it, a cloud's metadata service. Only *public* unicast addresses are
fair game; everything else is refused with a reason unless the operator asked for it.

Two pure functions, no sockets:

* :func:`numeric_host` reads a host the way the system resolver does before any DNS: the
  C library's ``inet_aton`` accepts ``127.1``, ``0x7f.0.0.1``, ``0177.0.0.1`` and
  ``2130706433`` as 127.0.0.1, so a check on the dotted-quad spelling alone is a check on
  nothing;
* :func:`refusal` says why an address is not public, or ``None`` if it is. The ranges are
  IANA's special-purpose registries (RFC 6890 and successors), spelt out here rather than
  taken from :mod:`ipaddress` because its flags changed between Python versions; IPv6 forms
  that carry an IPv4 address (mapped, NAT64, 6to4, Teredo) are judged by that address too.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Most specific first where ranges nest; the first match gives the reason.
_IPV4_RANGES: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("255.255.255.255/32"), "the broadcast address"),
    (_V4("0.0.0.0/32"), "the unspecified address"),
    (_V4("0.0.0.0/8"), "a 'this network' address (0.0.0.0/8)"),
    (_V4("10.0.0.0/8"), "a private address (10.0.0.0/8)"),
    (_V4("100.64.0.0/10"), "a carrier-grade NAT address (100.64.0.0/10)"),
    (_V4("127.0.0.0/8"), "a loopback address (127.0.0.0/8)"),
    (_V4("169.254.0.0/16"), "a link-local address (169.254.0.0/16)"),
    (_V4("172.16.0.0/12"), "a private address (172.16.0.0/12)"),
    (_V4("192.0.0.0/24"), "an IETF protocol address (192.0.0.0/24)"),
    (_V4("192.0.2.0/24"), "a documentation address (192.0.2.0/24)"),
    (_V4("192.88.99.0/24"), "a reserved 6to4 relay address (192.88.99.0/24)"),
    (_V4("192.168.0.0/16"), "a private address (192.168.0.0/16)"),
    (_V4("198.18.0.0/15"), "a benchmarking address (198.18.0.0/15)"),
    (_V4("198.51.100.0/24"), "a documentation address (198.51.100.0/24)"),
    (_V4("203.0.113.0/24"), "a documentation address (203.0.113.0/24)"),
    (_V4("224.0.0.0/4"), "a multicast address (224.0.0.0/4)"),
    (_V4("240.0.0.0/4"), "a reserved address (240.0.0.0/4)"),
)

_IPV6_RANGES: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "the unspecified address"),
    (_V6("::1/128"), "the loopback address (::1)"),
    (_V6("64:ff9b:1::/48"), "a local-use NAT64 address (64:ff9b:1::/48)"),
    # After the NAT64 ranges it holds; IPv4-compatible ::a.b.c.d among the rest.
    (_V6("::/8"), "a reserved address (::/8)"),
    (_V6("100::/64"), "a discard-only address (100::/64)"),
    (_V6("2001:2::/48"), "a benchmarking address (2001:2::/48)"),
    (_V6("2001:db8::/32"), "a documentation address (2001:db8::/32)"),
    (_V6("2001:10::/28"), "a deprecated ORCHID address (2001:10::/28)"),
    (_V6("3fff::/20"), "a documentation address (3fff::/20)"),
    (_V6("5f00::/16"), "a segment-routing address (5f00::/16)"),
    (_V6("fc00::/7"), "a unique local (private) address (fc00::/7)"),
    (_V6("fe80::/10"), "a link-local address (fe80::/10)"),
    (_V6("fec0::/10"), "a site-local address (fec0::/10)"),
    (_V6("ff00::/8"), "a multicast address (ff00::/8)"),
)

_NAT64 = _V6("64:ff9b::/96")


def numeric_host(host: str) -> IPAddress | None:
    """The address a numeric ``host`` stands for, as the system resolver reads it; else None.

    IPv6 literals (with or without brackets) are read by :mod:`ipaddress`. IPv4 follows
    ``inet_aton``: one to four dot-separated parts, each decimal, octal (leading ``0``) or hex
    (``0x``); the last part fills the remaining bytes, so ``10.1`` is 10.0.0.1 and
    ``169.254.43518`` is 169.254.169.254. Anything the C library would refuse (a part too
    large, ``8`` in an octal part, a fifth part) is no number: the resolver would look it up
    as a name, which the crawler's check on the resolved address then covers.
    """
    text = host.removeprefix("[").removesuffix("]")
    if len(text) > 253:
        return None  # no host name is longer; and int() of thousands of digits is slow
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        value = _inet_aton_part(part)
        if value is None:
            return None
        values.append(value)
    *leading, last = values
    if any(value > 0xFF for value in leading) or last >= 1 << (8 * (4 - len(leading))):
        return None
    number = last
    for index, value in enumerate(leading):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def _inet_aton_part(part: str) -> int | None:
    if not part.isascii():
        return None
    lowered = part.lower()
    if lowered.startswith("0x"):
        digits = lowered[2:]
        # A bare "0x" is no number to glibc (2.36) or musl: both need a digit after it.
        if not digits or any(c not in "0123456789abcdef" for c in digits):
            return None
        return int(digits, 16)
    if not lowered.isdigit():
        return None
    if len(lowered) > 1 and lowered.startswith("0"):
        return int(lowered, 8) if all(c in "01234567" for c in lowered) else None
    return int(lowered)


@lru_cache(maxsize=4096)
def refusal(address: str) -> str | None:
    """Why the crawler must not connect to ``address`` (an IP literal), or None if it may.

    Cached: a crawl asks for the same few thousand addresses over and over. A scope
    (``fe80::1%eth0``) does not change the verdict. Text that is no IP address at all is
    refused too: whoever connects would have to resolve it first, unchecked.
    """
    try:
        ip = ipaddress.ip_address(address.removeprefix("[").removesuffix("]"))
    except ValueError:
        return "not an IP address"
    return classify(ip)


def classify(ip: IPAddress) -> str | None:
    """:func:`refusal` for a parsed address."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _first_match(ip, _IPV4_RANGES)
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        carrier, inner = embedded
        reason = _first_match(inner, _IPV4_RANGES)
        return None if reason is None else f"{carrier} of {inner}, {reason}"
    return _first_match(ip, _IPV6_RANGES)


def _first_match(
    ip: IPAddress, ranges: tuple[tuple[_V4, str], ...] | tuple[tuple[_V6, str], ...]
) -> str | None:
    for network, reason in ranges:
        if ip in network:
            return reason
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 form delivers to, when it is one that does.

    Mapped addresses reach the IPv4 host from a dual-stack socket; NAT64 and 6to4 are
    translated or tunnelled to it; a Teredo address's packets go to its client's IPv4
    address. A private address wrapped in any of them is still private.
    """
    if ip.ipv4_mapped is not None:
        return "an IPv4-mapped form", ip.ipv4_mapped
    if ip in _NAT64:
        return "a NAT64 form", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "a 6to4 form", ip.sixtofour
    if ip.teredo is not None:
        server, client = ip.teredo
        for inner in (client, server):
            if _first_match(inner, _IPV4_RANGES) is not None:
                return "a Teredo form", inner
        return "a Teredo form", client
    return None
