"""At most a few searches in flight per client address: one address cannot fill the queue.

The search thread answers first come, first served. Forty costly queries sent at once from
one address used to sit in its queue ahead of everyone else's, so another visitor's simple
search waited for all forty. Here each client address has a lane: at most ``per_client``
of its searches are queued for the thread or running, and its others wait in the lane,
behind its own, without taking a place in the thread's queue. Another address's search
then waits for at most ``per_client`` searches of each busy address, each bounded by the
search budget.
"""

from __future__ import annotations

from collections.abc import Callable

import trio


class _Lane:
    __slots__ = ("places", "users")

    def __init__(self, per_client: int) -> None:
        self.places = trio.Semaphore(per_client)  # FIFO: a client's searches keep their order
        self.users = 0  # holding a place or waiting for one


class ClientLanes:
    def __init__(self, per_client: int) -> None:
        if per_client < 1:
            raise ValueError("each client needs at least one search in flight")
        self.per_client = per_client
        self._lanes: dict[str, _Lane] = {}

    async def enter(self, client: str) -> Callable[[], None]:
        """Wait for one of ``client``'s places; returns the function that gives it back.

        The release may be called from trio's thread outside any task (a search's result
        arriving), and more than once: only the first call counts.
        """
        lane = self._lanes.get(client)
        if lane is None:
            lane = self._lanes[client] = _Lane(self.per_client)
        lane.users += 1
        try:
            await lane.places.acquire()
        except BaseException:  # cancelled while waiting: the client went away
            self._leave(client, lane)
            raise
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                lane.places.release()
                self._leave(client, lane)

        return release

    def in_flight(self, client: str) -> int:
        """``client``'s searches holding a place (queued for the thread or running)."""
        lane = self._lanes.get(client)
        return 0 if lane is None else self.per_client - lane.places.value

    def waiting(self, client: str) -> int:
        """``client``'s searches waiting in its lane for a place."""
        lane = self._lanes.get(client)
        return 0 if lane is None else lane.users - self.in_flight(client)

    def _leave(self, client: str, lane: _Lane) -> None:
        lane.users -= 1
        if lane.users == 0 and self._lanes.get(client) is lane:
            del self._lanes[client]  # memory follows the clients active now

    def __len__(self) -> int:
        return len(self._lanes)
