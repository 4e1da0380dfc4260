"""robots.txt before every page: the cached answer, or a request for the file first.

A page whose capsule's (or pubnix user's) robots.txt is not cached goes back to the front
of its capsule's queue while the file is asked for, redirects followed within the capsule;
the page is asked after the capsule's delay, which a Crawl-delay in the file may lengthen.
A file that exists or may and cannot be read now defers the capsule (§ companion spec:
crawling on a guess could fetch exactly what the author forbids).
"""

from __future__ import annotations

import dataclasses
import functools

import trio

from crawler.contact import Contact, Unreachable, connection_failure
from crawler.content import decode
from crawler.fetch import FetchLimits, FetchResult
from crawler.frontier import FrontierItem
from crawler.messages import MAX_REDIRECTS, RobotsRecord
from crawler.politeness import HostSlot, PolitenessRules
from crawler.recorder import Recorder
from crawler.robots_cache import RobotsCache, RobotsFetch, pubnix_user, robots_path
from crawler.scheduler import Scheduler
from sextant.errors import InvalidURL
from sextant.protocol import Family
from sextant.robots import parse_robots_response
from sextant.store import utcnow
from sextant.urls import GeminiURL, parse, resolve

ROBOTS_MAX_BYTES = 512 * 1024


class RobotsGate:
    """Whether robots.txt lets the crawl ask for a page, asking for the file when needed."""

    def __init__(
        self,
        *,
        cache: RobotsCache,
        contact: Contact,
        scheduler: Scheduler[FrontierItem],
        recorder: Recorder,
        rules: PolitenessRules,
        limits: FetchLimits,
    ) -> None:
        self.cache = cache
        self.contact = contact
        self.scheduler = scheduler
        self.recorder = recorder
        self.rules = rules
        self.limits = dataclasses.replace(
            limits, max_body_bytes=min(limits.max_body_bytes, ROBOTS_MAX_BYTES)
        )

    async def allows(self, slot: HostSlot, item: FrontierItem, url: GeminiURL) -> bool | None:
        """True/False from the cached policies, or None after handling a request or deferral
        (the item was requeued or deferred and the slot released)."""
        keys: list[tuple[int, str | None]] = [(slot.key, None)]
        user = pubnix_user(url)
        if user is not None:
            keys.append((slot.key, user))
        delays: list[float] = []
        for key in keys:
            allowed = self.cache.allows(url, key)
            if allowed is None:
                outcome, requested = await self.cache.refresh(
                    key, functools.partial(self._fetch, slot, url, key[1])
                )
                await self._after(slot, item, outcome, requested)
                return None
            if not allowed:
                return False
            cached = self.cache.fresh(key)
            if cached is not None and cached.crawl_delay is not None:
                delays.append(cached.crawl_delay)
        slot.obey_crawl_delays(delays)
        return True

    async def _after(
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
            await self.contact.hold_or_defer(slot)
            return
        if outcome.slow_down is not None and outcome.slow_down <= self.rules.max_hold:
            pause = max(outcome.slow_down, slot.delay)
            self.scheduler.release(slot, requested=True, pause=pause, requeue=item)
            return
        # robots.txt exists or may, and cannot be read now: the capsule waits.
        until = slot.defer_unreadable_robots(outcome.slow_down)
        deferred = self.contact.take_back(slot, until, also=(item.id,), capsule_wide=True)
        self.scheduler.release(slot, requested=True)
        assert deferred is not None  # capsule-wide: always recorded
        await self.recorder.record(deferred)

    async def _fetch(self, slot: HostSlot, url: GeminiURL, user: str | None) -> RobotsFetch:
        """Ask the capsule for its (or a pubnix user's) robots.txt; a redirect is followed
        within the capsule (up to 5 hops, each after the capsule's delay)."""
        target = url.with_path(robots_path(user))
        address = await self.contact.address(slot, url)
        if isinstance(address, Unreachable):
            if user is None:
                await self.recorder.record(
                    RobotsRecord(
                        slot.key,
                        utcnow(),
                        None,
                        None,
                        None,
                        usable=False,
                        crawl_delay=None,
                        capsule_failures=slot.failures,
                        parked_until=address.parked,
                    )
                )
            return RobotsFetch(None, None, None)
        result: FetchResult | None = None
        for hop in range(MAX_REDIRECTS + 1):
            if hop:
                await trio.sleep(slot.delay)
            result = await self.contact.fetch(target, address, self.limits, robots=True)
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
        fetch_outcome = self._outcome(result)
        parked = None
        if connection_failure(result):
            parked = self.contact.connect_failed(slot)
        elif result.header is not None:
            slot.on_answer(page=False)
        policy = fetch_outcome.policy
        await self.recorder.record(
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

    def _outcome(self, result: FetchResult) -> RobotsFetch:
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
