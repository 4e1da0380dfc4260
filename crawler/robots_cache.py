"""robots.txt policies by capsule, kept for a day so a capsule is asked once, not per page.

A capsule's own ``/robots.txt`` is cached in the ``capsules.robots_*`` columns (so the next
run need not ask again) and here in memory. On a pubnix each ``/~user/`` directory is a
separate person's capsule who cannot edit the host's file, so a ``/~user/robots.txt`` is
honoured too, for paths in that directory; those are kept in the ``user_robots`` table.

Only one fetch per key is ever in progress: later callers wait on a :class:`trio.Event` for
the first one's outcome instead of asking the capsule again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import trio

from sextant.robots import RobotsPolicy, allowed_in_user_directory, parse_robots_response
from sextant.robots import pubnix_user as user_of_path
from sextant.store import utcnow
from sextant.urls import GeminiURL

# (capsule id, pubnix user or None for the capsule's own file)
RobotsKey = tuple[int, str | None]


@dataclass(frozen=True, slots=True)
class CachedPolicy:
    policy: RobotsPolicy
    fetched_at: datetime
    crawl_delay: float | None
    # No rule in any group addressing us (the common case, and every missing robots.txt):
    # no need to normalize each path just to learn that nothing applies.
    open: bool = False


@dataclass(frozen=True, slots=True)
class RobotsFetch:
    """The outcome of one attempt to read a robots.txt."""

    policy: RobotsPolicy | None  # None: not available now (4x, 44, timeout...)
    status: int | None
    text: str | None
    slow_down: float | None = None  # seconds, when the capsule answered 44


def _cached(policy: RobotsPolicy, fetched_at: datetime) -> CachedPolicy:
    return CachedPolicy(policy, fetched_at, policy.crawl_delay(), open=not policy.rules_for())


def pubnix_user(url: GeminiURL) -> str | None:
    """``alice`` for ``/~alice/...``; the same rule :func:`sextant.urls.scope_of` uses."""
    return user_of_path(url.path)


def robots_path(user: str | None) -> str:
    return f"/~{user}/robots.txt" if user else "/robots.txt"


def policy_from_text(status: int | None, text: str | None) -> RobotsPolicy | None:
    if status is None:
        return None
    return parse_robots_response(status, text)


class RobotsCache:
    def __init__(self, ttl: float = 86_400.0) -> None:
        self.ttl = timedelta(seconds=ttl)
        self._policies: dict[RobotsKey, CachedPolicy] = {}
        self._pending: dict[RobotsKey, trio.Event] = {}
        self._last: dict[RobotsKey, RobotsFetch] = {}

    def prime(
        self,
        capsule_id: int,
        *,
        status: int | None,
        text: str | None,
        fetched_at: datetime | None,
        user: str | None = None,
    ) -> None:
        """Load a stored robots.txt if still fresh: the capsule's own (from the capsules
        table) or, with ``user``, a pubnix user's (from ``user_robots``)."""
        key = (capsule_id, user)
        if key in self._policies or fetched_at is None or utcnow() - fetched_at > self.ttl:
            return
        policy = policy_from_text(status, text)
        if policy is not None:
            self._policies[key] = _cached(policy, fetched_at)

    def fresh(self, key: RobotsKey) -> CachedPolicy | None:
        cached = self._policies.get(key)
        if cached is None:
            return None
        if utcnow() - cached.fetched_at > self.ttl:
            del self._policies[key]
            return None
        return cached

    def store(self, key: RobotsKey, policy: RobotsPolicy, fetched_at: datetime) -> CachedPolicy:
        cached = _cached(policy, fetched_at)
        self._policies[key] = cached
        return cached

    async def refresh(
        self, key: RobotsKey, fetcher: Callable[[], Awaitable[RobotsFetch]]
    ) -> tuple[RobotsFetch, bool]:
        """Fetch the policy for ``key`` unless a fetch is already under way, in which case
        wait for that one. Returns the outcome and whether *this* call made the request."""
        pending = self._pending.get(key)
        if pending is not None:
            await pending.wait()
            return self._last.get(key, RobotsFetch(None, None, None)), False
        event = trio.Event()
        self._pending[key] = event
        try:
            outcome = await fetcher()
            if outcome.policy is not None:
                self.store(key, outcome.policy, utcnow())
            self._last[key] = outcome
            return outcome, True
        finally:
            del self._pending[key]
            event.set()

    def forget(self, capsule_id: int) -> None:
        for key in [key for key in self._policies if key[0] == capsule_id]:
            del self._policies[key]
        for key in [key for key in self._last if key[0] == capsule_id]:
            del self._last[key]

    def allows(self, url: GeminiURL, key: RobotsKey) -> bool | None:
        """Whether the cached policy for ``key`` allows ``url``; ``None`` when not cached.

        Every group addressing the crawler (``sextant``, ``indexer``, ``*``) must allow it;
        a ``/~user/robots.txt`` is read as :func:`allowed_in_user_directory` explains.
        """
        cached = self.fresh(key)
        if cached is None:
            return None
        if cached.open:
            return True
        return policy_allows(cached.policy, url, key[1])


def policy_allows(policy: RobotsPolicy, url: GeminiURL, user: str | None) -> bool:
    """Whether ``policy`` (the capsule's own robots.txt, or ``user``'s) allows ``url``."""
    path = url.path if url.query is None else f"{url.path}?{url.query}"
    if user is None:
        return policy.allowed(path)
    return allowed_in_user_directory(policy, user, path)
