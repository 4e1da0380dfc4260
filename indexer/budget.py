"""What one search may cost, and the way to stop it early.

A public search capsule is attacked with queries as much as with connections: an OR of
dozens of phrases made of the index's commonest words once held the search thread for
7.85 s on a 20,000-page index. So every search runs under a :class:`Budget`, and the
evaluation loops (posting-list unions, phrase position checks, snippets) call
:meth:`Budget.check` between units of work. When the budget runs out the searcher stops
and returns the best results found so far, marked ``partial``; when the client that asked
has gone away (:meth:`Budget.cancel`, called from another thread), it stops and raises
:class:`SearchCancelled` so no more work is spent on an answer nobody reads.

The budget is wall time on the search thread, not CPU time: a search shares the GIL like
any other work, and what the visitor waits for is the wall clock. The clock starts when the
search holds its index snapshot (:meth:`indexer.query.Searcher.search`), not before: waiting
for the other searches to release the snapshot is their cost, not this query's, and opening
a freshly built index is the index's; a cancellation is seen while waiting too. Its spend
(:attr:`Budget.spent`) is what the capsule's throttle charges the client, so a costly query
uses more of an address's allowance than a cheap one.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from sextant.errors import SearchCancelled

__all__ = [
    "DEFAULT_SECONDS",
    "PATIENT_SECONDS",
    "STOPPED_EARLY",
    "Budget",
    "BudgetExhausted",
    "SearchCancelled",
    "paced",
]

_Item = TypeVar("_Item")

#: A search's wall-time budget: on this project's 2-core machine a 100,000-page index answers
#: ordinary queries in a few milliseconds, so 250 ms leaves room for honest costly ones and
#: bounds the hostile ones (issue 18).
DEFAULT_SECONDS = 0.25
#: The budget of a search whose caller names none: scripts and evaluation runs, which wait
#: for their answer. The commands that face people pass their own (the capsule's
#: ``--search-budget``, ``sextant search --budget``, both DEFAULT_SECONDS unless told), so
#: a loaded machine cannot turn a library caller's cold first search into a partial one.
PATIENT_SECONDS = 10.0
#: What people are told when a search ran out of budget: with partial results, or as the
#: refusal when it found nothing usable in time.
STOPPED_EARLY = "stopped early: the query was too costly; try fewer words or phrases"


class BudgetExhausted(Exception):
    """The budget ran out inside an evaluation loop; the searcher keeps what it has."""


class Budget:
    """A deadline plus a cancellation flag, checked cooperatively by the search loops.

    Thread-safe where it must be: :meth:`cancel` may be called from any thread (the capsule's
    event loop, when a client disconnects) while the search thread calls :meth:`check`.
    """

    __slots__ = ("_cancelled", "_clock", "_started", "exhausted", "seconds")

    def __init__(
        self, seconds: float = DEFAULT_SECONDS, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        if seconds <= 0:
            raise ValueError("a search budget must be positive")
        self.seconds = seconds
        self._clock = clock
        self._started: float | None = None
        self._cancelled = threading.Event()
        self.exhausted = False  # set once check() has found the deadline passed

    @classmethod
    def unlimited(cls) -> Budget:
        """A budget without a deadline (only :meth:`cancel` stops it), for callers outside a
        search: tests, tools, the index's own checks."""
        return cls(math.inf)

    def start(self) -> None:
        """Start the clock (the searcher calls this when the search begins, not when queued)."""
        if self._started is None:
            self._started = self._clock()

    @property
    def started(self) -> bool:
        return self._started is not None

    @property
    def spent(self) -> float:
        """Seconds since :meth:`start` (0 when never started)."""
        return 0.0 if self._started is None else self._clock() - self._started

    @property
    def remaining(self) -> float:
        return self.seconds - self.spent

    def cancel(self) -> None:
        """The client has gone: the search stops at its next check (or never starts)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise :class:`SearchCancelled` or :class:`BudgetExhausted` when it is time to stop."""
        if self._cancelled.is_set():
            raise SearchCancelled("the search was abandoned: its client went away")
        if self._started is not None and self._clock() - self._started > self.seconds:
            self.exhausted = True
            raise BudgetExhausted

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled else "exhausted" if self.exhausted else "running"
        return f"<Budget {self.spent * 1000:.1f}/{self.seconds * 1000:.0f} ms {state}>"


def paced(items: Iterable[_Item], budget: Budget, every: int) -> Iterator[_Item]:
    """``items``, with ``budget`` checked before the first and then before every ``every``-th.

    For loops whose single step is cheap (a candidate's positions, a vocabulary word): a check
    costs a clock read, so checking each step would cost more than some steps do, and
    checking every few still stops within a few steps' time of the deadline.
    """
    for count, item in enumerate(items):
        if count % every == 0:
            budget.check()
        yield item
