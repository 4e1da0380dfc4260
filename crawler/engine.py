"""The crawl: a nursery of workers around one frontier window and one writer.

Data flow::

    seeds, inbox, recrawl ─▶ frontier (DB) ─claim─▶ window (Scheduler, RAM) ─take─▶ workers
    workers: exclusions ▸ robots.txt ▸ resolve ▸ address slot ▸ fetch ▸ analyse
    workers ─▶ channel ─▶ writer (one transaction per page) ─▶ pages, links, frontier (DB)

Stopping: the crawl ends by itself when the window is empty, no request is in flight,
every record is written and the frontier has nothing due. Ctrl-C, SIGTERM, ``--max-time``
and ``--max-pages`` stop taking new work, let requests in flight finish (up to
``signal_grace`` seconds after a signal, ``stop_grace`` otherwise) and store them; a
second Ctrl-C cuts them at once. Either way the leases
of what was not done are given back, so the next run starts exactly where this one ended.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import signal
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import IO

import trio
from sqlalchemy import Engine, insert, update

from crawler.admission import EXCLUDED, OUTSIDE, Admission, Verdict, load_exclusions
from crawler.content import Content, analyse, decode, detect_language
from crawler.fetch import FetchResult, fetch
from crawler.frontier import Claim, Frontier, FrontierItem, lock_frontier
from crawler.messages import (
    MAX_REDIRECTS,
    Deferred,
    FetchRecord,
    Message,
    RobotsRecord,
    Skipped,
)
from crawler.options import CrawlOptions
from crawler.politeness import HostSlot
from crawler.progress import CrawlStats, FetchLog, StatusDisplay, status_line, summary_table
from crawler.removals import adopt_removals
from crawler.resolver import Resolver
from crawler.robots_cache import RobotsCache, RobotsFetch, pubnix_user, robots_path
from crawler.scheduler import Scheduler
from crawler.seeds import (
    enqueue_recrawls,
    enqueue_seeds,
    enqueue_stragglers,
    parse_seed,
    process_inbox,
    read_seeds_file,
)
from crawler.writer import MAX_BATCH, Writer
from sextant.config import Settings
from sextant.errors import AddressRefused, ConfigError, ConnectFailed, FetchError, InvalidURL
from sextant.protocol import Family
from sextant.robots import parse_robots_response
from sextant.store import Run, utcnow
from sextant.store.migrate import open_store
from sextant.tls import client_context
from sextant.urls import GeminiURL, parse, resolve

log = logging.getLogger(__name__)

RUNS = Run.__table__

# Bodies larger than this are analysed in a thread so a 5 MiB page does not stall every
# other worker's I/O for the tens of milliseconds decoding and link extraction take.
_THREAD_ANALYSIS_BYTES = 256 * 1024
_ROBOTS_MAX_BYTES = 512 * 1024
# Between two claims on the frontier at least this long, unless the window ran dry.
_CLAIM_INTERVAL = 0.05
_IDLE_WAIT = 1.0
_ADMITTED = Verdict("admitted")
_WARM_UP_TEXT = "The quick brown fox jumps over the lazy dog, again and again and again."


@dataclass(slots=True)
class _ClaimRequest:
    """A claim on the frontier, run by the writer task between two batches.

    SQLite has one write lock: a claim from another thread would wait for the writer's
    transaction (and the writer for the claim) through SQLite's coarse busy-wait sleeps,
    measured at a third of a second per claim. Taking turns on one thread costs nothing.
    """

    limit: int
    per_capsule: int
    exclude: frozenset[int]
    done: trio.Event = field(default_factory=trio.Event)
    result: Claim | None = None


@dataclass(frozen=True, slots=True)
class _Unreachable:
    """A capsule whose address could not be looked up: a connection failure of the
    capsule, which may have parked it until ``parked``."""

    error: ConnectFailed
    parked: datetime | None


@dataclass(frozen=True, slots=True)
class CrawlSummary:
    run_id: int
    stats: dict[str, object]
    frontier_left: int
    table: str


def _error_kind(error: BaseException) -> str:
    return getattr(error, "kind", None) or "malformed-header"


def _lookup_error_kind(error: ConnectFailed) -> str:
    return error.kind if isinstance(error, AddressRefused) else "dns"


def _fetch_record(
    item: FrontierItem,
    result: FetchResult,
    started: datetime,
    *,
    content: Content | None = None,
    retry_at: datetime | None = None,
    held: bool = False,
    capsule_failures: int = 0,
    parked_until: datetime | None = None,
) -> FetchRecord:
    """What a request for ``item`` brought, with the engine's decisions about it."""
    header, error = result.header, result.error
    return FetchRecord(
        item=item,
        started_at=started,
        duration=result.duration,
        address=result.address,
        status=header.status if header is not None else None,
        meta=header.meta if header is not None else None,
        mime=result.mime.essence if result.mime is not None else None,
        error_kind=_error_kind(error) if error is not None else None,
        error_message=str(error)[:1000] if error is not None else None,
        bytes_read=result.bytes_read,
        size=len(result.body) if result.body is not None else None,
        body_skipped=result.body_skipped,
        truncated=result.truncated,
        possibly_truncated=result.possibly_truncated,
        tls_version=result.tls_version,
        certificate=result.certificate,
        content=content,
        retry_at=retry_at,
        held=held,
        capsule_failures=capsule_failures,
        parked_until=parked_until,
    )


def _connection_failure(result: FetchResult) -> bool:
    """Whether a failure says something about the capsule's server rather than this page:
    no header at all because the connection, TLS or the wait for it failed (a malformed
    header is the page's problem: the server did answer)."""
    return result.header is None and isinstance(result.error, FetchError)


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
        self.rules = options.politeness
        self.limits = options.fetch_limits
        self.robots_limits = dataclasses.replace(
            self.limits, max_body_bytes=min(self.limits.max_body_bytes, _ROBOTS_MAX_BYTES)
        )
        self.ssl_context = ssl_context or client_context()
        pins = {}
        for text in options.resolve:
            try:
                key, address = Resolver.parse_pin(text)
            except InvalidURL as exc:
                raise ConfigError(str(exc)) from None
            pins[key] = address
        self.resolver = Resolver(pins, may_reach_private=options.may_reach_private)
        self.admission = Admission(options, load_exclusions(options))
        self.frontier = Frontier(store, options.owner, lease_seconds=options.lease_seconds)
        self.writer = Writer(store, self.admission, owner=options.owner)
        self.scheduler: Scheduler[FrontierItem] = Scheduler(delay=options.delay, rules=self.rules)
        self.robots = RobotsCache(options.robots_ttl)
        self.stats = CrawlStats()
        self.stderr = stderr if stderr is not None else sys.stderr
        self.display = StatusDisplay(
            self.stderr, enabled=not options.quiet and self.stderr.isatty()
        )
        self.fetch_log = FetchLog(options.log_file)
        self._send: trio.MemorySendChannel[Message | _ClaimRequest] | None = None
        self._held: set[int] = set()  # leased rows this run will not touch (outside hosts)
        self._in_flight = 0
        self._pending_writes = 0
        self._commits = 0
        self._activity = trio.Event()
        self._stopping = False
        self._work_scope: trio.CancelScope | None = None
        self._frontier_size: int | None = None
        self._signals = 0
        self._started_at = utcnow()
        # Page requests this run may still make (--max-pages); robots.txt does not count.
        self._budget = options.max_pages

    # --- the run -----------------------------------------------------------------------------

    async def run(self) -> CrawlSummary:
        run_id = await trio.to_thread.run_sync(self._prepare)
        send, receive = trio.open_memory_channel[Message | _ClaimRequest](
            self.options.concurrency * 4
        )
        self._send = send
        try:
            async with trio.open_nursery() as outer:
                outer.start_soon(self._write_loop, receive)
                async with send:
                    await self._crawl()
        finally:
            self.display.clear()
            self.fetch_log.close()
            self.stats.finished = time.monotonic()
        return await trio.to_thread.run_sync(self._finish, run_id)

    async def _crawl(self) -> None:
        async with trio.open_nursery() as helpers:
            if threading.current_thread() is threading.main_thread():
                # Signals reach only the main thread; an embedding caller elsewhere stops
                # the crawl by cancelling it instead.
                helpers.start_soon(self._watch_signals)
            helpers.start_soon(self._renew_leases)
            helpers.start_soon(self._read_inbox)
            if self.display.enabled:
                helpers.start_soon(self._show_progress)
            if self.options.max_time is not None:
                helpers.start_soon(self._stop_after, self.options.max_time)
            with trio.CancelScope() as self._work_scope:
                async with trio.open_nursery() as workers:
                    workers.start_soon(self._dispatch)
                    for _ in range(self.options.concurrency):
                        workers.start_soon(self._work)
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

    # --- stopping ----------------------------------------------------------------------------

    def stop(self, reason: str, *, grace: float | None = None) -> None:
        """Take no new work; requests in flight get ``grace`` seconds to finish."""
        if not self._stopping:
            self._stopping = True
            self.stats.stop_reason = reason
            self.scheduler.close()
            self._pulse()
        if grace is not None and self._work_scope is not None:
            deadline = trio.current_time() + grace
            self._work_scope.deadline = min(self._work_scope.deadline, deadline)

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                self._signals += 1
                if self._signals == 1:
                    # Someone is waiting for the prompt: a short grace, not stop_grace. The
                    # command says what stopped once it has (crawler/cli.py).
                    self.stop(f"{name}", grace=self.options.signal_grace)
                elif self._work_scope is not None:
                    self._work_scope.cancel()

    async def _stop_after(self, seconds: float) -> None:
        await trio.sleep(seconds)
        self.stop("--max-time reached", grace=self.options.stop_grace)

    # --- the window ------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        """Keep the window filled from the frontier; notice when the crawl is over."""
        options = self.options
        last_claim = -math.inf
        while not self._stopping:
            if self._budget is not None and self._budget <= 0:
                self.stop("--max-pages reached", grace=options.stop_grace)
                return
            room = options.window - self.scheduler.queued
            claimed = -1
            if room > 0 and (self.scheduler.queued == 0 or room >= max(1, options.window // 4)):
                wait = last_claim + _CLAIM_INTERVAL - trio.current_time()
                if wait > 0 and self.scheduler.queued > 0:
                    await trio.sleep(wait)
                commits = self._commits
                last_claim = trio.current_time()
                saturated = self.scheduler.saturated(
                    options.window_per_capsule, options.window_per_address
                )
                self.scheduler.prune()
                request = _ClaimRequest(room, options.window_per_capsule, frozenset(saturated))
                assert self._send is not None
                await self._send.send(request)
                await request.done.wait()
                claim = request.result
                assert claim is not None
                claimed = len(claim.items)
                await self._accept(claim)
                if (
                    claimed == 0
                    and self.scheduler.queued == 0
                    and self._in_flight == 0
                    and self._pending_writes == 0
                ):
                    if commits != self._commits:
                        continue  # something was stored meanwhile: look again at once
                    # A worker holding no rows waits for those of other live workers: they
                    # come back if that worker dies, and lead to new rows if it does not.
                    # (One holding rows it may not fetch stops, or two such would wait for
                    # each other forever.)
                    if not (
                        options.worker
                        and not self._held
                        and await trio.to_thread.run_sync(self.frontier.leased_elsewhere)
                    ):
                        self.stop("nothing left to fetch: finished")
                        return
                if claimed > 0:
                    continue
            event = self._activity
            with trio.move_on_after(_IDLE_WAIT):
                await event.wait()

    async def _accept(self, claim: Claim) -> None:
        now = utcnow()
        deferred: dict[datetime, list[int]] = {}
        for item in claim.items:
            capsule = claim.capsules[item.capsule_id]
            if not self.options.allow_hosts.allows(capsule.host, capsule.port):
                # Recorded, never contacted: the row stays leased (so it is not claimed
                # again) until the run ends and gives it back for a run that may fetch it.
                self._held.add(item.id)
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
            await self._record(Deferred(tuple(ids), until))

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
                self._pulse()

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

    # --- writing ---------------------------------------------------------------------------

    async def _record(self, message: Message) -> None:
        assert self._send is not None
        self._pending_writes += 1
        try:
            await self._send.send(message)
        except BaseException:
            self._pending_writes -= 1
            raise

    async def _write_loop(
        self, receive: trio.MemoryReceiveChannel[Message | _ClaimRequest]
    ) -> None:
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
                self._pending_writes -= writes
                if writes:
                    self._commits += 1
                for message in batch:
                    if isinstance(message, _ClaimRequest):
                        message.done.set()
                self._pulse()

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

    def _pulse(self) -> None:
        self._activity.set()
        self._activity = trio.Event()

    # --- one item ----------------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            taken = await self.scheduler.take()
            if taken is None:
                return
            slot, item = taken
            self._in_flight += 1
            try:
                await self._process(slot, item)
            except Exception as exc:
                # A bug must cost one page, never the crawl.
                log.exception("internal error on %s", item.url)
                if slot.busy:
                    self.scheduler.release(slot, requested=False)
                self.stats.errors["internal"] += 1
                await self._record(
                    FetchRecord(
                        item=item,
                        started_at=utcnow(),
                        duration=0.0,
                        address=slot.address,
                        error_kind="internal",
                        error_message=f"{type(exc).__name__}: {exc}"[:500],
                        retry_at=utcnow() + timedelta(days=1),
                        capsule_failures=slot.failures,
                    )
                )
            finally:
                self._in_flight -= 1
                self._pulse()

    async def _process(self, slot: HostSlot, item: FrontierItem) -> None:
        try:
            url = parse(item.url)
        except InvalidURL as exc:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, EXCLUDED, f"invalid URL: {exc}")
            return
        # Rows queued by this run passed these very checks when the writer admitted them;
        # rows from an earlier run are checked again (the rules may have changed since).
        queued_now = item.enqueued_at >= self._started_at
        verdict = _ADMITTED if queued_now else self.admission.static(url, item.depth)
        if verdict.kind == EXCLUDED:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, EXCLUDED, verdict.reason or "excluded")
            return
        if verdict.kind == OUTSIDE:  # only if the options changed under a claimed row
            self.scheduler.release(slot, requested=False)
            self._held.add(item.id)
            return
        refused = await self._refused(url)
        if refused is not None:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, EXCLUDED, refused)
            return

        allowed = await self._robots_allow(slot, item, url)
        if allowed is None:
            return  # the slot was released by _robots_allow (a request, or a deferral)
        if not allowed:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, "disallowed", "robots.txt disallows it")
            return

        if self._budget is not None:
            if self._budget <= 0:
                self.scheduler.release(slot, requested=False)
                self.stop("--max-pages reached", grace=self.options.stop_grace)
                return
            self._budget -= 1
        address = await self._address(slot, url)
        if isinstance(address, _Unreachable):
            await self._record(self._failed_lookup(slot, item, address))
            await self._hold_or_defer(slot)
            return
        started = utcnow()
        result = await fetch(url, address=address, limits=self.limits, ssl_context=self.ssl_context)
        self._account(url, result, robots=False)
        header = result.header
        if header is not None and header.status == 44:
            await self._slow_down(slot, item, header.meta, result, started)
            return
        await self._record(await self._outcome(slot, item, url, result, started))
        await self._hold_or_defer(slot)

    async def _hold_or_defer(self, slot: HostSlot) -> None:
        """Rule 6 of the politeness rule: a capsule that may not be asked again for longer
        than ``max_hold`` (a large Crawl-delay, a long back-off) gives its rows back to the
        frontier, due when it may be asked, instead of keeping them (and the run) waiting."""
        until = slot.too_long_to_hold()
        if until is None:
            return
        slot.defer(until)
        deferred = self._take_back(slot, until, capsule_wide=False)
        if deferred is not None:
            await self._record(deferred)

    def _take_back(
        self, slot: HostSlot, until: datetime, *, also: tuple[int, ...] = (), capsule_wide: bool
    ) -> Deferred | None:
        """The rows of a capsule its slot has just deferred leave the window at once (before
        any other worker may take one) and go back to the frontier, due at ``until``, with
        ``also``; ``capsule_wide`` moves the capsule's rows in the database too. Returns the
        message to record, if there is anything to move."""
        dropped = self.scheduler.drop(slot.key)
        ids = (*also, *(other.id for other in dropped))
        self.stats.deferred += len(ids)
        if not ids and not capsule_wide:
            return None
        return Deferred(ids, until, capsule_id=slot.key if capsule_wide else None)

    def _connect_failed(self, slot: HostSlot) -> datetime | None:
        """Count a connection-level failure of the capsule; if that parks it (rule 5), its
        rows leave the window (the writer moves them all, from the record's
        ``parked_until``) and the end of the parking is returned."""
        parked = slot.on_connect_failure()
        if parked is not None:
            self.stats.parked += 1
            self.stats.deferred += len(self.scheduler.drop(slot.key))
        return parked

    async def _skip(self, item: FrontierItem, state: str, reason: str) -> None:
        self.stats.skipped[state] += 1
        await self._record(Skipped(item, state, reason))

    async def _refused(self, url: GeminiURL) -> str | None:
        """Why the capsule's address may not be contacted, asked before anything else
        (robots.txt included) so the reason lands on the page; a failed lookup is left to
        the request, which records and retries it. The resolver checks again at every
        request: this is for the record, not the guard."""
        try:
            await self.resolver.resolve(url.host, url.port)
        except AddressRefused as exc:
            return str(exc)
        except ConnectFailed:
            return None
        return None

    async def _address(self, slot: HostSlot, url: GeminiURL) -> str | _Unreachable:
        """The capsule's address, held for this request; a failed lookup counts as a
        connection failure of the capsule."""
        try:
            address = await self.resolver.resolve(url.host, url.port)
        except ConnectFailed as exc:
            self.stats.errors[_lookup_error_kind(exc)] += 1
            return _Unreachable(exc, self._connect_failed(slot))
        await self.scheduler.acquire_address(slot, address)
        return address

    def _failed_lookup(
        self, slot: HostSlot, item: FrontierItem, failure: _Unreachable
    ) -> FetchRecord:
        self.scheduler.release(slot, requested=False, pause=slot.failure_pause)
        return FetchRecord(
            item=item,
            started_at=utcnow(),
            duration=0.0,
            address=None,
            error_kind=_lookup_error_kind(failure.error),
            error_message=str(failure.error),
            retry_at=failure.parked or self._retry_at(item),
            capsule_failures=slot.failures,
            parked_until=failure.parked,
        )

    def _retry_at(self, item: FrontierItem, seconds: float | None = None) -> datetime | None:
        """When a page that failed (again) is asked next: after ``seconds``, or rule 4's
        back-off; ``None`` once it has had its attempts (it waits for its recrawl)."""
        attempts = item.attempts + 1
        if attempts >= self.rules.max_attempts:
            return None
        self.stats.retries += 1
        delay = self.rules.retry_delay(attempts) if seconds is None else seconds
        return utcnow() + timedelta(seconds=delay)

    async def _outcome(
        self,
        slot: HostSlot,
        item: FrontierItem,
        url: GeminiURL,
        result: FetchResult,
        started: datetime,
    ) -> FetchRecord:
        header = result.header
        error = result.error
        connection_failed = _connection_failure(result)
        parked: datetime | None = None
        if connection_failed:
            parked = self._connect_failed(slot)
        elif header is not None:
            slot.on_answer(page=True)
        pause = slot.failure_pause if connection_failed else None
        self.scheduler.release(slot, requested=True, pause=pause)

        content = None
        body, mime = result.body, result.mime
        if header is not None and error is None and body is not None and mime is not None:
            if len(body) > _THREAD_ANALYSIS_BYTES:
                content = await trio.to_thread.run_sync(analyse, url, body, mime)
            else:
                content = analyse(url, body, mime)
        temporary = error is not None or (header is not None and header.family == 4)
        retry_at = parked if parked is not None else (self._retry_at(item) if temporary else None)
        return _fetch_record(
            item,
            result,
            started,
            content=content,
            retry_at=retry_at,
            capsule_failures=slot.failures,
            parked_until=parked,
        )

    async def _slow_down(
        self,
        slot: HostSlot,
        item: FrontierItem,
        meta: str,
        result: FetchResult,
        started: datetime,
    ) -> None:
        """44, rule 3 of the politeness rule: the capsule waits what it asks (capped, never
        less than its delay) and then goes on with its other pages; the page waits its own
        back-off, longer at each 44 in a row. Only several different pages answering 44
        in a row send the whole capsule's rows back for a long while; a wait too long to
        hold in memory sends them back for that wait.

        Either way the page records the 44 and when it will be asked again, so `sextant
        show` can explain a page that has no content yet."""
        reaction = slot.on_slow_down(item.page_id, meta, item.attempts + 1)
        self.stats.slow_downs += 1
        self.scheduler.release(slot, requested=True, pause=reaction.wait)
        backoff = reaction.backoff
        retry_at = self._retry_at(item, backoff)
        if reaction.defer_for is not None:
            until = slot.defer(utcnow() + timedelta(seconds=reaction.defer_for))
            deferred = self._take_back(slot, until, capsule_wide=True)
            self.stats.deferred += 1  # the page itself, recorded with its 44
            await self._record(
                _fetch_record(
                    item,
                    result,
                    started,
                    retry_at=max(until, retry_at) if retry_at is not None else None,
                    capsule_failures=slot.failures,
                )
            )
            assert deferred is not None  # capsule-wide: always recorded
            await self._record(deferred)
            return
        held = retry_at is not None and backoff <= self.rules.max_hold
        if held:
            # The row stays leased and learns its attempt and due time (the writer counts
            # the attempt on the row too, so a restart goes on with the same back-off).
            again = dataclasses.replace(item, attempts=item.attempts + 1)
            self.scheduler.add_later(slot, again, backoff)
        await self._record(
            _fetch_record(
                item, result, started, retry_at=retry_at, held=held, capsule_failures=slot.failures
            )
        )

    # --- robots.txt --------------------------------------------------------------------------

    async def _robots_allow(
        self, slot: HostSlot, item: FrontierItem, url: GeminiURL
    ) -> bool | None:
        """True/False from the cached policies, or None after handling a request or deferral
        (the item was requeued or deferred and the slot released)."""
        keys: list[tuple[int, str | None]] = [(slot.key, None)]
        user = pubnix_user(url)
        if user is not None:
            keys.append((slot.key, user))
        delays: list[float] = []
        for key in keys:
            allowed = self.robots.allows(url, key)
            if allowed is None:
                outcome, requested = await self.robots.refresh(
                    key, functools.partial(self._fetch_robots, slot, url, key[1])
                )
                await self._after_robots(slot, item, outcome, requested)
                return None
            if not allowed:
                return False
            cached = self.robots.fresh(key)
            if cached is not None and cached.crawl_delay is not None:
                delays.append(cached.crawl_delay)
        slot.obey_crawl_delays(delays)
        return True

    async def _after_robots(
        self, slot: HostSlot, item: FrontierItem, outcome: RobotsFetch, requested: bool
    ) -> None:
        if outcome.policy is not None or not requested:
            # Ask again for the page after the capsule's delay (its Crawl-delay counts from
            # this very request), with the policy now cached.
            if outcome.policy is not None:
                asked = outcome.policy.crawl_delay()
                if asked is not None:
                    slot.raise_crawl_delay(asked)
            self.scheduler.release(slot, requested=requested, requeue=item)
            await self._hold_or_defer(slot)
            return
        if outcome.slow_down is not None and outcome.slow_down <= self.rules.max_hold:
            pause = max(outcome.slow_down, slot.delay)
            self.scheduler.release(slot, requested=True, pause=pause, requeue=item)
            return
        # robots.txt exists or may, and cannot be read now: the capsule waits (§ companion
        # spec; crawling on a guess could fetch exactly what the author forbids).
        until = slot.defer_unreadable_robots(outcome.slow_down)
        deferred = self._take_back(slot, until, also=(item.id,), capsule_wide=True)
        self.scheduler.release(slot, requested=True)
        assert deferred is not None  # capsule-wide: always recorded
        await self._record(deferred)

    async def _fetch_robots(self, slot: HostSlot, url: GeminiURL, user: str | None) -> RobotsFetch:
        """Ask the capsule for its (or a pubnix user's) robots.txt; a redirect is followed
        within the capsule (up to 5 hops, each after the capsule's delay)."""
        target = url.with_path(robots_path(user))
        address = await self._address(slot, url)
        if isinstance(address, _Unreachable):
            parked = address.parked
            if user is None:
                await self._record(
                    RobotsRecord(
                        slot.key,
                        utcnow(),
                        None,
                        None,
                        None,
                        usable=False,
                        crawl_delay=None,
                        capsule_failures=slot.failures,
                        parked_until=parked,
                    )
                )
            return RobotsFetch(None, None, None)
        result: FetchResult | None = None
        for hop in range(MAX_REDIRECTS + 1):
            if hop:
                await trio.sleep(slot.delay)
            result = await fetch(
                target, address=address, limits=self.robots_limits, ssl_context=self.ssl_context
            )
            self._account(target, result, robots=True)
            header = result.header
            if header is None or result.error is not None or header.family != Family.REDIRECT:
                break
            try:
                following = parse(resolve(target, header.meta))
            except InvalidURL:
                break
            if (following.host, following.port) != (url.host, url.port):
                break
            target = following
        assert result is not None
        fetch_outcome = self._robots_outcome(result)
        parked = None
        if _connection_failure(result):
            parked = self._connect_failed(slot)
        elif result.header is not None:
            slot.on_answer(page=False)
        policy = fetch_outcome.policy
        await self._record(
            RobotsRecord(
                slot.key,
                utcnow(),
                result.address,
                fetch_outcome.status,
                fetch_outcome.text,
                usable=policy is not None,
                crawl_delay=policy.crawl_delay() if policy is not None else None,
                capsule_failures=slot.failures,
                parked_until=parked,
                certificate=result.certificate,
                tls_version=result.tls_version,
                user=user,
            )
        )
        return fetch_outcome

    def _robots_outcome(self, result: FetchResult) -> RobotsFetch:
        header = result.header
        if header is None or result.error is not None:
            return RobotsFetch(None, None, None)
        if header.status == 44:
            wait = self.rules.slow_down_wait(header.meta)
            return RobotsFetch(None, 44, None, slow_down=wait)
        if header.family == Family.REDIRECT:
            # A redirect out of the capsule: RFC 9309 would follow it, but that would ask
            # another capsule outside its own politeness queue. No readable robots.txt, and
            # no sign of one: the 5x reading (allow all) is the one that still lets us in.
            status = 51
            return RobotsFetch(parse_robots_response(status, None), header.status, None)
        text = None
        if header.family == Family.SUCCESS and result.body is not None:
            charset = result.mime.charset if result.mime is not None else None
            text = decode(result.body, charset)[0]
        return RobotsFetch(parse_robots_response(header.status, text), header.status, text)

    # --- accounting ------------------------------------------------------------------------

    def _account(self, url: GeminiURL, result: FetchResult, *, robots: bool) -> None:
        stats = self.stats
        if robots:
            stats.robots += 1
        else:
            stats.pages += 1
        stats.bytes += result.bytes_read
        header = result.header
        if result.error is not None:
            stats.errors[_error_kind(result.error)] += 1
        elif header is not None:
            stats.statuses[header.status] += 1
        if not self.fetch_log.enabled:
            return
        self.fetch_log.write(
            {
                "at": utcnow().isoformat(timespec="milliseconds") + "Z",
                "url": str(url),
                "robots": robots,
                "address": result.address,
                "status": header.status if header is not None else None,
                "meta": header.meta if header is not None else None,
                "error": _error_kind(result.error) if result.error is not None else None,
                "message": str(result.error) if result.error is not None else None,
                "bytes": result.bytes_read,
                "seconds": round(result.duration, 4),
                "truncated": result.truncated,
                "possibly_truncated": result.possibly_truncated,
            }
        )


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
