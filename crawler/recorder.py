"""The crawl's one line to the store: records and frontier claims, in the order they were sent.

Every task of the crawl hands what it learnt to one writer task through one channel; the
writer stores a batch of them per transaction, on its own thread. Claims on the frontier
take the same road: SQLite has one write lock, and a claim from another thread would wait
for the writer's transaction (and the writer for the claim) through SQLite's coarse
busy-wait sleeps, measured at a third of a second per claim. Taking turns on one thread
costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from crawler.frontier import Claim, Frontier
from crawler.messages import Message
from crawler.writer import MAX_BATCH, Writer


@dataclass(slots=True)
class _ClaimRequest:
    """A claim on the frontier, run by the writer task between two batches."""

    limit: int
    per_capsule: int
    exclude: frozenset[int]
    done: trio.Event = field(default_factory=trio.Event)
    result: Claim | None = None


class Recorder:
    """The channel to the writer task, and what the rest of the crawl may know of it: how
    many records wait to be stored, how many transactions stored some, and a pulse at every
    change anyone may be waiting for (a batch stored, a request done, a stop)."""

    def __init__(self, writer: Writer, frontier: Frontier, *, buffer: int) -> None:
        self.writer = writer
        self.frontier = frontier
        self._send, self._receive = trio.open_memory_channel[Message | _ClaimRequest](buffer)
        self.pending = 0  # records sent and not yet stored
        self.commits = 0  # writer transactions that stored at least one record
        self._activity = trio.Event()

    async def record(self, message: Message) -> None:
        self.pending += 1
        try:
            await self._send.send(message)
        except BaseException:
            self.pending -= 1
            raise

    async def claim(self, limit: int, *, per_capsule: int, exclude: frozenset[int]) -> Claim:
        """Lease up to ``limit`` due rows, in turn with the writer's transactions."""
        request = _ClaimRequest(limit, per_capsule, exclude)
        await self._send.send(request)
        await request.done.wait()
        assert request.result is not None
        return request.result

    async def close(self) -> None:
        """No more records: the writer stores what was sent, then :meth:`run` returns."""
        await self._send.aclose()

    def pulse(self) -> None:
        self._activity.set()
        self._activity = trio.Event()

    async def wait_for_activity(self, seconds: float) -> None:
        """Until the next :meth:`pulse`, or ``seconds`` at most."""
        event = self._activity
        with trio.move_on_after(seconds):
            await event.wait()

    async def run(self) -> None:
        """The writer task: batches of what was sent, each stored by one transaction."""
        receive = self._receive
        async with receive:
            while True:
                try:
                    batch = [await receive.receive()]
                except trio.EndOfChannel:
                    return
                while len(batch) < MAX_BATCH:
                    try:
                        batch.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await trio.to_thread.run_sync(self._store, batch)
                writes = sum(1 for message in batch if not isinstance(message, _ClaimRequest))
                self.pending -= writes
                if writes:
                    self.commits += 1
                for message in batch:
                    if isinstance(message, _ClaimRequest):
                        message.done.set()
                self.pulse()

    def _store(self, batch: list[Message | _ClaimRequest]) -> None:
        """Writes and claims in the order they were sent, on the writer's thread."""
        pending: list[Message] = []
        for message in batch:
            if isinstance(message, _ClaimRequest):
                self.writer.commit(pending)
                pending = []
                message.result = self.frontier.claim(
                    message.limit, per_capsule=message.per_capsule, exclude=message.exclude
                )
            else:
                pending.append(message)
        self.writer.commit(pending)
