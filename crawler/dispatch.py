"""Keeping the window filled from the frontier, and noticing when the crawl is over.

The window is the part of the frontier leased to this run and held in memory (see
crawler/scheduler.py). It is topped up by claims when a quarter of it is free, at most
every ``_CLAIM_INTERVAL`` unless it ran dry, and never for capsules that already hold their
share. The crawl is over when a claim brings nothing while the window is empty, no item is
in flight and every record is stored.
"""

from __future__ import annotations

import math
from datetime import datetime

import trio

from crawler.frontier import Claim, Frontier, FrontierItem
from crawler.messages import Deferred
from crawler.options import CrawlOptions
from crawler.progress import CrawlStats
from crawler.recorder import Recorder
from crawler.robots_cache import RobotsCache
from crawler.scheduler import Scheduler
from crawler.stopping import Stopper
from crawler.worker import Workers
from sextant.store import utcnow

# Between two claims on the frontier at least this long, unless the window ran dry.
_CLAIM_INTERVAL = 0.05
_IDLE_WAIT = 1.0


class Dispatcher:
    """The task that claims frontier rows into the window and stops a finished crawl."""

    def __init__(
        self,
        *,
        options: CrawlOptions,
        frontier: Frontier,
        scheduler: Scheduler[FrontierItem],
        robots: RobotsCache,
        recorder: Recorder,
        workers: Workers,
        stats: CrawlStats,
        stopper: Stopper,
    ) -> None:
        self.options = options
        self.frontier = frontier
        self.scheduler = scheduler
        self.robots = robots
        self.recorder = recorder
        self.workers = workers
        self.stats = stats
        self.stopper = stopper

    async def run(self) -> None:
        options = self.options
        recorder = self.recorder
        last_claim = -math.inf
        while not self.stopper.stopping:
            if self.workers.out_of_budget:
                self.stopper.stop("--max-pages reached", grace=options.stop_grace)
                return
            room = options.window - self.scheduler.queued
            claimed = -1
            if room > 0 and (self.scheduler.queued == 0 or room >= max(1, options.window // 4)):
                wait = last_claim + _CLAIM_INTERVAL - trio.current_time()
                if wait > 0 and self.scheduler.queued > 0:
                    await trio.sleep(wait)
                commits = recorder.commits
                last_claim = trio.current_time()
                saturated = self.scheduler.saturated(
                    options.window_per_capsule, options.window_per_address
                )
                self.scheduler.prune()
                claim = await recorder.claim(
                    room, per_capsule=options.window_per_capsule, exclude=frozenset(saturated)
                )
                claimed = len(claim.items)
                await self._accept(claim)
                if (
                    claimed == 0
                    and self.scheduler.queued == 0
                    and self.workers.in_flight == 0
                    and recorder.pending == 0
                ):
                    if commits != recorder.commits:
                        continue  # something was stored meanwhile: look again at once
                    # A worker holding no rows waits for those of other live workers: they
                    # come back if that worker dies, and lead to new rows if it does not.
                    # (One holding rows it may not fetch stops, or two such would wait for
                    # each other forever.)
                    if not (
                        options.worker
                        and not self.workers.held
                        and await trio.to_thread.run_sync(self.frontier.leased_elsewhere)
                    ):
                        self.stopper.stop("nothing left to fetch: finished")
                        return
                if claimed > 0:
                    continue
            await recorder.wait_for_activity(_IDLE_WAIT)

    async def _accept(self, claim: Claim) -> None:
        now = utcnow()
        deferred: dict[datetime, list[int]] = {}
        for item in claim.items:
            capsule = claim.capsules[item.capsule_id]
            if not self.options.allow_hosts.allows(capsule.host, capsule.port):
                # Recorded, never contacted: the row stays leased (so it is not claimed
                # again) until the run ends and gives it back for a run that may fetch it.
                self.workers.held.add(item.id)
                continue
            slot = self.scheduler.get_slot(capsule.id)
            if slot is None:
                slot = self.scheduler.slot(capsule.id, capsule.host, capsule.port)
                slot.restore(
                    address=capsule.address,
                    failures=capsule.consecutive_failures,
                    crawl_delay=capsule.crawl_delay,
                )
                self.robots.prime(
                    capsule.id,
                    status=capsule.robots_status,
                    text=capsule.robots_txt,
                    fetched_at=capsule.robots_fetched_at,
                )
                for stored in capsule.user_robots:
                    self.robots.prime(
                        capsule.id,
                        status=stored.status,
                        text=stored.text,
                        fetched_at=stored.fetched_at,
                        user=stored.user,
                    )
            if capsule.last_attempt_at is not None and not (
                slot.busy or self.scheduler.queued_for(capsule.id)
            ):
                # Spacing holds across runs and workers too: the last request anyone made
                # is in the store. A slot this process kept is idle: it had let the capsule
                # go, and another worker may have asked it since.
                slot.space_from(capsule.last_attempt_at, now)
            until = slot.deferred_until
            if capsule.parked_until is not None and capsule.parked_until > now:
                until = max(until or now, capsule.parked_until)
            if until is not None and until > now:
                deferred.setdefault(until, []).append(item.id)
                continue
            self.scheduler.add(slot, item)
        for until, ids in deferred.items():
            self.stats.deferred += len(ids)
            await self.recorder.record(Deferred(tuple(ids), until))
