"""The crawl: a nursery of workers around one frontier window and one writer.

Data flow::

    seeds, inbox, recrawl ─▶ frontier (DB) ─claim─▶ window (Scheduler, RAM) ─take─▶ workers
    workers: exclusions ▸ robots.txt ▸ resolve ▸ address slot ▸ fetch ▸ analyse
    workers ─▶ channel ─▶ writer (one transaction per page) ─▶ pages, links, frontier (DB)

This module builds the parts and runs them from the first preparation to the runs row of
the summary; each part has its module: the claims and the end of the crawl
(crawler/dispatch.py), one item's way (crawler/worker.py), robots.txt
(crawler/robots_gate.py), what every request goes through (crawler/contact.py), the writer
task (crawler/recorder.py) and stopping early (crawler/stopping.py). Either way a run ends,
the leases of what was not done are given back, so the next run starts exactly where this
one ended.
"""

from __future__ import annotations

import json
import logging
import math
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO

import trio
from sqlalchemy import Engine, insert, update

from crawler.admission import Admission, load_exclusions
from crawler.contact import Contact
from crawler.content import detect_language
from crawler.dispatch import Dispatcher
from crawler.frontier import Frontier, FrontierItem, lock_frontier
from crawler.options import CrawlOptions
from crawler.progress import CrawlStats, FetchLog, StatusDisplay, status_line, summary_table
from crawler.recorder import Recorder
from crawler.removals import adopt_removals
from crawler.resolver import Resolver
from crawler.robots_cache import RobotsCache
from crawler.robots_gate import RobotsGate
from crawler.scheduler import Scheduler
from crawler.seeds import (
    enqueue_recrawls,
    enqueue_seeds,
    enqueue_stragglers,
    parse_seed,
    process_inbox,
    read_seeds_file,
)
from crawler.stopping import Stopper
from crawler.worker import Workers
from crawler.writer import Writer
from sextant.config import Settings
from sextant.errors import ConfigError, InvalidURL
from sextant.store import Run, utcnow
from sextant.store.migrate import open_store
from sextant.tls import client_context

log = logging.getLogger(__name__)

RUNS = Run.__table__

_WARM_UP_TEXT = "The quick brown fox jumps over the lazy dog, again and again and again."


@dataclass(frozen=True, slots=True)
class CrawlSummary:
    run_id: int
    stats: dict[str, object]
    frontier_left: int
    table: str


class Crawl:
    """One run of the crawler over a store; :meth:`run` does the whole thing."""

    def __init__(
        self,
        store: Engine,
        options: CrawlOptions,
        *,
        ssl_context: ssl.SSLContext | None = None,
        stderr: IO[str] | None = None,
    ) -> None:
        self.store = store
        self.options = options
        pins = {}
        for text in options.resolve:
            try:
                key, address = Resolver.parse_pin(text)
            except InvalidURL as exc:
                raise ConfigError(str(exc)) from None
            pins[key] = address
        resolver = Resolver(pins, may_reach_private=options.may_reach_private)
        self.admission = Admission(options, load_exclusions(options))
        self.frontier = Frontier(store, options.owner, lease_seconds=options.lease_seconds)
        self.writer = Writer(store, self.admission, owner=options.owner)
        self.scheduler: Scheduler[FrontierItem] = Scheduler(
            delay=options.delay, rules=options.politeness
        )
        robots = RobotsCache(options.robots_ttl)
        self.stats = CrawlStats()
        self.stderr = stderr if stderr is not None else sys.stderr
        self.display = StatusDisplay(
            self.stderr, enabled=not options.quiet and self.stderr.isatty()
        )
        self.fetch_log = FetchLog(options.log_file)
        self.recorder = Recorder(self.writer, self.frontier, buffer=options.concurrency * 4)
        self.stopper = Stopper(options, self.scheduler, self.stats, self.recorder)
        contact = Contact(
            resolver=resolver,
            scheduler=self.scheduler,
            recorder=self.recorder,
            stats=self.stats,
            fetch_log=self.fetch_log,
            ssl_context=ssl_context or client_context(),
        )
        self.workers = Workers(
            options=options,
            admission=self.admission,
            resolver=resolver,
            scheduler=self.scheduler,
            contact=contact,
            robots=RobotsGate(
                cache=robots,
                contact=contact,
                scheduler=self.scheduler,
                recorder=self.recorder,
                rules=options.politeness,
                limits=options.fetch_limits,
            ),
            recorder=self.recorder,
            stats=self.stats,
            stopper=self.stopper,
        )
        self.dispatcher = Dispatcher(
            options=options,
            frontier=self.frontier,
            scheduler=self.scheduler,
            robots=robots,
            recorder=self.recorder,
            workers=self.workers,
            stats=self.stats,
            stopper=self.stopper,
        )
        self._frontier_size: int | None = None

    async def run(self) -> CrawlSummary:
        run_id = await trio.to_thread.run_sync(self._prepare)
        try:
            async with trio.open_nursery() as outer:
                outer.start_soon(self.recorder.run)
                try:
                    await self._crawl()
                finally:
                    await self.recorder.close()
        finally:
            self.display.clear()
            self.fetch_log.close()
            self.stats.finished = time.monotonic()
        return await trio.to_thread.run_sync(self._finish, run_id)

    def stop(self, reason: str, *, grace: float | None = None) -> None:
        """Take no new work; requests in flight get ``grace`` seconds to finish."""
        self.stopper.stop(reason, grace=grace)

    async def _crawl(self) -> None:
        stopper = self.stopper
        async with trio.open_nursery() as helpers:
            if threading.current_thread() is threading.main_thread():
                # Signals reach only the main thread; an embedding caller elsewhere stops
                # the crawl by cancelling it instead.
                helpers.start_soon(stopper.watch_signals)
            helpers.start_soon(self._renew_leases)
            helpers.start_soon(self._read_inbox)
            if self.display.enabled:
                helpers.start_soon(self._show_progress)
            if self.options.max_time is not None:
                helpers.start_soon(stopper.stop_after, self.options.max_time)
            with trio.CancelScope() as stopper.work_scope:
                async with trio.open_nursery() as workers:
                    workers.start_soon(self.dispatcher.run)
                    for _ in range(self.options.concurrency):
                        workers.start_soon(self.workers.work)
            helpers.cancel_scope.cancel()

    def _prepare(self) -> int:
        """Before the first request: a runs row, stale leases, seeds, recrawls, stragglers."""
        now = utcnow()
        seeds = [parse_seed(seed) for seed in self.options.seeds]
        if self.options.seeds_file is not None:
            seeds += read_seeds_file(self.options.seeds_file)
        if not self.options.worker:
            released = self.frontier.release_stale()
            if released:
                log.info("released %d leases left by an earlier run", released)
        excluded = adopt_removals(self.store, self.admission)
        if excluded:
            log.info("%d stored pages meet new exclusion rules: excluded", excluded)
        with self.store.begin() as conn:
            lock_frontier(conn)
            run_id = conn.execute(
                insert(RUNS).values(kind="crawl", started_at=now).returning(RUNS.c.id)
            ).scalar_one()
            if seeds:
                enqueue_seeds(conn, seeds, self.admission, self.writer.capsules, now)
        process_inbox(self.store, self.admission, self.writer.capsules)
        if self.options.recrawl:
            enqueue_recrawls(self.store, self.admission, now)
        enqueue_stragglers(self.store, self.admission, now)
        # The language model loads on first use (about 0.7 s); doing it here, off the event
        # loop, keeps the first page from stalling every request in flight.
        detect_language(_WARM_UP_TEXT)
        return int(run_id)

    def _finish(self, run_id: int) -> CrawlSummary:
        self.frontier.release_all()
        stats = self.stats
        stats.new_pages = self.writer.stats.new_pages
        stats.enqueued = self.writer.stats.enqueued
        stats.certificate_events = self.writer.stats.certificate_events
        stats.writer_cpu = self.writer.stats.seconds
        stats.writer_transactions = self.writer.stats.transactions
        left = self.frontier.size()
        figures = stats.as_dict()
        figures["frontier_left"] = left
        with self.store.begin() as conn:
            conn.execute(
                update(RUNS)
                .where(RUNS.c.id == run_id)
                .values(finished_at=utcnow(), stats=json.dumps(figures, sort_keys=True))
            )
        return CrawlSummary(run_id, figures, left, summary_table(stats, frontier=left))

    # --- helpers beside the work -------------------------------------------------------------

    async def _renew_leases(self) -> None:
        while True:
            await trio.sleep(self.options.lease_seconds / 3)
            await trio.to_thread.run_sync(self.frontier.renew)

    async def _read_inbox(self) -> None:
        while True:
            await trio.sleep(self.options.inbox_interval)
            outcomes = await trio.to_thread.run_sync(
                process_inbox, self.store, self.admission, self.writer.capsules
            )
            if outcomes:
                self.recorder.pulse()

    async def _show_progress(self) -> None:
        last_count = -math.inf
        while True:
            now = trio.current_time()
            if now - last_count > 2.0:
                last_count = now
                self._frontier_size = await trio.to_thread.run_sync(self.frontier.size)
            self.display.show(
                status_line(
                    self.stats,
                    active=self.scheduler.busy,
                    window=self.scheduler.queued,
                    frontier=self._frontier_size,
                )
            )
            await trio.sleep(self.options.progress_interval)


async def run_crawl(
    settings: Settings,
    options: CrawlOptions,
    *,
    ssl_context: ssl.SSLContext | None = None,
    stderr: IO[str] | None = None,
) -> CrawlSummary:
    """Crawl into the store of ``settings`` as ``options`` say; returns the run's figures."""
    store = await trio.to_thread.run_sync(open_store, settings.db_url)
    try:
        crawl = Crawl(store, options, ssl_context=ssl_context, stderr=stderr)
        return await crawl.run()
    finally:
        store.dispose()
