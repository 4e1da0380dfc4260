"""Listings and statistics from the store: computed once, served stale while one refresh runs.

At full size a listing is costly where a search is not: at 345,000 pages the census on the
front page took 9.5 s of a store thread and the newest pages 4.2 s, cold. With a plain
cache the visitor who arrives just after an entry expires pays that, every ``ttl`` seconds,
and every visitor arriving meanwhile starts the same query again, until the four store
threads are full of one listing. Here:

* a value past its freshness is still served, at once, while one refresh runs in the
  background (what HTTP calls stale-while-revalidate); only a value older than
  ``stale_for`` beyond its freshness, or none at all, makes a visitor wait;
* visitors who must wait for the same key wait for one computation (coalescing), and a
  visitor who hangs up does not cancel it for the others;
* a value stays fresh for ``ttl`` or ``cost_factor`` times what it took to compute,
  whichever is longer, so a 9.5 s census is recomputed at most every 95 s: listings cost
  the store at most about a tenth of a thread however often they are asked for;
* a refresh that fails (the store locked or gone) keeps the old value until it is too
  stale, and the next request tries again.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import outcome
import trio

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    fresh_until: float
    usable_until: float


class _Computation:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: outcome.Outcome | None = None


class ListingCache(Generic[K, V]):
    """At most ``max_entries`` values (least recently used dropped first), kept fresh in the
    background. Used from one trio event loop only; ``compute`` runs in a system task."""

    def __init__(
        self,
        *,
        max_entries: int = 512,
        ttl: float = 30.0,
        stale_for: float = 600.0,
        cost_factor: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if ttl <= 0 or stale_for < 0 or cost_factor < 0:
            raise ValueError("ttl must be positive, stale_for and cost_factor not negative")
        self.max_entries = max_entries
        self.ttl = ttl
        self.stale_for = stale_for
        self.cost_factor = cost_factor
        self._clock = clock
        self._entries: OrderedDict[K, _Entry[V]] = OrderedDict()
        self._in_flight: dict[K, _Computation] = {}
        self.hits = 0
        self.stale_hits = 0
        self.misses = 0
        self.computed = 0

    async def get(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        """The value for ``key``, computing it with ``compute`` when none may be served."""
        entry = self._entries.get(key)
        now = self._clock()
        if entry is not None and now < entry.usable_until:
            self._entries.move_to_end(key)
            if now < entry.fresh_until:
                self.hits += 1
            else:
                self.stale_hits += 1
                self._start(key, compute)  # at most one: the others see it in flight
            return entry.value
        self.misses += 1
        computation = self._start(key, compute)
        await computation.done.wait()
        result = computation.result
        assert result is not None
        if isinstance(result, outcome.Value):
            return cast(V, result.value)
        raise cast(outcome.Error, result).error  # several may raise it: unwrap works once

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def _start(self, key: K, compute: Callable[[], Awaitable[V]]) -> _Computation:
        computation = self._in_flight.get(key)
        if computation is None:
            computation = _Computation()
            self._in_flight[key] = computation
            # Not in the request's task: a visitor who hangs up must not cancel the
            # computation others wait for, and a background refresh has no request at all.
            trio.lowlevel.spawn_system_task(self._compute, key, compute, computation)
        return computation

    async def _compute(
        self, key: K, compute: Callable[[], Awaitable[V]], computation: _Computation
    ) -> None:
        started = self._clock()
        result = await outcome.acapture(compute)
        finished = self._clock()
        del self._in_flight[key]
        if isinstance(result, outcome.Value):
            self.computed += 1
            fresh_for = max(self.ttl, self.cost_factor * (finished - started))
            self._entries[key] = _Entry(
                result.value, finished + fresh_for, finished + fresh_for + self.stale_for
            )
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        elif key in self._entries and not isinstance(result.error, trio.Cancelled):
            log.warning("refreshing a listing failed, serving the last one: %s", result.error)
        computation.result = result
        computation.done.set()
