"""Which accepted connections the server serves, decided before any TLS work is spent on them.

One address opening thousands of idle connections used to take every connection slot for
the whole request timeout: measured on the search capsule, 2,500 idle connections from one
address delayed a normal request by 7-17 s. So each client address may hold at most
``per_address`` connections; one more is closed the moment it is accepted, before its TLS
handshake. And when the server is crowded (more than half of its connections open), new
connections get a short deadline for their handshake and request, so that idle connections
from many addresses cannot hold the slots for long either.

Clients are counted by address, an IPv6 client by its /64: one host usually has a whole
/64 to itself, and counting its addresses one by one would let it multiply its share.
"""

from __future__ import annotations

import ipaddress
import math


def client_key(host: str) -> str:
    """The name one client is counted under: its IPv4 address, or its IPv6 /64."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host  # not an IP address (a Unix socket, a test): count it as it is
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is not None:
            return str(mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class Admission:
    """Open connections per client in one server process, and the deadline each new one gets.

    ``per_address`` None means no cap per address. ``crowded_at`` open connections (in all)
    is where new ones start getting ``crowded_timeout`` instead of ``request_timeout``.
    """

    def __init__(
        self,
        *,
        per_address: int | None,
        request_timeout: float,
        crowded_at: int,
        crowded_timeout: float,
    ) -> None:
        if per_address is not None and per_address < 1:
            raise ValueError("per_address must be at least 1 (or None for no cap)")
        self.per_address = per_address
        self.request_timeout = request_timeout
        self.crowded_at = crowded_at
        self.crowded_timeout = crowded_timeout
        self.open = 0
        self.refused = 0
        self._by_client: dict[str, int] = {}

    def admit(self, host: str) -> tuple[str, float] | None:
        """Count a new connection from ``host``: its client key and request deadline, or
        None when that client already holds its share (the caller closes it at once)."""
        client = client_key(host)
        held = self._by_client.get(client, 0)
        if self.per_address is not None and held >= self.per_address:
            self.refused += 1
            return None
        self._by_client[client] = held + 1
        timeout = self.crowded_timeout if self.open >= self.crowded_at else self.request_timeout
        self.open += 1
        return client, min(timeout, self.request_timeout)

    def release(self, client: str) -> None:
        """The connection that :meth:`admit` counted for ``client`` has ended."""
        self.open -= 1
        held = self._by_client.pop(client, 0) - 1
        if held > 0:
            self._by_client[client] = held

    def held_by(self, host: str) -> int:
        return self._by_client.get(client_key(host), 0)


def share_of(total: int | None, processes: int) -> int | None:
    """Each of ``processes`` processes' part of a per-client ``total`` (rounded up, at least 1).

    Processes keep their own counts (connections are spread over them evenly), so a client
    can hold ``processes`` times the share in all: documented as the total.
    """
    if total is None:
        return None
    return max(1, math.ceil(total / processes))
