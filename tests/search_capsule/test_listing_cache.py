"""The listing cache: a stale listing is served while one refresh runs, visitors share one
computation, and a costly listing is recomputed less often."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import trio
import trio.testing
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from search_capsule.listing_cache import ListingCache
from search_capsule.services import CapsuleLimits, StoreReader
from sextant.errors import StoreUnavailable
from sextant.store import Page
from sextant.store.migrate import open_store
from tests.search_capsule.test_parts import FakeClock


class Listing:
    """A listing whose computations the test lets finish one at a time (``release``)."""

    def __init__(self, clock: FakeClock, *, takes: float = 0.0) -> None:
        self.clock = clock
        self.takes = takes  # fake seconds each computation lasts
        self.calls = 0
        self.blocked = False
        self.fail: Exception | None = None
        self._release = trio.Event()

    def block(self) -> None:
        self.blocked = True
        self._release = trio.Event()

    def release(self) -> None:
        self.blocked = False
        self._release.set()

    async def __call__(self) -> str:
        self.calls += 1
        if self.blocked:
            await self._release.wait()
        self.clock.now += self.takes
        if self.fail is not None:
            raise self.fail
        return f"v{self.calls}"


async def test_a_stale_listing_is_served_at_once_while_one_refresh_runs():
    clock = FakeClock()
    cache: ListingCache[str, str] = ListingCache(ttl=30, stale_for=600, clock=clock)
    listing = Listing(clock)
    assert await cache.get("census", listing) == "v1"
    clock.now += 31  # past its freshness
    listing.block()
    with trio.fail_after(1):  # nobody waits for the refresh
        assert await cache.get("census", listing) == "v1"
        assert await cache.get("census", listing) == "v1"
    await trio.testing.wait_all_tasks_blocked()
    assert listing.calls == 2  # one refresh, however many visitors came meanwhile
    listing.release()
    await trio.testing.wait_all_tasks_blocked()
    assert await cache.get("census", listing) == "v2"
    assert (cache.hits, cache.stale_hits, cache.misses, cache.computed) == (1, 2, 1, 2)


async def test_visitors_of_a_cold_listing_share_one_computation_and_none_cancels_it():
    clock = FakeClock()
    cache: ListingCache[str, str] = ListingCache(clock=clock)
    listing = Listing(clock)
    listing.block()
    got: list[str] = []
    scopes: list[trio.CancelScope] = []

    async def visit() -> None:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            got.append(await cache.get("newest", listing))

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(visit)
        await trio.testing.wait_all_tasks_blocked()
        scopes[0].cancel()  # the first visitor, whose request started the computation, hangs up
        await trio.testing.wait_all_tasks_blocked()
        listing.release()
    assert listing.calls == 1
    assert got == ["v1"] * 3


async def test_a_listing_that_took_long_stays_fresh_ten_times_as_long():
    clock = FakeClock()
    cache: ListingCache[str, str] = ListingCache(ttl=30, cost_factor=10, clock=clock)
    listing = Listing(clock, takes=9.5)  # the census at 345,000 pages
    assert await cache.get("census", listing) == "v1"
    clock.now += 90  # a plain 30 s cache would have recomputed it three times by now
    assert await cache.get("census", listing) == "v1"
    await trio.testing.wait_all_tasks_blocked()
    assert listing.calls == 1
    clock.now += 6  # 96 s: past the 95 s it stays fresh
    assert await cache.get("census", listing) == "v1"  # stale, while it is recomputed
    await trio.testing.wait_all_tasks_blocked()
    assert listing.calls == 2
    assert await cache.get("census", listing) == "v2"


async def test_a_failed_refresh_keeps_the_last_listing_until_it_is_too_old():
    clock = FakeClock()
    cache: ListingCache[str, str] = ListingCache(ttl=30, stale_for=600, clock=clock)
    listing = Listing(clock)
    assert await cache.get("hosts", listing) == "v1"
    listing.fail = StoreUnavailable("database is locked")
    clock.now += 31
    assert await cache.get("hosts", listing) == "v1"
    await trio.testing.wait_all_tasks_blocked()  # the refresh failed meanwhile
    assert await cache.get("hosts", listing) == "v1"  # and the next request tries again
    await trio.testing.wait_all_tasks_blocked()
    assert listing.calls == 3
    clock.now += 600  # too stale to show: the visitor waits, and hears why
    with pytest.raises(StoreUnavailable, match="locked"):
        await cache.get("hosts", listing)
    listing.fail = None
    assert await cache.get("hosts", listing) == "v5"  # an error is never cached


async def test_visitors_waiting_for_a_failing_computation_all_hear_the_error():
    clock = FakeClock()
    cache: ListingCache[str, str] = ListingCache(clock=clock)
    listing = Listing(clock)
    listing.fail = StoreUnavailable("database is locked")
    listing.block()
    errors: list[BaseException] = []

    async def visit() -> None:
        try:
            await cache.get("feeds", listing)
        except StoreUnavailable as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(visit)
        await trio.testing.wait_all_tasks_blocked()
        listing.release()
    assert listing.calls == 1
    assert len(errors) == 3
    assert len(cache) == 0


async def test_the_least_recently_used_listing_goes_first():
    clock = FakeClock()
    cache: ListingCache[str, str] = ListingCache(max_entries=2, clock=clock)
    listing = Listing(clock)
    assert await cache.get("a", listing) == "v1"
    assert await cache.get("b", listing) == "v2"
    assert await cache.get("a", listing) == "v1"  # "a" is now the most recently used
    assert await cache.get("c", listing) == "v3"
    assert len(cache) == 2
    assert await cache.get("a", listing) == "v1"
    assert await cache.get("b", listing) == "v4"  # "b" was dropped
    with pytest.raises(ValueError, match="max_entries"):
        ListingCache(max_entries=0)


async def soon(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return True
        await trio.sleep(0.01)
    return condition()


async def test_the_capsules_store_reader_serves_the_last_listing_while_a_slow_query_runs(
    tmp_path,
):
    """The wiring: StoreReader.cached runs the listing in a store thread, in the background
    once it has a value, on a real SQLite store."""
    engine = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    reader = StoreReader(engine, CapsuleLimits(store_cache_ttl=0.05))
    gate = threading.Event()
    gate.set()
    calls: list[int] = []

    def pages_known(session: Session) -> int:  # a listing, as slow as the gate makes it
        calls.append(1)
        gate.wait(10)
        return int(session.scalar(select(func.count(Page.id))) or 0) + len(calls)

    try:
        started = trio.current_time()
        assert await reader.cached(pages_known) == 1
        # Stale once past the ttl and ten times what the computation took.
        await trio.sleep(max(0.1, 11 * (trio.current_time() - started)))
        gate.clear()  # the next computation takes as long as the test likes
        with trio.fail_after(2):
            assert await reader.cached(pages_known) == 1  # at once, from the last listing
        assert await soon(lambda: len(calls) == 2)  # the refresh is running meanwhile
        assert await reader.cached(pages_known) == 1
        gate.set()
        assert await soon(lambda: reader._cache.computed == 2)
        assert await reader.cached(pages_known) == 2
        assert len(calls) == 2
    finally:
        gate.set()
        reader.close()


async def test_warming_at_start_computes_each_shared_listing_once_for_the_pages(capsule):
    """After the start's warm-up, the pages drawn from shared listings are served from the
    cache: the first visitor after a restart does not pay for the census (a minute at
    600,000 pages)."""
    from search_capsule import paths
    from search_capsule.handlers import listings

    cache = capsule.app.services.store._cache
    await listings.warm(capsule.app.services)
    assert cache.computed == len(listings.WARM_LISTINGS)
    misses = cache.misses
    for path in (
        paths.HOME,
        paths.STATISTICS,
        paths.NEWEST_PAGES,
        paths.NEWEST_PAGES_ATOM,
        paths.KNOWN_HOSTS,
        paths.NEWEST_HOSTS,
        paths.KNOWN_FEEDS,
    ):
        assert (await capsule.client.get(path)).status == 20, path
    assert cache.misses == misses  # every one of them was ready
    assert cache.computed == len(listings.WARM_LISTINGS)


async def test_a_listing_that_fails_at_start_is_logged_and_the_rest_still_warm(
    empty_settings, caplog
):
    """Warming is a head start, never a reason to stop: a broken store logs a warning for
    each listing it cannot compute, and the server goes on (the visitor sees the error)."""
    import sqlite3

    from search_capsule.handlers import listings
    from search_capsule.server import build_app

    app = build_app(empty_settings)
    try:
        connection = sqlite3.connect(empty_settings.data_dir / "sextant.db")
        connection.execute("DROP TABLE runs")  # the census cannot be taken; the rest can
        connection.close()
        with caplog.at_level("INFO", logger=listings.__name__):
            await listings.warm(app.services)
        assert "could not prepare census at start" in caplog.text
        assert "listings ready in" in caplog.text
        assert app.services.store._cache.computed == len(listings.WARM_LISTINGS) - 1
    finally:
        app.close()
