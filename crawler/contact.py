"""Contacting a capsule: its address held for the request, the request made and counted,
and the politeness reactions to what it did applied to the window.

Page requests and robots.txt requests share all of this; the rule itself (when a capsule
is parked, how long it waits) is in crawler/politeness.py, which says what to do and
leaves the doing (rows out of the window, records for the writer) to this module.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from datetime import datetime

from crawler.fetch import FetchLimits, FetchResult, fetch
from crawler.frontier import FrontierItem
from crawler.messages import Deferred
from crawler.politeness import HostSlot
from crawler.progress import CrawlStats, FetchLog
from crawler.recorder import Recorder
from crawler.resolver import Resolver
from crawler.scheduler import Scheduler
from sextant.errors import AddressRefused, ConnectFailed, FetchError
from sextant.store import utcnow
from sextant.urls import GeminiURL


@dataclass(frozen=True, slots=True)
class Unreachable:
    """A capsule whose address could not be looked up: a connection failure of the
    capsule, which may have parked it until ``parked``."""

    error: ConnectFailed
    parked: datetime | None


def error_kind(error: BaseException) -> str:
    return getattr(error, "kind", None) or "malformed-header"


def lookup_error_kind(error: ConnectFailed) -> str:
    return error.kind if isinstance(error, AddressRefused) else "dns"


def connection_failure(result: FetchResult) -> bool:
    """Whether a failure says something about the capsule's server rather than this page:
    no header at all because the connection, TLS or the wait for it failed (a malformed
    header is the page's problem: the server did answer)."""
    return result.header is None and isinstance(result.error, FetchError)


class Contact:
    """What every request to a capsule goes through, page or robots.txt."""

    def __init__(
        self,
        *,
        resolver: Resolver,
        scheduler: Scheduler[FrontierItem],
        recorder: Recorder,
        stats: CrawlStats,
        fetch_log: FetchLog,
        ssl_context: ssl.SSLContext,
    ) -> None:
        self.resolver = resolver
        self.scheduler = scheduler
        self.recorder = recorder
        self.stats = stats
        self.fetch_log = fetch_log
        self.ssl_context = ssl_context

    async def address(self, slot: HostSlot, url: GeminiURL) -> str | Unreachable:
        """The capsule's address, held for this request; a failed lookup counts as a
        connection failure of the capsule."""
        try:
            address = await self.resolver.resolve(url.host, url.port)
        except ConnectFailed as exc:
            self.stats.errors[lookup_error_kind(exc)] += 1
            return Unreachable(exc, self.connect_failed(slot))
        await self.scheduler.acquire_address(slot, address)
        return address

    async def fetch(
        self, url: GeminiURL, address: str, limits: FetchLimits, *, robots: bool
    ) -> FetchResult:
        result = await fetch(url, address=address, limits=limits, ssl_context=self.ssl_context)
        self._account(url, result, robots=robots)
        return result

    def connect_failed(self, slot: HostSlot) -> datetime | None:
        """Count a connection-level failure of the capsule; if that parks it (rule 5), its
        rows leave the window (the writer moves them all, from the record's
        ``parked_until``) and the end of the parking is returned."""
        parked = slot.on_connect_failure()
        if parked is not None:
            self.stats.parked += 1
            self.stats.deferred += len(self.scheduler.drop(slot.key))
        return parked

    def take_back(
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

    async def hold_or_defer(self, slot: HostSlot) -> None:
        """Rule 6 of the politeness rule: a capsule that may not be asked again for longer
        than ``max_hold`` (a large Crawl-delay, a long back-off) gives its rows back to the
        frontier, due when it may be asked, instead of keeping them (and the run) waiting."""
        until = slot.too_long_to_hold()
        if until is None:
            return
        slot.defer(until)
        deferred = self.take_back(slot, until, capsule_wide=False)
        if deferred is not None:
            await self.recorder.record(deferred)

    def _account(self, url: GeminiURL, result: FetchResult, *, robots: bool) -> None:
        stats = self.stats
        if robots:
            stats.robots += 1
        else:
            stats.pages += 1
        stats.bytes += result.bytes_read
        header = result.header
        if result.error is not None:
            stats.errors[error_kind(result.error)] += 1
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
                "error": error_kind(result.error) if result.error is not None else None,
                "message": str(result.error) if result.error is not None else None,
                "bytes": result.bytes_read,
                "seconds": round(result.duration, 4),
                "truncated": result.truncated,
                "possibly_truncated": result.possibly_truncated,
            }
        )
