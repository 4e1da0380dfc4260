"""Worker threads for the capsule's blocking work (searches, store queries), fed from a queue.

Why not ``trio.to_thread.run_sync`` with a ``CapacityLimiter``: there every job is a round
trip through the event loop. When a search ends, the next one starts only once the loop has
taken the GIL, woken the task waiting for the limiter and handed its job to a thread; under
load the loop is busy with handshakes, so the one search thread sat idle between searches.
The thread cache also renames its thread twice a job (two ctypes calls, each dropping the
GIL). Here a thread takes the next job the moment it finishes one, and the loop is woken
only to deliver results.

The waiting room is bounded: with every thread busy and ``max_waiting`` jobs queued, a new
job is refused at once with :class:`Overloaded` (the app answers ``41``) instead of everyone
being answered late. A job cancelled (or withdrawn) before a thread took it is dropped; one
already running is waited for, as ``trio.to_thread.run_sync`` does.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar, cast

import outcome
import trio

T = TypeVar("T")


class Overloaded(Exception):
    """Too many jobs wait for a worker thread; the app answers 41."""


class _Job:
    __slots__ = ("call", "cancelled", "deliver", "started")

    def __init__(self, call: Callable[[], Any], deliver: Callable[[outcome.Outcome], None]) -> None:
        self.call = call
        self.deliver = deliver
        self.started = False
        self.cancelled = False


class WorkerThreads:
    """``count`` threads that run blocking functions for trio tasks, first come first served.

    The threads start with the first job, so an instance made before the capsule forks its
    processes works in each of them.
    """

    def __init__(self, count: int, *, max_waiting: int, name: str) -> None:
        if count < 1:
            raise ValueError("at least one worker thread is needed")
        self.count = count
        self.max_waiting = max_waiting
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards the counts and each job's flags
        self.busy = 0  # jobs running
        self.waiting = 0  # jobs queued and not cancelled
        self._threads: list[threading.Thread] = []

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread; raises :class:`Overloaded` when full."""
        token = trio.lowlevel.current_trio_token()
        task = trio.lowlevel.current_task()

        def deliver(result: outcome.Outcome) -> None:
            # RunFinishedError: the capsule stopped meanwhile, and nobody waits.
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)

        withdraw = self.submit(function, *args, deliver=deliver)

        def abort(_: Any) -> trio.lowlevel.Abort:
            if withdraw():
                return trio.lowlevel.Abort.SUCCEEDED
            return trio.lowlevel.Abort.FAILED  # the result will come; wait for it

        return cast(T, await trio.lowlevel.wait_task_rescheduled(abort))

    def submit(
        self,
        function: Callable[..., Any],
        *args: Any,
        deliver: Callable[[outcome.Outcome], None],
    ) -> Callable[[], bool]:
        """Queue ``function(*args)`` without waiting: ``deliver`` gets its outcome, in the
        worker thread. For results several tasks wait for (a coalesced search), which no
        single task's cancellation may drop. Raises :class:`Overloaded` when full.

        Returns ``withdraw``: it drops the job if no thread has taken it yet and says so
        (True); False means the job runs (or ran) to the end and will deliver.
        """
        with self._lock:
            if self.busy >= self.count and self.waiting >= self.max_waiting:
                raise Overloaded
            self.waiting += 1
        job = _Job(partial(function, *args), deliver)
        if not self._threads:
            self._start()
        self._jobs.put(job)

        def withdraw() -> bool:
            with self._lock:
                if job.started:
                    return False
                if not job.cancelled:
                    job.cancelled = True
                    self.waiting -= 1
            return True

        return withdraw

    def close(self) -> None:
        """Stop the threads once they have finished the jobs already queued."""
        threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            thread.join()

    def _start(self) -> None:
        for number in range(self.count):
            thread = threading.Thread(target=self._work, name=f"{self.name}-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                if job.cancelled:
                    continue
                job.started = True
                self.waiting -= 1
                self.busy += 1
            result = outcome.capture(job.call)
            del job.call  # nothing the function referred to outlives it
            with self._lock:
                self.busy -= 1
            job.deliver(result)
