"""A small time-limited LRU cache for answers that are costly to compute and cheap to keep.

Searches come in bursts of the same query (a link shared in a thread, a user paging back
and forth, a client retrying), and store listings change only when the crawler runs, so a
few minutes of reuse saves most of the work without showing stale results for long.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """At most ``max_entries`` values, each forgotten ``ttl`` seconds after it was stored.

    Not thread-safe: the capsule uses it from the trio event loop only, and computes the
    values in worker threads.
    """

    def __init__(
        self,
        *,
        max_entries: int = 512,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.max_entries = max_entries
        self.ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            if entry is not None:
                del self._entries[key]
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[1]

    def put(self, key: K, value: V) -> None:
        self._entries[key] = (self._clock() + self.ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` has a live value, without counting a hit or a miss."""
        entry = self._entries.get(cast(K, key))  # a key of another type is simply not there
        return entry is not None and entry[0] > self._clock()

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
