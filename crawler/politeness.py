"""Politeness: when the crawler may send its next request to a capsule and to an address.

Most Gemini servers are hobby machines; a crawler that hammers one gets itself blocked and
makes the operator's day worse. The whole rule, with its default numbers
(:class:`PolitenessRules` and ``--delay``), is:

1. At most **one request at a time per capsule** (host:port) **and per resolved IP address**.
   Many capsules share one address (subdomain hosting, pubnixes with thousands of ``~user``
   capsules), so the address limit is what protects the machine.
2. Between the end of one request and the start of the next, a capsule waits its delay:
   ``max(--delay (1 s), robots.txt Crawl-delay capped at 300 s)``; an address waits
   ``--delay``.
3. ``44 SLOW DOWN``: obeyed exactly, no more. The capsule gets no request for the seconds
   its meta asks (read by :func:`sextant.protocol.slow_down_seconds`, capped at 600 s; never
   less than its delay), then goes on with its other pages at its usual delay. The page
   that answered 44 waits on its own: ``asked × 2^(44s in a row - 1)`` (at most 1 day), 5
   attempts like any temporary failure, then left for the recrawl. Only **3 different
   pages** of a capsule answering 44 with no other answer between them defer the capsule's
   remaining pages, by ``max(asked, 1 h)``.
4. Temporary failures back off exponentially. A page answering 4x is retried after
   5 min × 2^(attempt-1) (at most 1 day apart, 5 attempts, then left for the recrawl). A
   capsule that fails at the connection level (refused, TLS, timeout) waits
   ``max(delay, 1 s) × 2^failures`` (at most 10 min) before its next request.
5. After 5 consecutive connection-level failures the capsule is **parked** (its frontier rows
   wait) for 1 h × 2^(failures-5), at most 7 days (``capsules.parked_until``).
6. A wait longer than 60 s is not held in memory: the URLs go back to the frontier in the
   database with that due time, so they are taken up later in the run, or by the next run
   if this one ends first.

The :class:`crawler.scheduler.Scheduler` enforces 1, 2 and the in-memory part of 3-4 over
the bounded window of leased frontier rows (a page waiting out its own 44 back-off stays in
the window without holding up its capsule). 3-6 are the reactions of :class:`HostSlot`
(``on_connect_failure``, ``on_slow_down``, ``defer``...): each changes the capsule's state as
the rule says and returns what the crawl must do about it (drop its rows, record a date),
so the crawl never writes the state itself and the rule lives here only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import trio

from sextant.protocol import slow_down_seconds
from sextant.store import utcnow


@dataclass(frozen=True, slots=True)
class PolitenessRules:
    """The numbers of the rule above (all in seconds unless named otherwise)."""

    max_crawl_delay: float = 300.0
    slow_down_cap: float = 600.0
    slow_downs_before_deferral: int = 3
    slow_down_deferral: float = 3600.0
    max_hold: float = 60.0
    retry_base: float = 300.0
    retry_cap: float = 86_400.0
    max_attempts: int = 5
    failure_pause_cap: float = 600.0
    park_after: int = 5
    park_base: float = 3600.0
    park_max: float = 7 * 86_400.0

    def slow_down_wait(self, meta: str) -> float:
        """The seconds a 44's meta asks for, as far as rule 3 obeys them."""
        return slow_down_seconds(meta, cap=self.slow_down_cap)

    def capsule_delay(self, base_delay: float, crawl_delay: float | None) -> float:
        robots = min(crawl_delay, self.max_crawl_delay) if crawl_delay else 0.0
        return max(base_delay, robots)

    def slow_down_backoff(self, asked: float, attempts: int) -> float:
        """Wait before asking again for a page whose ``attempts``-th try in a row answered
        44 asking ``asked`` seconds (rule 3): the page, not its capsule, slows down further
        each time, so an endpoint that always says 44 costs its capsule nothing more."""
        return min(asked * 2.0 ** min(max(attempts - 1, 0), 30), self.retry_cap)

    def retry_delay(self, attempts: int) -> float:
        """Wait before the next try of a page that failed ``attempts`` times (rule 4)."""
        return min(self.retry_base * 2 ** max(attempts - 1, 0), self.retry_cap)

    def failure_pause(self, delay: float, failures: int) -> float:
        """Pause of a capsule after ``failures`` consecutive connection failures (rule 4)."""
        if failures <= 0:
            return delay
        return min(max(delay, 1.0) * 2.0 ** min(failures, 30), self.failure_pause_cap)

    def park_duration(self, failures: int) -> float | None:
        """How long a capsule is parked after ``failures`` failures in a row, if at all."""
        if failures < self.park_after:
            return None
        return min(self.park_base * 2.0 ** min(failures - self.park_after, 30), self.park_max)


@dataclass(frozen=True, slots=True)
class SlowDown:
    """What a ``44 SLOW DOWN`` asks of the crawl (rule 3)."""

    wait: float  # the capsule's pause before its next request
    backoff: float  # the page's own wait before it is asked again
    defer_for: float | None  # the capsule's rows go back to the frontier for this long


@dataclass(frozen=True, slots=True)
class HostSlotStatistics:
    key: int
    host: str
    port: int
    address: str | None
    busy: bool
    delay: float
    requests: int
    queued: int
    consecutive_failures: int
    slow_downs: int
    ready_in: float  # seconds until the capsule may be asked again (0 = now)


class HostSlot:
    """The politeness state of one capsule during a run."""

    __slots__ = (
        "address",
        "base_delay",
        "busy",
        "crawl_delay",
        "deferred_until",
        "failures",
        "holding_address",
        "host",
        "key",
        "next_allowed",
        "port",
        "requests",
        "rules",
        "slow_down_pages",
        "token",
    )

    def __init__(
        self, key: int, host: str, port: int, *, base_delay: float, rules: PolitenessRules
    ) -> None:
        self.key = key
        self.host = host
        self.port = port
        self.rules = rules
        self.base_delay = base_delay
        self.crawl_delay: float | None = None
        self.address: str | None = None
        self.busy = False
        self.next_allowed = -math.inf  # trio clock
        self.failures = 0
        # Pages that answered 44 since the capsule last answered anything else (rule 3):
        # never more than ``slow_downs_before_deferral``, which defers the capsule.
        self.slow_down_pages: set[int] = set()
        self.requests = 0
        # A wall-clock time before which the capsule's rows belong in the database, not here.
        self.deferred_until: datetime | None = None
        self.holding_address: AddressSlot | None = None
        # The scheduler's live heap entry for this capsule (older entries are stale).
        self.token: int | None = None

    @property
    def delay(self) -> float:
        return self.rules.capsule_delay(self.base_delay, self.crawl_delay)

    # --- reactions: the rule applied to what the capsule did ---------------------------

    def restore(self, *, address: str | None, failures: int, crawl_delay: float | None) -> None:
        """Take up what the store knows of a capsule this run meets for the first time."""
        self.address = address
        self.failures = failures
        if crawl_delay is not None:
            self.crawl_delay = crawl_delay

    def space_from(self, last_request: datetime, now: datetime) -> None:
        """Rule 2 across runs and workers: the last request anyone made (in the store)
        counts; a wait beyond ``max_hold`` defers the capsule's rows (rule 6)."""
        since = (now - last_request).total_seconds()
        clock = trio.current_time()
        self.next_allowed = max(self.next_allowed, clock + max(0.0, self.delay - since))
        ahead = self.next_allowed - clock
        if ahead > self.rules.max_hold:
            self.deferred_until = now + timedelta(seconds=ahead)

    def on_connect_failure(self) -> datetime | None:
        """Rules 4-5: one more connection-level failure in a row. Returns the end of the
        capsule's parking when this failure parks it (its rows must leave the window)."""
        self.failures += 1
        duration = self.rules.park_duration(self.failures)
        if duration is None:
            return None
        self.deferred_until = utcnow() + timedelta(seconds=duration)
        return self.deferred_until

    def on_answer(self, *, page: bool) -> None:
        """The capsule answered: its failure streak ends, and a page's answer (not its
        robots.txt's) ends its streak of 44s too."""
        self.failures = 0
        if page:
            self.slow_down_pages.clear()

    @property
    def failure_pause(self) -> float:
        """Rule 4: the pause after the current streak of connection failures."""
        return self.rules.failure_pause(self.delay, self.failures)

    def on_slow_down(self, page_id: int, meta: str, attempts: int) -> SlowDown:
        """Rule 3: page ``page_id`` answered its ``attempts``-th 44 in a row."""
        rules = self.rules
        wait = max(rules.slow_down_wait(meta), self.delay)
        self.failures = 0
        self.slow_down_pages.add(page_id)
        defer_for = None
        if len(self.slow_down_pages) >= rules.slow_downs_before_deferral:
            defer_for = max(wait, rules.slow_down_deferral)
            self.slow_down_pages.clear()
        elif wait > rules.max_hold:
            defer_for = wait
        return SlowDown(wait, rules.slow_down_backoff(wait, attempts), defer_for)

    def defer(self, until: datetime) -> datetime:
        """The capsule's rows belong in the database until ``until`` (or a later time
        already set); returns the time that holds."""
        if self.deferred_until is None or self.deferred_until < until:
            self.deferred_until = until
        return self.deferred_until

    def defer_unreadable_robots(self, seconds: float | None) -> datetime:
        """robots.txt exists or may and cannot be read now: the capsule waits ``seconds``
        (or rule 4's back-off), unless it is deferred already (a park stands as it is)."""
        now = utcnow()
        if self.deferred_until is not None and self.deferred_until > now:
            return self.deferred_until
        wait = seconds or self.rules.retry_delay(max(self.failures, 1))
        self.deferred_until = now + timedelta(seconds=wait)
        return self.deferred_until

    def too_long_to_hold(self) -> datetime | None:
        """Rule 6: when the capsule may be asked again, if that is beyond ``max_hold``."""
        wait = self.next_allowed - trio.current_time()
        if wait <= self.rules.max_hold:
            return None
        return utcnow() + timedelta(seconds=wait)

    def obey_crawl_delays(self, delays: list[float]) -> None:
        """The robots.txt files that apply (the capsule's, a pubnix user's) set the delay."""
        self.crawl_delay = max(delays) if delays else None

    def raise_crawl_delay(self, asked: float) -> None:
        """A robots.txt just read asks this Crawl-delay: it counts from this very request."""
        self.crawl_delay = max(self.crawl_delay or 0.0, asked)

    def statistics(self, queued: int = 0) -> HostSlotStatistics:
        return HostSlotStatistics(
            key=self.key,
            host=self.host,
            port=self.port,
            address=self.address,
            busy=self.busy,
            delay=self.delay,
            requests=self.requests,
            queued=queued,
            consecutive_failures=self.failures,
            slow_downs=len(self.slow_down_pages),
            ready_in=max(0.0, self.next_allowed - trio.current_time()),
        )

    def __repr__(self) -> str:
        return f"<HostSlot {self.host}:{self.port} busy={self.busy} delay={self.delay:g}>"


class AddressSlot:
    """The politeness state of one IP address, shared by every capsule that resolves to it."""

    __slots__ = ("address", "busy", "next_allowed", "requests", "reserved", "waiters")

    def __init__(self, address: str) -> None:
        self.address = address
        self.busy = False
        self.next_allowed = -math.inf
        self.requests = 0
        # Workers in acquire_address: they already hold their capsule, so they go first.
        self.reserved = 0
        self.waiters: set[int] = set()  # capsules held back while the address was busy
