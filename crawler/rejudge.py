"""Second thoughts: stored pages judged again when robots.txt or the exclusion rules change.

A page is judged when it is fetched. Without a second look, a page its author has since
forbidden in robots.txt, or that the operator has since excluded, would stay in the store as
``ok`` and in the index until its own recrawl, weeks later. So:

* when a capsule's (or a pubnix user's) robots.txt is fetched again and differs from the
  stored one, the stored pages it now forbids become ``disallowed`` in the same transaction
  (:func:`rejudge_robots`, called by the writer);
* when a crawl starts with exclusion rules the stored pages have not met yet (an edited
  ``--exclude`` file, ``sextant forget``, a release's new trap rules), the stored and queued
  pages they cover become ``excluded`` (:func:`sweep_exclusions`).

Either way ``updated_at`` moves, so the next ``sextant index`` drops the pages. The work is
done a batch of pages at a time (keyset on the id), never a query per page nor every page in
memory at once, and only when something changed: an unchanged robots.txt or rule set costs
one comparison.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Row, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from crawler.admission import EXCLUDED, exclusion_reason
from crawler.frontier import CAPSULES, FRONTIER, PAGES, USER_ROBOTS
from crawler.messages import RobotsRecord
from crawler.robots_cache import policy_allows, policy_from_text
from crawler.traps import Exclusions
from sextant.errors import InvalidURL
from sextant.store import ExclusionSweep, utcnow
from sextant.store.batches import in_batches
from sextant.urls import GeminiURL, parse, scope_of

SWEEPS = ExclusionSweep.__table__
T = TypeVar("T")

DISALLOWED = "disallowed"
ROBOTS_REASON = "robots.txt disallows it"
#: robots.txt may change again; a page it forbids is looked at again after its lifetime.
#: A rule-excluded page waits for a rule change instead.
ROBOTS_RECHECK = timedelta(days=1)
BATCH = 1000


def settled_values(state: str, reason: str, now: datetime) -> dict[str, Any]:
    """The columns of a page settled without a request: excluded or disallowed."""
    return {
        "state": state,
        "error_kind": state,
        "error_message": reason,
        "next_crawl_at": now + ROBOTS_RECHECK if state == DISALLOWED else None,
        "updated_at": now,
    }


def page_batches(
    conn: Connection, where: ColumnElement[bool], *, size: int = BATCH
) -> Iterator[Sequence[Row[*tuple[Any, ...]]]]:
    """Pages matching ``where`` (id, url), ``size`` at a time in id order, on one connection."""
    last = 0
    while True:
        rows = next_batch(conn, where, last, size)
        if not rows:
            return
        yield rows
        last = rows[-1].id


def next_batch(
    conn: Connection, where: ColumnElement[bool], after: int, size: int = BATCH
) -> Sequence[Row[*tuple[Any, ...]]]:
    """The first ``size`` pages past id ``after`` matching ``where``: for callers that commit
    between batches, and so cannot keep one cursor open."""
    return conn.execute(
        select(PAGES.c.id, PAGES.c.url)
        .where(PAGES.c.id > after, where)
        .order_by(PAGES.c.id)
        .limit(size)
    ).all()


def settle(conn: Connection, ids: Sequence[int], values: dict[str, Any]) -> None:
    for chunk in in_batches(ids):
        conn.execute(update(PAGES).where(PAGES.c.id.in_(chunk)).values(**values))


def unqueue(conn: Connection, ids: Sequence[int]) -> None:
    for chunk in in_batches(ids):
        conn.execute(delete(FRONTIER).where(FRONTIER.c.page_id.in_(chunk)))


# --- robots.txt ---------------------------------------------------------------------------


def rejudge_robots(conn: Connection, record: RobotsRecord, now: datetime) -> int:
    """Before a freshly fetched robots.txt replaces the stored one: mark ``disallowed`` the
    stored pages it forbids. Returns how many. Nothing to do when the file is unchanged (the
    daily refetch, nearly always) or allows everything."""
    if not record.usable:
        return 0
    if _stored_robots(conn, record.capsule_id, record.user) == (record.status, record.text):
        return 0
    policy = policy_from_text(record.status, record.text)
    if policy is None or not policy.rules_for():
        return 0
    where = (PAGES.c.capsule_id == record.capsule_id) & PAGES.c.state.not_in(
        ("new", DISALLOWED, EXCLUDED)  # unfetched pages meet robots.txt when fetched
    )
    if record.user is not None:
        # Only that user's directory: a pubnix has many users and each one's first
        # robots.txt must not cost a pass over the whole host.
        host, port = conn.execute(
            select(CAPSULES.c.host, CAPSULES.c.port).where(CAPSULES.c.id == record.capsule_id)
        ).one()
        home = GeminiURL("gemini", host, port, f"/~{record.user}/", None)
        where &= PAGES.c.scope == scope_of(home)
    values = settled_values(DISALLOWED, ROBOTS_REASON, now)
    count = 0
    for rows in page_batches(conn, where):
        forbidden: list[int] = []
        for row in rows:
            try:
                url = parse(row.url)
            except InvalidURL:
                continue
            if not policy_allows(policy, url, record.user):
                forbidden.append(row.id)
        settle(conn, forbidden, values)
        count += len(forbidden)
    return count


def _stored_robots(
    conn: Connection, capsule_id: int, user: str | None
) -> tuple[int | None, str | None] | None:
    if user is None:
        query = select(CAPSULES.c.robots_status, CAPSULES.c.robots_txt).where(
            CAPSULES.c.id == capsule_id
        )
    else:
        query = select(USER_ROBOTS.c.status, USER_ROBOTS.c.text).where(
            USER_ROBOTS.c.capsule_id == capsule_id, USER_ROBOTS.c.user_name == user
        )
    row = conn.execute(query).one_or_none()
    return None if row is None else (row[0], row[1])


# --- exclusion rules ----------------------------------------------------------------------


def sweep_exclusions(engine: Engine, exclusions: Exclusions, now: datetime | None = None) -> int:
    """Exclude the stored and queued pages that rules new since the last sweep cover; a
    transaction per batch. Returns how many pages became ``excluded``.

    Rules are remembered by pattern (``exclusion_sweeps``): a rule dropped from this run's set
    is forgotten, so adding it back sweeps again.
    """
    now = now or utcnow()
    with engine.connect() as conn:
        swept = set(conn.scalars(select(SWEEPS.c.pattern)))
    fresh = Exclusions(tuple(rule for rule in exclusions.rules if rule.pattern not in swept))
    excluded = 0
    if len(fresh):
        last = 0
        while True:
            with engine.begin() as conn:
                rows = next_batch(conn, PAGES.c.state != EXCLUDED, last)
                if not rows:
                    break
                last = rows[-1].id
                excluded += _exclude_matching(conn, rows, fresh, now)
    current = dict.fromkeys(rule.pattern for rule in exclusions.rules)
    try:
        with engine.begin() as conn:
            gone = list(swept - current.keys())
            for chunk in in_batches(gone):
                conn.execute(delete(SWEEPS).where(SWEEPS.c.pattern.in_(chunk)))
            added = [{"pattern": p, "swept_at": now} for p in current if p not in swept]
            if added:
                conn.execute(insert(SWEEPS), added)
    except IntegrityError:
        pass  # another crawler process (--worker) swept the same rules and said so first
    return excluded


def remember_swept(conn: Connection, patterns: Iterable[str], now: datetime) -> None:
    """Record that the stored pages have met these rules (``sextant forget`` sweeps itself)."""
    for pattern in patterns:
        conn.execute(delete(SWEEPS).where(SWEEPS.c.pattern == pattern))
        conn.execute(insert(SWEEPS).values(pattern=pattern, swept_at=now))


def _exclude_matching(
    conn: Connection, rows: Sequence[Row[*tuple[Any, ...]]], rules: Exclusions, now: datetime
) -> int:
    by_reason: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        rule = rules.match(row.url)
        if rule is not None:
            by_reason[exclusion_reason(rule)].append(row.id)
    for reason, ids in by_reason.items():
        settle(conn, ids, settled_values(EXCLUDED, reason, now))
        unqueue(conn, ids)
    return sum(len(ids) for ids in by_reason.values())
