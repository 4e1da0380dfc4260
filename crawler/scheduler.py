"""The window: the leased part of the frontier held in memory, handed out politely.

Rules 1 and 2 of the politeness rule (crawler/politeness.py) are enforced here, over a
bounded number of frontier rows: a worker gets an item only when its capsule and its
address are both idle and past their delays.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from typing import Generic, Protocol, TypeVar

import trio

from crawler.politeness import AddressSlot, HostSlot, HostSlotStatistics, PolitenessRules
from sextant.store import utcnow


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
        if not slot.busy and slot.token is None:
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
            slot.token = None
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
            slot.token = None
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
        slot.token = token
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
            if slot is not None and not slot.busy and slot.token is None:
                self._schedule(slot)

    def _pop_ready(self) -> tuple[HostSlot, Item] | None:
        now = trio.current_time()
        self._promote(now)
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, token, key = heapq.heappop(heap)
            slot = self._slots.get(key)
            if slot is None or slot.token != token:
                continue  # superseded by a later schedule of the same capsule
            slot.token = None
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
                slot.token = token
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
