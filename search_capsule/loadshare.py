"""Spreading connections evenly over server processes that accept from one socket.

Processes sharing a listening socket take whatever connection they happen to reach first,
and the kernel's choice ignores how busy each already is. One process can then serve
twelve connections while its sibling serves four: measured on the search capsule with two
processes at 16 concurrent clients, the slowest 1 % of requests were the ones that landed
on the crowded process, and its queue, not the search, made them slow (p99 2.3x the mean).

Here each process publishes its count of open connections in memory shared across the
fork, and a process with more than a sibling waits a moment before accepting, so the
connection goes to the least busy process. The wait is bounded: a sibling that is stuck
(or gone) costs a new client at most :attr:`LoadShare.max_defer`, never an answer.
"""

from __future__ import annotations

import ctypes
import multiprocessing

import trio

#: How long a busier process leaves a waiting connection to its siblings.
MAX_DEFER = 0.010
#: How often it looks again whether it is still the busier one.
POLL_INTERVAL = 0.001
#: The count of a slot with no process in it (not started yet, or died): nobody defers to it.
_ABSENT = 2**31 - 1


class LoadShare:
    """Open-connection counts of ``processes`` processes, one slot each.

    Made before forking; each child then calls :meth:`join` with its own slot, and the
    parent calls :meth:`leave` for a child that died. Only the owner of a slot writes it
    (or the parent, when there is no owner), so no lock is needed, and a sibling reading a
    count a moment old only makes the balance a little less exact.
    """

    def __init__(
        self,
        processes: int,
        *,
        max_defer: float = MAX_DEFER,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        if processes < 1:
            raise ValueError("a load share needs at least one process")
        self._counts = multiprocessing.RawArray(ctypes.c_int, [_ABSENT] * processes)
        self._slot = 0
        self._others: tuple[int, ...] = ()
        self.max_defer = max_defer
        self.poll_interval = poll_interval

    @property
    def processes(self) -> int:
        return len(self._counts)

    def join(self, slot: int) -> None:
        """Take ``slot`` in this process (a replacement starts from zero connections)."""
        if not 0 <= slot < self.processes:
            raise ValueError(f"slot {slot} is outside 0..{self.processes - 1}")
        self._slot = slot
        self._others = tuple(other for other in range(self.processes) if other != slot)
        self._counts[slot] = 0

    def leave(self, slot: int) -> None:
        """Mark ``slot`` empty (its process died), so siblings stop leaving connections to it."""
        self._counts[slot] = _ABSENT

    def opened(self) -> None:
        self._counts[self._slot] += 1

    def closed(self) -> None:
        self._counts[self._slot] -= 1

    def count(self, slot: int) -> int:
        return int(self._counts[slot])

    def busier_than_a_sibling(self) -> bool:
        counts = self._counts
        mine = counts[self._slot]
        return any(counts[other] < mine for other in self._others)

    async def wait_turn(self) -> None:
        """Return once no sibling has fewer connections, or after ``max_defer``."""
        if not self.busier_than_a_sibling():
            return
        deadline = trio.current_time() + self.max_defer
        while trio.current_time() < deadline:
            await trio.sleep(self.poll_interval)
            if not self.busier_than_a_sibling():
                return
