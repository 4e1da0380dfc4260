"""A blocking job for worker-thread tests: it holds its thread until the test opens it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator

import trio

from search_capsule.workers import WorkerThreads


class Gate:
    """A job that holds its thread until opened, and says when it started."""

    def __init__(self) -> None:
        self._started = threading.Semaphore(0)
        self._open = threading.Event()

    def __call__(self, value: str) -> str:
        self._started.release()
        self._open.wait()
        return value

    async def started(self) -> None:
        await trio.to_thread.run_sync(self._started.acquire)

    def open(self) -> None:
        self._open.set()


@contextlib.asynccontextmanager
async def occupied(workers: WorkerThreads) -> AsyncIterator[None]:
    """Every one of ``workers``' threads busy with a job that waits until the block ends."""
    gate = Gate()
    async with trio.open_nursery() as nursery:
        for number in range(workers.count):
            nursery.start_soon(workers.run, gate, f"holding {number}")
        for _ in range(workers.count):
            await gate.started()
        try:
            yield
        finally:
            gate.open()
