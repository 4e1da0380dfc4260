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

The :class:`Scheduler` enforces 1, 2 and the in-memory part of 3-4 over the bounded window
of leased frontier rows (a page waiting out its own 44 back-off stays in the window without
holding up its capsule); the engine applies 3-6 with the helpers on :class:`PolitenessRules`.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

import trio

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
        "_token",
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
        self._token: int | None = None

    @property
    def delay(self) -> float:
        return self.rules.capsule_delay(self.base_delay, self.crawl_delay)

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


class _HasCapsule(Protocol):
    @property
    def capsule_id(self) -> int: ...


Item = TypeVar("Item", bound=_HasCapsule)


class Scheduler(Generic[Item]):
    """Hands out work so that rules 1 and 2 hold: the window of the frontier in memory.

    Items wait in one queue per capsule. A capsule is *ready* when it is idle, has items, its
    delay has passed and its address (when known) is idle and past its own delay; ready
    capsules are kept in a heap by the time they become ready, so :meth:`take` costs
    O(log capsules) and never scans the window. A worker that takes an item holds the
    capsule (and its address) until it calls :meth:`release`.
    """

    def __init__(self, *, delay: float, rules: PolitenessRules | None = None) -> None:
        self.delay = delay
        self.rules = rules or PolitenessRules()
        self._slots: dict[int, HostSlot] = {}
        self._addresses: dict[str, AddressSlot] = {}
        self._queues: dict[int, deque[Item]] = {}
        self._heap: list[tuple[float, int, int]] = []
        # Items that may not be taken before a time of their own while their capsule serves
        # its other items (a page waiting out its 44 back-off): (time, sequence, key, item).
        self._later: list[tuple[float, int, int, Item]] = []
        self._later_of: dict[int, int] = {}
        self._sequence = itertools.count()
        self._changed = trio.Event()
        self._closed = False
        self._queued = 0
        self._busy = 0

    # --- slots -------------------------------------------------------------------------

    def slot(self, key: int, host: str, port: int) -> HostSlot:
        """The slot of a capsule, created idle on first use."""
        slot = self._slots.get(key)
        if slot is None:
            slot = HostSlot(key, host, port, base_delay=self.delay, rules=self.rules)
            self._slots[key] = slot
        return slot

    def get_slot(self, key: int) -> HostSlot | None:
        return self._slots.get(key)

    def address_slot(self, address: str) -> AddressSlot:
        slot = self._addresses.get(address)
        if slot is None:
            slot = AddressSlot(address)
            self._addresses[address] = slot
        return slot

    # --- the window --------------------------------------------------------------------

    def add(self, slot: HostSlot, item: Item) -> None:
        """Queue an item behind the capsule's others (the slot must be :meth:`slot`'s)."""
        self._queues.setdefault(slot.key, deque()).append(item)
        self._queued += 1
        if not slot.busy and slot._token is None:
            self._schedule(slot)
        self._notify()

    def add_later(self, slot: HostSlot, item: Item, seconds: float) -> None:
        """Queue an item that may not be taken for ``seconds``, while its capsule goes on
        with its other items (rule 3: a page that answered 44 waits its own back-off)."""
        entry = (trio.current_time() + seconds, next(self._sequence), slot.key, item)
        heapq.heappush(self._later, entry)
        self._later_of[slot.key] = self._later_of.get(slot.key, 0) + 1
        self._queued += 1
        self._notify()

    def drop(self, key: int) -> list[Item]:
        """Take every queued item of a capsule out of the window (to defer it elsewhere)."""
        queue = self._queues.pop(key, None)
        items = list(queue) if queue else []
        if self._later_of.pop(key, 0):
            items += [entry[3] for entry in self._later if entry[2] == key]
            self._later = [entry for entry in self._later if entry[2] != key]
            heapq.heapify(self._later)
        if not items:
            return []
        self._queued -= len(items)
        slot = self._slots.get(key)
        if slot is not None:
            slot._token = None
        return items

    def drain(self) -> list[Item]:
        """Everything still queued, removed: what a stopping crawl gives back to the frontier."""
        items = [item for queue in self._queues.values() for item in queue]
        items += [entry[3] for entry in self._later]
        self._queues.clear()
        self._heap.clear()
        self._later.clear()
        self._later_of.clear()
        self._queued = 0
        for slot in self._slots.values():
            slot._token = None
        return items

    def queued_for(self, key: int) -> int:
        queue = self._queues.get(key)
        return (len(queue) if queue else 0) + self._later_of.get(key, 0)

    @property
    def queued(self) -> int:
        """Items waiting in the window (not counting those being worked on)."""
        return self._queued

    @property
    def busy(self) -> int:
        """Capsules with a request in progress."""
        return self._busy

    @property
    def capsules_waiting(self) -> int:
        return len(self._queues)

    def saturated(self, per_capsule: int, per_address: int) -> set[int]:
        """Capsules that should not get more rows from the frontier for now: those holding
        ``per_capsule`` items already, and every known capsule of an address holding
        ``per_address``. Leasing more for them would only fill the window with waiting."""
        full: set[int] = set()
        by_address: dict[str, list[int]] = {}
        held: dict[str, int] = {}
        for key, slot in self._slots.items():
            count = self.queued_for(key) + (1 if slot.busy else 0)
            if count >= per_capsule:
                full.add(key)
            if slot.address is not None:
                by_address.setdefault(slot.address, []).append(key)
                held[slot.address] = held.get(slot.address, 0) + count
        for address, keys in by_address.items():
            if held[address] >= per_address:
                full.update(keys)
        return full

    def statistics(self) -> list[HostSlotStatistics]:
        return [slot.statistics(self.queued_for(key)) for key, slot in self._slots.items()]

    def prune(self) -> None:
        """Forget idle capsules and addresses whose delay has passed: their state would make
        no difference any more, and a long crawl meets more capsules than RAM should hold."""
        now = trio.current_time()
        wall_now = utcnow()
        for key in [
            key
            for key, slot in self._slots.items()
            if not slot.busy
            and key not in self._queues
            and key not in self._later_of
            and slot.next_allowed <= now
            and (slot.deferred_until is None or slot.deferred_until <= wall_now)
            and slot.failures == 0
        ]:
            del self._slots[key]
        for address in [
            address
            for address, slot in self._addresses.items()
            if not slot.busy and not slot.waiters and slot.next_allowed <= now
        ]:
            del self._addresses[address]

    # --- taking and giving back --------------------------------------------------------

    async def take(self) -> tuple[HostSlot, Item] | None:
        """Wait for a ready capsule and hold it; ``None`` once :meth:`close` was called."""
        while True:
            if self._closed:
                return None
            taken = self._pop_ready()
            if taken is not None:
                return taken
            deadline = min(
                self._heap[0][0] if self._heap else math.inf,
                self._later[0][0] if self._later else math.inf,
            )
            event = self._changed
            with trio.move_on_at(deadline):
                await event.wait()

    async def acquire_address(self, slot: HostSlot, address: str) -> None:
        """Hold ``address`` for a capsule taken before its address was known (first contact,
        or a changed DNS answer): waits until the address is idle and past its delay."""
        slot.address = address
        held = slot.holding_address
        if held is not None:
            if held.address == address:
                return
            self._release_address(held, requested=False)
            slot.holding_address = None
        target = self.address_slot(address)
        target.reserved += 1
        try:
            while target.busy or target.next_allowed > trio.current_time():
                event = self._changed
                deadline = math.inf if target.busy else target.next_allowed
                with trio.move_on_at(deadline):
                    await event.wait()
        finally:
            target.reserved -= 1
        if target.busy:  # cancelled while waiting: let the capsules held back go on
            self._wake_waiters(target)
            return
        target.busy = True
        slot.holding_address = target

    def release(
        self,
        slot: HostSlot,
        *,
        requested: bool = True,
        pause: float | None = None,
        requeue: Item | None = None,
    ) -> None:
        """Give a capsule back after working on one item.

        ``requested``: whether a request went out (only then do the delays start again).
        ``pause``: a wait other than the capsule's delay (44, back-off). ``requeue``: an
        item to serve first next time (a page whose robots.txt was just fetched, a 44).
        """
        now = trio.current_time()
        held = slot.holding_address
        if held is not None:
            self._release_address(held, requested=requested)
            slot.holding_address = None
        if slot.busy:
            slot.busy = False
            self._busy -= 1
        if requested:
            slot.requests += 1
            slot.next_allowed = now + (slot.delay if pause is None else pause)
        elif pause is not None:
            slot.next_allowed = max(slot.next_allowed, now + pause)
        if requeue is not None:
            self._queues.setdefault(slot.key, deque()).appendleft(requeue)
            self._queued += 1
        if slot.key in self._queues:
            self._schedule(slot)
        self._notify()

    def close(self) -> None:
        """Wake every :meth:`take` with ``None``: the crawl is stopping."""
        self._closed = True
        self._notify()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- internals ---------------------------------------------------------------------

    def _release_address(self, held: AddressSlot, *, requested: bool) -> None:
        held.busy = False
        if requested:
            held.requests += 1
            held.next_allowed = max(held.next_allowed, trio.current_time() + self.delay)
        self._wake_waiters(held)

    def _wake_waiters(self, held: AddressSlot) -> None:
        waiters, held.waiters = held.waiters, set()
        for key in waiters:
            waiting = self._slots.get(key)
            if waiting is not None and not waiting.busy and key in self._queues:
                self._schedule(waiting)

    def _schedule(self, slot: HostSlot) -> None:
        start = slot.next_allowed
        if slot.address is not None:
            address = self._addresses.get(slot.address)
            if address is not None:
                start = max(start, address.next_allowed)
        token = next(self._sequence)
        slot._token = token
        heapq.heappush(self._heap, (start, token, slot.key))

    def _promote(self, now: float) -> None:
        """Items whose own wait is over join the back of their capsule's queue: the
        capsule's other pages do not wait behind one that keeps answering 44."""
        later = self._later
        while later and later[0][0] <= now:
            _, _, key, item = heapq.heappop(later)
            left = self._later_of[key] - 1
            if left:
                self._later_of[key] = left
            else:
                del self._later_of[key]
            self._queues.setdefault(key, deque()).append(item)
            slot = self._slots.get(key)
            if slot is not None and not slot.busy and slot._token is None:
                self._schedule(slot)

    def _pop_ready(self) -> tuple[HostSlot, Item] | None:
        now = trio.current_time()
        self._promote(now)
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, token, key = heapq.heappop(heap)
            slot = self._slots.get(key)
            if slot is None or slot._token != token:
                continue  # superseded by a later schedule of the same capsule
            slot._token = None
            queue = self._queues.get(key)
            if slot.busy or not queue:
                continue
            start = slot.next_allowed
            address = self.address_slot(slot.address) if slot.address is not None else None
            if address is not None:
                if address.busy or address.reserved:
                    address.waiters.add(key)
                    continue
                start = max(start, address.next_allowed)
            if start > now:
                token = next(self._sequence)
                slot._token = token
                heapq.heappush(heap, (start, token, key))
                continue
            slot.busy = True
            self._busy += 1
            if address is not None:
                address.busy = True
                slot.holding_address = address
            item = queue.popleft()
            self._queued -= 1
            if not queue:
                del self._queues[key]
            return slot, item
        return None

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
