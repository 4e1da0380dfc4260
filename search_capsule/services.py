"""What every handler may use, and the one request shape they all receive.

Store queries and searches are synchronous (SQLAlchemy, Whoosh), so they run in worker
threads of their own (:mod:`search_capsule.workers`); the event loop only shuffles bytes.
When every worker is busy and too many requests already wait, new ones are refused at once
with ``41 SERVER UNAVAILABLE`` (spec Appendix 1: "unavailable due to overload") rather than
queueing without bound and answering everyone late.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, TypeVar, cast

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from gemserve.server import Response
from indexer.budget import DEFAULT_SECONDS
from search_capsule.listing_cache import ListingCache
from search_capsule.searching import SearchService
from search_capsule.seeds import DEFAULT_SEED_PORTS
from search_capsule.throttle import Throttle
from search_capsule.workers import Overloaded, WorkerThreads
from sextant.store.engine import utcnow
from sextant.store.failures import unavailable_as_store_error
from sextant.urls import GeminiURL

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CapsuleLimits:
    """The capsule's own limits, on top of the generic server's (timeouts, connections)."""

    page_size: int = 10
    # Deeper pages cost more (the index ranks page x size hits) and nobody reads them; the
    # search API offers at most 1,000 results anyway.
    max_page: int = 100
    # Threads for searches. Searches are mostly Python, so they take turns at the GIL
    # anyway: one thread answers them first come, first served, where two shared it in
    # 5 ms slices and both finished late. Measured at concurrency 16: p99 / mean latency
    # 1.76 against 1.92 with two (six alternating runs each).
    search_workers: int = 1
    store_workers: int = 4  # store queries at once (the SQLite connection pool allows 5)
    # Seconds a store query waits for another process's SQLite lock. A visitor is waiting,
    # and a query blocked for the crawler's 30 s would hold one of the few store threads all
    # that time; past this, the page is a 41 "try again in a minute".
    store_busy_timeout: float = 5.0
    max_waiting: int = 256  # requests waiting for a worker before new ones get 41
    # Per client address, for costly pages; None turns the throttle off (benchmarks).
    rate_per_client: float | None = 10.0
    burst_per_client: int = 40
    # Seconds of search-thread time that cost a client as much as one request: a search
    # that used its whole budget costs ten requests' worth of its address's allowance.
    search_cost_unit: float = 0.025
    # Seconds of search-thread time one search may take before it stops with the best
    # results so far (indexer.budget; issue 18: one costly query held the thread 7.85 s).
    search_budget: float = DEFAULT_SECONDS
    # Searches of one client address queued for the search thread or running at once; its
    # others wait behind its own (search_capsule.lanes), not ahead of other addresses'.
    searches_per_client: int = 1
    search_cache_ttl: float = 300.0  # "identical queries within a few minutes"
    search_cache_entries: int = 2048
    # Listings and statistics change only as the crawler runs. Each is fresh for the ttl or
    # ten times what it took to compute, and served stale for up to store_cache_stale more
    # while one refresh runs (search_capsule.listing_cache).
    store_cache_ttl: float = 30.0
    store_cache_stale: float = 600.0
    store_cache_entries: int = 512
    # Ports the add-seed form accepts (sextant serve --seed-port adds to 1965).
    seed_ports: frozenset[int] = DEFAULT_SEED_PORTS


@dataclass(frozen=True, slots=True)
class Call:
    """A routed request: the path's parts already interpreted."""

    url: GeminiURL
    query: str | None  # decoded user input, None when the URL has no query
    page: int
    verbose: bool
    client: str  # the client's address, for throttling


class StoreReader:
    """Runs read (and the rare write) functions on the store in worker threads.

    ``cached`` answers repeated questions from a cache kept fresh in the background
    (:mod:`search_capsule.listing_cache`): listings are the same for every visitor until
    the crawler runs again, and at full size cost seconds to compute. A store that cannot
    answer (locked, unreachable, damaged) raises :class:`~sextant.errors.StoreUnavailable`
    from here, the one place every store question passes, so no handler needs to know
    SQLAlchemy's errors.
    """

    def __init__(self, engine: Engine, limits: CapsuleLimits) -> None:
        self.engine = engine
        self.workers = WorkerThreads(
            limits.store_workers, max_waiting=limits.max_waiting, name="sextant-store"
        )
        self._cache: ListingCache[Hashable, Any] = ListingCache(
            max_entries=limits.store_cache_entries,
            ttl=limits.store_cache_ttl,
            stale_for=limits.store_cache_stale,
        )

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.workers.run(partial(self._in_session, function, args, kwargs))

    async def cached(self, function: Callable[..., T], *args: Any) -> T:
        key = (function.__module__, function.__qualname__, args)
        return cast(T, await self._cache.get(key, partial(self.run, function, *args)))

    def close(self) -> None:
        """Stop the worker threads, then close the store's connections."""
        self.workers.close()
        self.engine.dispose()

    def _in_session(self, function: Callable[..., T], args: tuple, kwargs: dict) -> T:
        with unavailable_as_store_error(), Session(self.engine) as session:
            return function(session, *args, **kwargs)


@dataclass(slots=True)
class Services:
    store: StoreReader
    search: SearchService
    limits: CapsuleLimits
    throttle: Throttle | None = None  # per client address, for costly pages
    now: Callable[[], datetime] = field(default=utcnow)


Handler = Callable[[Services, Call], Awaitable[Response]]


def make_throttle(limits: CapsuleLimits) -> Throttle | None:
    if not limits.rate_per_client:
        return None
    return Throttle(
        rate=limits.rate_per_client,
        burst=limits.burst_per_client,
        cost_unit=limits.search_cost_unit,
    )


__all__ = ["Call", "CapsuleLimits", "Handler", "Overloaded", "Services", "StoreReader"]
