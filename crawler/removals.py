"""``sextant forget``: the operator honours a removal request.

A removal is a URL prefix (a whole capsule, or a part of one) with its reason, kept in the
``operator_exclusions`` table. Forgetting one, at once and in the store:

* the pages under the prefix lose what their author wrote (body, title, meta, outbound
  links, fetch history) and become ``excluded`` with the reason, so ``sextant show`` and
  the next ``sextant index`` (which drops them) both see it;
* their frontier rows go;
* every later crawl loads the prefix as an exclusion rule, so they are never fetched again;
* the search capsule publishes it with its reason on ``/known-excludes``.

Undoing a removal puts the pages back as never fetched; the next crawl fetches them again
if nothing else excludes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, delete, insert, select, update

from crawler.admission import EXCLUDED, Admission, exclusion_reason
from crawler.frontier import CAPSULES, PAGES
from crawler.rejudge import (
    SWEEPS,
    next_batch,
    remember_swept,
    settle,
    settled_values,
    sweep_exclusions,
    unqueue,
)
from crawler.traps import ExclusionRule, Exclusions
from sextant.errors import ConfigError, InvalidURL
from sextant.store import FetchAttempt, Link, OperatorExclusion, utcnow
from sextant.store.batches import in_batches
from sextant.urls import parse

REMOVALS = OperatorExclusion.__table__
LINKS = Link.__table__
ATTEMPTS = FetchAttempt.__table__

SOURCE = "sextant forget"
MAX_REASON_CHARS = 500  # published on /known-excludes: a sentence, not an essay

# Everything a page holds that its author wrote or that was derived from it.
_ERASED = {
    "body": None,
    "title": None,
    "meta": None,
    "redirect_target": None,
    "content_hash": None,
    "feed_kind": None,
    "lang": None,
    "duplicate_of_id": None,
}


@dataclass(frozen=True, slots=True)
class Removal:
    prefix: str
    reason: str
    added_at: datetime


def removal_prefix(target: str) -> str:
    """The canonical URL prefix for ``HOST[:PORT]`` (the capsule) or a ``gemini://`` prefix."""
    text = target.strip()
    if "://" not in text:
        text = f"gemini://{text}"
    try:
        return str(parse(text))
    except InvalidURL as exc:
        raise ConfigError(
            f"{target!r} is neither a host nor a gemini:// URL prefix: {exc}"
        ) from None


def removal_rule(prefix: str, reason: str) -> ExclusionRule:
    """The exclusion rule of a removal: the prefix as a glob, or as a regular expression when
    it holds a character globs treat specially."""
    if "*" in prefix or prefix.endswith("$"):
        return ExclusionRule(rf"re:\A{re.escape(prefix)}", reason, SOURCE)
    return ExclusionRule(prefix, reason, SOURCE)


def stored_removals(conn: Connection) -> list[Removal]:
    rows = conn.execute(
        select(REMOVALS.c.prefix, REMOVALS.c.reason, REMOVALS.c.added_at).order_by(REMOVALS.c.id)
    ).all()
    return [Removal(row.prefix, row.reason, row.added_at) for row in rows]


def removal_rules(conn: Connection) -> Exclusions:
    return Exclusions(tuple(removal_rule(r.prefix, r.reason) for r in stored_removals(conn)))


def adopt_removals(engine: Engine, admission: Admission) -> int:
    """At a crawl's start: the stored removals join the run's rules (first, so a removed
    page shows the operator's reason), and the stored pages meet every rule they have not
    met yet. Returns how many pages became excluded."""
    with engine.connect() as conn:
        stored = removal_rules(conn)
    admission.exclusions = stored.merged(admission.exclusions)
    return sweep_exclusions(engine, admission.exclusions)


def forget(engine: Engine, target: str, reason: str, now: datetime | None = None) -> int:
    """Record the removal of ``target`` and erase its pages; returns how many pages."""
    reason = " ".join(reason.split())
    if not reason:
        raise ConfigError("give the reason with --reason TEXT; it is published on /known-excludes")
    if len(reason) > MAX_REASON_CHARS:
        raise ConfigError(
            f"the reason is {len(reason)} characters; keep it under {MAX_REASON_CHARS}"
        )
    now = now or utcnow()
    prefix = removal_prefix(target)
    rule = removal_rule(prefix, reason)
    with engine.begin() as conn:
        conn.execute(delete(REMOVALS).where(REMOVALS.c.prefix == prefix))
        conn.execute(insert(REMOVALS).values(prefix=prefix, reason=reason, added_at=now))
        capsule_id = _capsule_of(conn, prefix)
    erased = 0
    last = 0
    message = exclusion_reason(rule)
    while capsule_id is not None:
        with engine.begin() as conn:
            rows = next_batch(conn, PAGES.c.capsule_id == capsule_id, last)
            if not rows:
                break
            last = rows[-1].id
            ids = [row.id for row in rows if rule.matches(row.url)]
            erase(conn, ids, message, now)
            erased += len(ids)
    with engine.begin() as conn:
        remember_swept(conn, [rule.pattern], now)
    return erased


def erase(conn: Connection, ids: list[int], reason: str, now: datetime) -> None:
    """Pages become excluded and empty: content, outbound links, history and queue rows go.
    The pages they linked to lose inbound links (anchor text, counts), so their ``updated_at``
    moves for the indexer too."""
    for chunk in in_batches(ids):
        targets = select(LINKS.c.target_id).where(
            LINKS.c.source_id.in_(chunk), LINKS.c.target_id.is_not(None)
        )
        conn.execute(update(PAGES).where(PAGES.c.id.in_(targets)).values(updated_at=now))
        conn.execute(delete(LINKS).where(LINKS.c.source_id.in_(chunk)))
        conn.execute(delete(ATTEMPTS).where(ATTEMPTS.c.page_id.in_(chunk)))
    settle(conn, ids, {**settled_values(EXCLUDED, reason, now), **_ERASED})
    unqueue(conn, ids)


def undo(engine: Engine, target: str, now: datetime | None = None) -> int:
    """Take a removal back; its pages become never-fetched pages again (or keep another
    removal's reason if one still covers them). Returns how many pages came back."""
    now = now or utcnow()
    prefix = removal_prefix(target)
    with engine.begin() as conn:
        row = conn.execute(
            select(REMOVALS.c.reason).where(REMOVALS.c.prefix == prefix)
        ).one_or_none()
        if row is None:
            raise ConfigError(f"{prefix} was not forgotten; `sextant forget --list` shows what was")
        conn.execute(delete(REMOVALS).where(REMOVALS.c.prefix == prefix))
        rule = removal_rule(prefix, row.reason)
        conn.execute(delete(SWEEPS).where(SWEEPS.c.pattern == rule.pattern))
        remaining = removal_rules(conn)
        capsule_id = _capsule_of(conn, prefix)
    message = exclusion_reason(rule)
    restored = 0
    last = 0
    while capsule_id is not None:
        with engine.begin() as conn:
            rows = next_batch(
                conn,
                (PAGES.c.capsule_id == capsule_id) & (PAGES.c.error_message == message),
                last,
            )
            if not rows:
                break
            last = rows[-1].id
            back: list[int] = []
            for page in rows:
                other = remaining.match(page.url)
                if other is None:
                    back.append(page.id)
                else:
                    settle(conn, [page.id], {"error_message": exclusion_reason(other)})
            settle(
                conn,
                back,
                {
                    "state": "new",
                    "error_kind": None,
                    "error_message": None,
                    "fetched_at": None,
                    "next_crawl_at": None,
                    "updated_at": now,
                },
            )
            restored += len(back)
    return restored


def _capsule_of(conn: Connection, prefix: str) -> int | None:
    url = parse(prefix)
    return conn.execute(
        select(CAPSULES.c.id).where(CAPSULES.c.host == url.host, CAPSULES.c.port == url.port)
    ).scalar_one_or_none()
