"""Searches for the capsule: off the event loop, bounded, cached, coalesced, and fair.

Whoosh is synchronous and CPU-bound, so searches run in ``workers`` threads of their own
(:mod:`search_capsule.workers`; more threads would only contend for the GIL). What keeps
the capsule responsive under load:

* a result cache: identical queries within a few minutes are answered from memory;
* coalescing: when the same query is already being computed, later requests wait for
  that answer instead of computing it again (a link shared in a busy thread);
* lanes (:mod:`search_capsule.lanes`): at most ``per_client`` searches of one client
  address are queued or running at once, so one address cannot fill the thread's queue;
* a budget (:mod:`indexer.budget`) per search: a costly query stops early and its best
  results so far are shown, marked partial (never cached); its cost, in seconds of search
  thread time, is charged to the client that asked (its ``throttle``), and a client whose
  searches have overspent its allowance meanwhile gets 44 instead of its next search;
* abandonment: when every request waiting for a search has gone (its client hung up), a
  search still queued is dropped and a running one cancelled at its next budget check;
* a waiting-room bound: with every worker busy and ``max_waiting`` searches queued, new
  ones are refused at once (the app answers 41) instead of everyone being answered late.

One :class:`~indexer.query.Searcher` serves every request: it stays warm and reopens
itself when ``sextant index`` commits or swaps in a new index, and it reports a missing
index per search, so the capsule can start before the first index exists. The result
cache is dropped whenever the index's state file changes (every index run rewrites it),
so cached answers never outlive the index they came from.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, cast

import outcome
import trio

from indexer.budget import DEFAULT_SECONDS, Budget
from indexer.location import STATE_FILE, IndexMissing
from indexer.query import SearchResults
from search_capsule.cache import TTLCache
from search_capsule.lanes import ClientLanes
from search_capsule.throttle import SlowDown, Throttle
from search_capsule.workers import WorkerThreads
from sextant.errors import SearchCancelled

log = logging.getLogger(__name__)

CacheKey = tuple[str, int, int]


class SearchBackend(Protocol):
    """What the capsule needs of :class:`~indexer.query.Searcher`."""

    def search(
        self, query: str, *, page: int = 1, page_size: int = 10, budget: Budget | None = None
    ) -> SearchResults: ...

    def close(self) -> None: ...


class _Computation:
    """One search in the thread's queue or running, and the requests waiting for it."""

    __slots__ = ("budget", "client", "done", "release", "result", "waiters", "withdraw")

    def __init__(self, budget: Budget, client: str, release: Callable[[], None]) -> None:
        self.budget = budget
        self.client = client  # whose lane it holds, and who pays for it
        self.release = release  # gives the lane's place back
        self.done = trio.Event()
        self.result: outcome.Outcome | None = None
        self.waiters = 0
        self.withdraw: Callable[[], bool] = lambda: False


class SearchService:
    def __init__(
        self,
        backend: SearchBackend,
        index_dir: Path,
        *,
        workers: int,  # the defaults are CapsuleLimits'
        max_waiting: int,
        per_client: int = 1,
        budget: float = DEFAULT_SECONDS,
        throttle: Throttle | None = None,
        cache: TTLCache[CacheKey, SearchResults] | None = None,
    ) -> None:
        self.backend = backend
        self._state_file = index_dir / STATE_FILE
        self.workers = WorkerThreads(workers, max_waiting=max_waiting, name="sextant-search")
        self.lanes = ClientLanes(per_client)
        self.budget = budget
        self._throttle = throttle
        self.cache: TTLCache[CacheKey, SearchResults] = cache or TTLCache()
        self._index_stamp: tuple[int, int] | None = None
        self._in_flight: dict[CacheKey, _Computation] = {}
        self.computed = 0  # searches that reached the index (the rest came from the cache)
        self.withdrawn = 0  # searches dropped from the queue: nobody waited for them any more
        self.stopped = 0  # running searches told to stop for the same reason

    async def search(
        self, query: str, *, page: int, page_size: int, client: str = ""
    ) -> SearchResults | None:
        """Results for ``query``; None when there is no index to search yet.

        ``client`` (an address) is whose lane a new search takes and who pays for it. Raises
        :class:`~sextant.errors.QueryError` for a query the index cannot parse and
        :class:`~search_capsule.workers.Overloaded` when too many searches already wait,
        :class:`~search_capsule.throttle.SlowDown` when ``client`` has overspent.
        """
        self._forget_stale_results()
        key = (query, page, page_size)
        while True:
            cached = self.cache.get(key)
            if cached is not None:
                return cached
            computation = self._in_flight.get(key)
            if computation is None:
                release = await self.lanes.enter(client)
                computation = self._in_flight.get(key)  # someone may have started it meanwhile
                if computation is not None or key in self.cache:
                    release()
                    continue
                owed = self._throttle.in_debt(client) if self._throttle is not None else 0
                if owed:
                    release()
                    raise SlowDown(owed)
                computation = self._start(key, client, release)
            result = await self._wait(key, computation)
            if isinstance(result, outcome.Value):
                return cast(SearchResults, result.value)
            # Several requests may read the error: Outcome.unwrap works once.
            error = cast(outcome.Error, result).error
            if isinstance(error, SearchCancelled):
                continue  # abandoned just before we joined it: search again
            if isinstance(error, IndexMissing):
                return None
            raise error

    def in_flight(self, query: str, *, page: int, page_size: int) -> Budget | None:
        """The budget of the search for this query now queued or running, if there is one."""
        computation = self._in_flight.get((query, page, page_size))
        return None if computation is None else computation.budget

    def waiting(self, query: str, *, page: int, page_size: int) -> int:
        """How many requests wait for the search for this query (0: none in flight)."""
        computation = self._in_flight.get((query, page, page_size))
        return 0 if computation is None else computation.waiters

    def close(self) -> None:
        """Stop the search threads, then release the searcher and its store connections."""
        self.workers.close()
        self.backend.close()

    def _start(self, key: CacheKey, client: str, release: Callable[[], None]) -> _Computation:
        computation = _Computation(Budget(self.budget), client, release)
        token = trio.lowlevel.current_trio_token()

        def deliver(result: outcome.Outcome) -> None:  # in the worker thread
            spent = computation.budget.spent  # now: the clock runs on after the search
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._finish, key, computation, result, spent)

        try:
            computation.withdraw = self.workers.submit(
                self._search, *key, computation.budget, deliver=deliver
            )
        except BaseException:
            release()
            raise
        self._in_flight[key] = computation
        return computation

    async def _wait(self, key: CacheKey, computation: _Computation) -> outcome.Outcome:
        computation.waiters += 1
        try:
            await computation.done.wait()
        except BaseException:  # this request's client went away
            computation.waiters -= 1
            if computation.waiters == 0 and not computation.done.is_set():
                self._abandon(key, computation)
            raise
        computation.waiters -= 1
        assert computation.result is not None
        return computation.result

    def _abandon(self, key: CacheKey, computation: _Computation) -> None:
        """Nobody waits for this search any more: drop it, or stop it at its next check."""
        if self._in_flight.get(key) is computation:
            del self._in_flight[key]  # a later request for it starts afresh
        if computation.withdraw():
            self.withdrawn += 1
            computation.release()
        else:
            self.stopped += 1
            computation.budget.cancel()  # _finish still comes, and frees the place

    def _finish(
        self, key: CacheKey, computation: _Computation, result: outcome.Outcome, spent: float
    ) -> None:
        """The search has ended (in trio's thread, outside any task)."""
        if self._in_flight.get(key) is computation:
            del self._in_flight[key]
        computation.release()
        if isinstance(result, outcome.Value):
            self.computed += 1
            spent = result.value.cost
            # A partial answer is the best a costly query got this time; cached, it would
            # stand in for a complete one that a quieter moment might give.
            if not result.value.partial:
                self.cache.put(key, result.value)
        if self._throttle is not None:
            self._throttle.charge(computation.client, spent)
        computation.result = result
        computation.done.set()

    def _search(self, query: str, page: int, page_size: int, budget: Budget) -> SearchResults:
        return self.backend.search(query, page=page, page_size=page_size, budget=budget)

    def _forget_stale_results(self) -> None:
        """Drop the cache when an index run has finished since we last looked (one stat)."""
        try:
            info = os.stat(self._state_file)
            stamp: tuple[int, int] | None = (info.st_ino, info.st_mtime_ns)
        except OSError:
            stamp = None
        if stamp != self._index_stamp:
            if self._index_stamp is not None or len(self.cache):
                log.info("the index changed; dropping %d cached results", len(self.cache))
            self.cache.clear()
            self._index_stamp = stamp
