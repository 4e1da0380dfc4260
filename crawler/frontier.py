"""The frontier: URLs due to be fetched, kept in the database so no crash can lose them.

Workers never hold more than a bounded window of it in memory. They *lease* rows: a lease
names its owner and runs out (``leased_until``), so a crashed or killed process leaves
nothing stuck; its rows are simply due again once the lease expires (or at once, when a
lone crawler starts and clears every lease, see :meth:`Frontier.release_stale`). The single
writer deletes a row in the same transaction that stores its page.

Several processes can share one frontier (issue 8): a lease query skips capsules on which
another live process holds a lease, so per-capsule politeness holds across processes too.
:func:`_claim_statement` and :func:`lock_frontier` are the only dialect-specific SQL of the
crawler: on PostgreSQL the candidate rows are taken ``FOR UPDATE SKIP LOCKED`` and claims
are serialized by a transaction-scoped advisory lock (two claims could otherwise pick
different rows of one capsule at the same instant); on SQLite the single ``UPDATE ...
RETURNING`` statement is atomic under the database's one writer lock. The transactions that
add seeds take the same lock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import (
    Connection,
    Engine,
    Update,
    func,
    or_,
    select,
    text,
    update,
)

from sextant.store import Capsule, FrontierEntry, Page, UserRobots, utcnow
from sextant.store.batches import in_batches

PAGES = Page.__table__
CAPSULES = Capsule.__table__
FRONTIER = FrontierEntry.__table__
USER_ROBOTS = UserRobots.__table__

# Capsules to skip in one claim, at most; past that the claim just returns a few rows the
# window will hold for a while, which is harmless.
_MAX_EXCLUDED = 5000
# Key of the PostgreSQL advisory lock that serializes claims ("SXTF").
_CLAIM_LOCK_KEY = 0x53585446

PRIORITY_SEED = -10
PRIORITY_RETRY = -5
PRIORITY_REDIRECT = -1
PRIORITY_LINK = 0
PRIORITY_RECRAWL = 5

MIN_RECRAWL = timedelta(days=1)
MAX_RECRAWL = timedelta(days=30)


@dataclass(frozen=True, slots=True)
class StoredRobots:
    """A pubnix user's robots.txt as the store keeps it."""

    user: str
    status: int | None
    text: str | None
    fetched_at: datetime


@dataclass(frozen=True, slots=True)
class CapsuleInfo:
    """What the engine needs to know about a capsule before contacting it."""

    id: int
    host: str
    port: int
    address: str | None
    consecutive_failures: int
    parked_until: datetime | None
    last_attempt_at: datetime | None
    robots_txt: str | None
    robots_status: int | None
    robots_fetched_at: datetime | None
    crawl_delay: float | None
    user_robots: tuple[StoredRobots, ...] = ()


@dataclass(frozen=True, slots=True)
class FrontierItem:
    """One leased frontier row, with the URL it stands for."""

    id: int
    page_id: int
    capsule_id: int
    url: str
    depth: int
    reason: str
    attempts: int
    redirects: int
    due_at: datetime
    priority: int
    enqueued_at: datetime


@dataclass(frozen=True, slots=True)
class Claim:
    items: tuple[FrontierItem, ...]
    capsules: dict[int, CapsuleInfo]


def recrawl_interval(previous: timedelta | None, changed: bool) -> timedelta:
    """When to look at a page again: twice as soon after it changed, twice as late after it
    did not, between 1 and 30 days. A page that never changes settles at a month; a daily
    log is visited daily."""
    if previous is None:
        return MIN_RECRAWL
    interval = previous / 2 if changed else previous * 2
    return max(MIN_RECRAWL, min(MAX_RECRAWL, interval))


def _claim_statement(
    dialect: str,
    owner: str,
    now: datetime,
    until: datetime,
    limit: int,
    per_capsule: int,
    exclude: Collection[int],
) -> Update:
    """``UPDATE frontier SET lease...`` over the earliest due rows, at most ``per_capsule``
    per capsule, skipping capsules in ``exclude`` and those another owner is working on.

    The candidates are a bounded prefix of the due rows in ``(due_at, priority)`` order (the
    ``ix_frontier_due`` index), so a claim costs the same with a thousand or a million rows;
    the per-capsule cap is then applied to that prefix with ``ROW_NUMBER()``.
    """
    f = FRONTIER
    busy_elsewhere = select(f.c.capsule_id).where(f.c.leased_until >= now, f.c.lease_owner != owner)
    candidates = select(f.c.id, f.c.capsule_id, f.c.due_at, f.c.priority).where(
        f.c.due_at <= now,
        or_(f.c.leased_until.is_(None), f.c.leased_until < now),
        f.c.capsule_id.not_in(busy_elsewhere),
    )
    if exclude:
        candidates = candidates.where(f.c.capsule_id.not_in(sorted(exclude)[:_MAX_EXCLUDED]))
    candidates = candidates.order_by(f.c.due_at, f.c.priority, f.c.id).limit(max(limit * 4, 1000))
    if dialect == "postgresql":
        candidates = candidates.with_for_update(skip_locked=True)
    pool = candidates.subquery("candidates")
    rank = (
        func.row_number()
        .over(partition_by=pool.c.capsule_id, order_by=(pool.c.due_at, pool.c.priority, pool.c.id))
        .label("rank")
    )
    ranked = select(pool.c.id, pool.c.due_at, pool.c.priority, rank).subquery("ranked")
    chosen = (
        select(ranked.c.id)
        .where(ranked.c.rank <= per_capsule)
        .order_by(ranked.c.due_at, ranked.c.priority, ranked.c.id)
        .limit(limit)
    )
    return (
        update(f)
        .where(f.c.id.in_(chosen))
        .values(lease_owner=owner, leased_until=until)
        .returning(f.c.id)
    )


class Frontier:
    """Leases on the frontier table for one owner (one crawler process).

    Methods are blocking database calls; the engine runs them in a thread.
    """

    def __init__(self, engine: Engine, owner: str, *, lease_seconds: float = 300.0) -> None:
        self.engine = engine
        self.owner = owner
        self.lease_seconds = lease_seconds

    def claim(
        self,
        limit: int,
        *,
        per_capsule: int = 8,
        exclude: Collection[int] = (),
        now: datetime | None = None,
    ) -> Claim:
        """Lease up to ``limit`` due rows and return them with their capsules."""
        if limit <= 0:
            return Claim((), {})
        now = now or utcnow()
        until = now + timedelta(seconds=self.lease_seconds)
        dialect = self.engine.dialect.name
        with self.engine.begin() as conn:
            lock_frontier(conn)
            statement = _claim_statement(
                dialect, self.owner, now, until, limit, per_capsule, exclude
            )
            ids = [row[0] for row in conn.execute(statement)]
            if not ids:
                return Claim((), {})
            return _load_claim(conn, ids)

    def renew(self, now: datetime | None = None) -> int:
        """Push back the expiry of every lease this owner holds."""
        until = (now or utcnow()) + timedelta(seconds=self.lease_seconds)
        with self.engine.begin() as conn:
            result = conn.execute(
                update(FRONTIER)
                .where(FRONTIER.c.lease_owner == self.owner)
                .values(leased_until=until)
            )
            return result.rowcount

    def release(self, ids: Iterable[int]) -> int:
        """Give rows back unchanged: they are due again for anyone."""
        released = 0
        with self.engine.begin() as conn:
            for chunk in in_batches(list(ids)):
                result = conn.execute(
                    update(FRONTIER)
                    .where(FRONTIER.c.id.in_(chunk), FRONTIER.c.lease_owner == self.owner)
                    .values(lease_owner=None, leased_until=None)
                )
                released += result.rowcount
        return released

    def release_all(self) -> int:
        """Give back every lease of this owner (the end of a run)."""
        with self.engine.begin() as conn:
            result = conn.execute(
                update(FRONTIER)
                .where(FRONTIER.c.lease_owner == self.owner)
                .values(lease_owner=None, leased_until=None)
            )
            return result.rowcount

    def release_stale(self) -> int:
        """Clear every lease, whoever holds it.

        Only for a crawler that knows it is alone (not ``--worker``): leases left by a killed
        run would otherwise keep their rows waiting until they expire.
        """
        with self.engine.begin() as conn:
            result = conn.execute(
                update(FRONTIER)
                .where(FRONTIER.c.lease_owner.is_not(None))
                .values(lease_owner=None, leased_until=None)
            )
            return result.rowcount

    def leased_elsewhere(self, now: datetime | None = None) -> bool:
        """Whether another live process holds rows: a worker with nothing to claim waits
        for them, since they come back when that process dies (its lease runs out) and
        lead to new rows when it does not."""
        now = now or utcnow()
        with self.engine.connect() as conn:
            row = conn.execute(
                select(FRONTIER.c.id)
                .where(FRONTIER.c.leased_until >= now, FRONTIER.c.lease_owner != self.owner)
                .limit(1)
            ).first()
            return row is not None

    def size(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(FRONTIER)).scalar_one())

    def due_count(self, now: datetime | None = None) -> int:
        now = now or utcnow()
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count()).select_from(FRONTIER).where(FRONTIER.c.due_at <= now)
                ).scalar_one()
            )


def lock_frontier(conn: Connection) -> None:
    """Hold the frontier's lock until ``conn``'s transaction ends, before it reads anything.

    Claims take it, and so do the transactions that fill the frontier from seeds, the
    inbox, recrawls and stragglers: workers started together with the same seeds would
    otherwise both find a page missing, both insert it, and one fail on the unique URL.
    PostgreSQL has a transaction-scoped advisory lock for this. SQLite's lock is its one
    write lock, but the driver only begins a transaction at the first write, after the
    reads; a write that changes nothing takes it first.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CLAIM_LOCK_KEY})
    elif conn.dialect.name == "sqlite":
        conn.execute(text("UPDATE frontier SET id = id WHERE 0 = 1"))


def _load_claim(conn: Connection, ids: Sequence[int]) -> Claim:
    f, p, c = FRONTIER, PAGES, CAPSULES
    items: list[FrontierItem] = []
    capsules: dict[int, CapsuleInfo] = {}
    for chunk in in_batches(ids):
        rows = conn.execute(
            select(
                f.c.id,
                f.c.page_id,
                f.c.capsule_id,
                p.c.url,
                f.c.depth,
                f.c.reason,
                f.c.attempts,
                f.c.redirects,
                f.c.due_at,
                f.c.priority,
                f.c.enqueued_at,
                c.c.host,
                c.c.port,
                c.c.address,
                c.c.consecutive_failures,
                c.c.parked_until,
                c.c.last_attempt_at,
                c.c.robots_txt,
                c.c.robots_status,
                c.c.robots_fetched_at,
                c.c.crawl_delay,
            )
            .join(p, p.c.id == f.c.page_id)
            .join(c, c.c.id == f.c.capsule_id)
            .where(f.c.id.in_(chunk))
        )
        for row in rows:
            items.append(
                FrontierItem(
                    id=row.id,
                    page_id=row.page_id,
                    capsule_id=row.capsule_id,
                    url=row.url,
                    depth=row.depth,
                    reason=row.reason,
                    attempts=row.attempts,
                    redirects=row.redirects,
                    due_at=row.due_at,
                    priority=row.priority,
                    enqueued_at=row.enqueued_at,
                )
            )
            if row.capsule_id not in capsules:
                capsules[row.capsule_id] = CapsuleInfo(
                    id=row.capsule_id,
                    host=row.host,
                    port=row.port,
                    address=row.address,
                    consecutive_failures=row.consecutive_failures,
                    parked_until=row.parked_until,
                    last_attempt_at=row.last_attempt_at,
                    robots_txt=row.robots_txt,
                    robots_status=row.robots_status,
                    robots_fetched_at=row.robots_fetched_at,
                    crawl_delay=row.crawl_delay,
                )
    items.sort(key=lambda item: (item.due_at, item.priority, item.id))
    return Claim(tuple(items), _with_user_robots(conn, capsules))


def _with_user_robots(conn: Connection, capsules: dict[int, CapsuleInfo]) -> dict[int, CapsuleInfo]:
    """The claimed capsules with their pubnix users' stored robots.txt files."""
    found: dict[int, list[StoredRobots]] = {}
    for chunk in in_batches(list(capsules)):
        rows = conn.execute(select(USER_ROBOTS).where(USER_ROBOTS.c.capsule_id.in_(chunk)))
        for row in rows:
            found.setdefault(row.capsule_id, []).append(
                StoredRobots(row.user_name, row.status, row.text, row.fetched_at)
            )
    return {
        key: replace(info, user_robots=tuple(found[key])) if key in found else info
        for key, info in capsules.items()
    }
