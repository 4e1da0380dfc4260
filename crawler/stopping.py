"""How a crawl stops before it runs dry: Ctrl-C, SIGTERM, ``--max-time``, ``--max-pages``.

Each stops the taking of new work and lets requests in flight finish (up to
``signal_grace`` seconds after a signal, ``stop_grace`` otherwise) so they are stored; a
second Ctrl-C cuts them at once. The leases of what was not done are given back when the
run ends, so the next run starts exactly where this one stopped.
"""

from __future__ import annotations

import signal

import trio

from crawler.frontier import FrontierItem
from crawler.options import CrawlOptions
from crawler.progress import CrawlStats
from crawler.recorder import Recorder
from crawler.scheduler import Scheduler


class Stopper:
    """Whether the crawl is stopping, and the one way to make it stop."""

    def __init__(
        self,
        options: CrawlOptions,
        scheduler: Scheduler[FrontierItem],
        stats: CrawlStats,
        recorder: Recorder,
    ) -> None:
        self.options = options
        self.scheduler = scheduler
        self.stats = stats
        self.recorder = recorder
        self.stopping = False
        # The scope of the workers and the dispatcher: what a grace period or a second
        # Ctrl-C cuts (the writer is outside it and stores what they finished).
        self.work_scope: trio.CancelScope | None = None
        self._signals = 0

    def stop(self, reason: str, *, grace: float | None = None) -> None:
        """Take no new work; requests in flight get ``grace`` seconds to finish."""
        if not self.stopping:
            self.stopping = True
            self.stats.stop_reason = reason
            self.scheduler.close()
            self.recorder.pulse()
        if grace is not None and self.work_scope is not None:
            deadline = trio.current_time() + grace
            self.work_scope.deadline = min(self.work_scope.deadline, deadline)

    async def watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                self._signals += 1
                if self._signals == 1:
                    # Someone is waiting for the prompt: a short grace, not stop_grace. The
                    # command says what stopped once it has (crawler/cli.py).
                    self.stop(f"{name}", grace=self.options.signal_grace)
                elif self.work_scope is not None:
                    self.work_scope.cancel()

    async def stop_after(self, seconds: float) -> None:
        await trio.sleep(seconds)
        self.stop("--max-time reached", grace=self.options.stop_grace)
