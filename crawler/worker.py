"""One item of the window, taken from the scheduler to a record for the writer.

Each of the crawl's workers runs :meth:`Workers.work`: exclusions ▸ robots.txt ▸ resolve ▸
address slot ▸ fetch ▸ analyse, then the politeness reactions to the answer (a failure, a
``44 SLOW DOWN``) and the record of it all. A bug costs the page it met, never the crawl.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta

import trio

from crawler.admission import EXCLUDED, OUTSIDE, Admission, Verdict
from crawler.contact import Contact, Unreachable, connection_failure, error_kind, lookup_error_kind
from crawler.content import Content, analyse
from crawler.fetch import FetchLimits, FetchResult
from crawler.frontier import FrontierItem
from crawler.messages import FetchRecord, Skipped
from crawler.options import CrawlOptions
from crawler.politeness import HostSlot, PolitenessRules
from crawler.progress import CrawlStats
from crawler.recorder import Recorder
from crawler.resolver import Resolver
from crawler.robots_gate import RobotsGate
from crawler.scheduler import Scheduler
from crawler.stopping import Stopper
from sextant.errors import AddressRefused, ConnectFailed, InvalidURL
from sextant.store import utcnow
from sextant.urls import GeminiURL, parse

log = logging.getLogger(__name__)

# Bodies larger than this are analysed in a thread so a 5 MiB page does not stall every
# other worker's I/O for the tens of milliseconds decoding and link extraction take.
_THREAD_ANALYSIS_BYTES = 256 * 1024
_ADMITTED = Verdict("admitted")


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
    """What a request for ``item`` brought, with the crawl's decisions about it."""
    header, error = result.header, result.error
    return FetchRecord(
        item=item,
        started_at=started,
        duration=result.duration,
        address=result.address,
        status=header.status if header is not None else None,
        meta=header.meta if header is not None else None,
        mime=result.mime.essence if result.mime is not None else None,
        error_kind=error_kind(error) if error is not None else None,
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


class Workers:
    """What the crawl's workers share: the way to the capsules and the run's page budget."""

    def __init__(
        self,
        *,
        options: CrawlOptions,
        admission: Admission,
        resolver: Resolver,
        scheduler: Scheduler[FrontierItem],
        contact: Contact,
        robots: RobotsGate,
        recorder: Recorder,
        stats: CrawlStats,
        stopper: Stopper,
    ) -> None:
        self.options = options
        self.rules: PolitenessRules = options.politeness
        self.limits: FetchLimits = options.fetch_limits
        self.admission = admission
        self.resolver = resolver
        self.scheduler = scheduler
        self.contact = contact
        self.robots = robots
        self.recorder = recorder
        self.stats = stats
        self.stopper = stopper
        self.started_at = utcnow()
        self.in_flight = 0  # items taken and not yet done
        self.held: set[int] = set()  # leased rows this run will not touch (outside hosts)
        # Page requests this run may still make (--max-pages); robots.txt does not count.
        self.budget = options.max_pages

    @property
    def out_of_budget(self) -> bool:
        return self.budget is not None and self.budget <= 0

    async def work(self) -> None:
        """One worker: items from the window until the crawl stops."""
        while True:
            taken = await self.scheduler.take()
            if taken is None:
                return
            slot, item = taken
            self.in_flight += 1
            try:
                await self._process(slot, item)
            except Exception as exc:
                # A bug must cost one page, never the crawl.
                log.exception("internal error on %s", item.url)
                if slot.busy:
                    self.scheduler.release(slot, requested=False)
                self.stats.errors["internal"] += 1
                await self.recorder.record(
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
                self.in_flight -= 1
                self.recorder.pulse()

    async def _process(self, slot: HostSlot, item: FrontierItem) -> None:
        try:
            url = parse(item.url)
        except InvalidURL as exc:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, EXCLUDED, f"invalid URL: {exc}")
            return
        # Rows queued by this run passed these very checks when the writer admitted them;
        # rows from an earlier run are checked again (the rules may have changed since).
        queued_now = item.enqueued_at >= self.started_at
        verdict = _ADMITTED if queued_now else self.admission.static(url, item.depth)
        if verdict.kind == EXCLUDED:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, EXCLUDED, verdict.reason or "excluded")
            return
        if verdict.kind == OUTSIDE:  # only if the options changed under a claimed row
            self.scheduler.release(slot, requested=False)
            self.held.add(item.id)
            return
        refused = await self._refused(url)
        if refused is not None:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, EXCLUDED, refused)
            return

        allowed = await self.robots.allows(slot, item, url)
        if allowed is None:
            return  # the slot was released by the gate (a request, or a deferral)
        if not allowed:
            self.scheduler.release(slot, requested=False)
            await self._skip(item, "disallowed", "robots.txt disallows it")
            return

        if self.budget is not None:
            if self.budget <= 0:
                self.scheduler.release(slot, requested=False)
                self.stopper.stop("--max-pages reached", grace=self.options.stop_grace)
                return
            self.budget -= 1
        address = await self.contact.address(slot, url)
        if isinstance(address, Unreachable):
            await self.recorder.record(self._failed_lookup(slot, item, address))
            await self.contact.hold_or_defer(slot)
            return
        started = utcnow()
        result = await self.contact.fetch(url, address, self.limits, robots=False)
        header = result.header
        if header is not None and header.status == 44:
            await self._slow_down(slot, item, header.meta, result, started)
            return
        await self.recorder.record(await self._outcome(slot, item, url, result, started))
        await self.contact.hold_or_defer(slot)

    async def _skip(self, item: FrontierItem, state: str, reason: str) -> None:
        self.stats.skipped[state] += 1
        await self.recorder.record(Skipped(item, state, reason))

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

    def _failed_lookup(
        self, slot: HostSlot, item: FrontierItem, failure: Unreachable
    ) -> FetchRecord:
        self.scheduler.release(slot, requested=False, pause=slot.failure_pause)
        return FetchRecord(
            item=item,
            started_at=utcnow(),
            duration=0.0,
            address=None,
            error_kind=lookup_error_kind(failure.error),
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
        connection_failed = connection_failure(result)
        parked: datetime | None = None
        if connection_failed:
            parked = self.contact.connect_failed(slot)
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
            deferred = self.contact.take_back(slot, until, capsule_wide=True)
            self.stats.deferred += 1  # the page itself, recorded with its 44
            await self.recorder.record(
                _fetch_record(
                    item,
                    result,
                    started,
                    retry_at=max(until, retry_at) if retry_at is not None else None,
                    capsule_failures=slot.failures,
                )
            )
            assert deferred is not None  # capsule-wide: always recorded
            await self.recorder.record(deferred)
            return
        held = retry_at is not None and backoff <= self.rules.max_hold
        if held:
            # The row stays leased and learns its attempt and due time (the writer counts
            # the attempt on the row too, so a restart goes on with the same back-off).
            again = dataclasses.replace(item, attempts=item.attempts + 1)
            self.scheduler.add_later(slot, again, backoff)
        await self.recorder.record(
            _fetch_record(
                item, result, started, retry_at=retry_at, held=held, capsule_failures=slot.failures
            )
        )
