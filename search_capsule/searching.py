"""Searches for the capsule: off the event loop, bounded, cached, and coalesced.

Whoosh is synchronous and CPU-bound, so searches run in ``workers`` threads of their own
(:mod:`search_capsule.workers`; more threads would only contend for the GIL). Three things
keep the capsule responsive under load:

* a result cache: identical queries within a few minutes are answered from memory;
* coalescing: when the same query is already being computed, later requests wait for
  that answer instead of computing it again (a link shared in a busy thread);
* a waiting-room bound: with every worker busy and ``max_waiting`` searches queued, new
  ones are refused at once (the app answers 41) instead of everyone being answered late.

One :class:`~indexer.query.Searcher` serves every request: it stays warm and reopens
itself when ``sextant index`` commits or swaps in a new index, and it reports a missing
index per search, so the capsule can start before the first index exists. The result
cache is dropped whenever the index's state file changes (every index run rewrites it),
so cached answers never outlive the index they came from.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Protocol

import trio

from indexer.location import STATE_FILE, IndexMissing
from indexer.query import SearchResults
from search_capsule.cache import TTLCache
from search_capsule.workers import WorkerThreads

log = logging.getLogger(__name__)

CacheKey = tuple[str, int, int]


class SearchBackend(Protocol):
    """What the capsule needs of :class:`~indexer.query.Searcher`."""

    def search(self, query: str, *, page: int = 1, page_size: int = 10) -> SearchResults: ...

    def close(self) -> None: ...


class SearchService:
    def __init__(
        self,
        backend: SearchBackend,
        index_dir: Path,
        *,
        workers: int,  # the defaults are CapsuleLimits'
        max_waiting: int,
        cache: TTLCache[CacheKey, SearchResults] | None = None,
    ) -> None:
        self.backend = backend
        self._state_file = index_dir / STATE_FILE
        self.workers = WorkerThreads(workers, max_waiting=max_waiting, name="sextant-search")
        self.cache: TTLCache[CacheKey, SearchResults] = cache or TTLCache()
        self._index_stamp: tuple[int, int] | None = None
        self._in_flight: dict[CacheKey, trio.Event] = {}
        self.computed = 0  # searches that reached the index (the rest came from the cache)

    async def search(self, query: str, *, page: int, page_size: int) -> SearchResults | None:
        """Results for ``query``; None when there is no index to search yet.

        Raises :class:`~sextant.errors.QueryError` for a query the index cannot parse and
        :class:`~search_capsule.workers.Overloaded` when too many searches already wait.
        """
        self._forget_stale_results()
        key = (query, page, page_size)
        while True:
            cached = self.cache.get(key)
            if cached is not None:
                return cached
            pending = self._in_flight.get(key)
            if pending is None:
                break
            await pending.wait()  # then read the cache; if that search failed, try ourselves
        done = self._in_flight[key] = trio.Event()
        try:
            results = await self.workers.run(self._search, query, page, page_size)
        except IndexMissing:
            return None
        finally:
            del self._in_flight[key]
            done.set()
        self.computed += 1
        self.cache.put(key, results)
        return results

    def close(self) -> None:
        """Stop the search threads, then release the searcher and its store connections."""
        self.workers.close()
        self.backend.close()

    def _search(self, query: str, page: int, page_size: int) -> SearchResults:
        return self.backend.search(query, page=page, page_size=page_size)

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
