"""A blocking job for worker-thread tests: it holds its thread until the test opens it."""

from __future__ import annotations

import threading

import trio


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
