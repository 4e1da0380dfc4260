"""Per-client rate limiting for the pages that cost real work (searches, store queries).

A token bucket per client address: ``burst`` requests at once, then ``rate`` per second.
A client over its budget gets ``44 SLOW DOWN`` with the seconds until its next token
(spec, Appendix 1: the meta is the wait in seconds), which well-behaved clients and
crawlers honour. One busy client therefore cannot starve the others, while a person
paging through results never notices.

Requests are not all alike: a search can take the search thread for a millisecond or for
its whole budget. So after a search, :meth:`Throttle.charge` takes one more token per
``cost_unit`` seconds of search-thread time it used; the bucket may go below zero, and a
client that ran costly queries waits until it has paid them off. A costly query thus uses
up more of its address's allowance than a cheap one, and one address cannot keep the
search thread for long.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class SlowDown(Exception):
    """A client must wait ``seconds`` before its next costly page (the app answers 44)."""

    def __init__(self, seconds: int) -> None:
        super().__init__(f"slow down for {seconds} s")
        self.seconds = seconds


class Throttle:
    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        cost_unit: float = 0.025,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 10_000,
    ) -> None:
        if rate <= 0 or burst < 1 or cost_unit <= 0:
            raise ValueError("rate and cost_unit must be positive and burst at least 1")
        self.rate = rate
        self.burst = burst
        self.cost_unit = cost_unit
        self._clock = clock
        self._max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, updated)

    def take(self, client: str) -> int:
        """Spend one token for ``client``: 0 when allowed, else the seconds to wait (>= 1)."""
        now = self._clock()
        tokens = self._tokens(client, now)
        if tokens >= 1.0:
            self._buckets[client] = (tokens - 1.0, now)
            if len(self._buckets) > self._max_clients:
                self._forget_idle(now)
            return 0
        self._buckets[client] = (tokens, now)
        return max(1, math.ceil((1.0 - tokens) / self.rate))

    def charge(self, client: str, seconds: float) -> None:
        """Charge ``client`` for ``seconds`` of search-thread time (one token per cost unit)."""
        now = self._clock()
        tokens = self._tokens(client, now) - max(0.0, seconds) / self.cost_unit
        self._buckets[client] = (tokens, now)

    def in_debt(self, client: str) -> int:
        """0 when ``client`` has not overspent, else the seconds until it has paid off.

        Asked again before a search that waited behind the client's own: searches it sent
        together all passed :meth:`take` before the first of them was charged.
        """
        tokens = self._tokens(client, self._clock())
        return 0 if tokens >= 0.0 else max(1, math.ceil(-tokens / self.rate))

    def _tokens(self, client: str, now: float) -> float:
        tokens, updated = self._buckets.get(client, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - updated) * self.rate)

    def _forget_idle(self, now: float) -> None:
        """Drop clients whose bucket has refilled: forgetting them changes nothing.

        Keeps memory bounded when many addresses pass by; if every client is still busy,
        the oldest entries go, which at worst gives those clients a fresh burst.
        """
        idle = [
            client
            for client, (tokens, updated) in self._buckets.items()
            if tokens + (now - updated) * self.rate >= self.burst
        ]
        for client in idle:
            del self._buckets[client]
        while len(self._buckets) > self._max_clients:
            del self._buckets[next(iter(self._buckets))]

    def __len__(self) -> int:
        return len(self._buckets)
