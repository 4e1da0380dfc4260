"""Permanent redirects: where a page that answered ``31`` now lives.

A ``31`` (Gemini spec §3.2.3, "redirect - permanent") says the old URL is done with: the
crawler does not ask it again (its target carries the recrawl), the index has no document
for it, and links to it count for the page it leads to, in link analysis, anchor text and
backlinks. A ``30`` is temporary: the old URL stays the one to ask, and nothing is moved.

The store already says all of it: the old page keeps ``state = 'redirect'``, ``status = 31``
and ``redirect_target``. Redirect pages are a small part of a store, and ``status`` and
``redirect_target`` are indexed (migration 0005), so both directions are asked in a few
statements, never per link: the whole map once per index run (:func:`permanent_redirects`),
the pages redirected to one URL per backlinks page (:func:`redirected_to`). Chains are
followed for at most :data:`MAX_HOPS` hops (the crawler follows no more either); a loop
leads nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session, aliased

from sextant.protocol import Status
from sextant.store.models import Page

#: The condition of a page that moved for good (and was followed: a 31 that loops or goes
#: too far is recorded as an error, not a redirect).
PERMANENTLY_MOVED = (Page.state == "redirect") & (Page.status == int(Status.REDIRECT_PERMANENT))
MAX_HOPS = 5  # Gemini spec §3.2.3: clients should follow no more than 5 redirects
#: At most this many pages are credited to one URL by :func:`redirected_to`: a capsule
#: redirecting a million URLs to one page must not make its backlinks page a huge query.
MAX_REDIRECTED = 1000


@dataclass(frozen=True, slots=True)
class PermanentRedirects:
    """Page id of each permanently moved page → page id at the end of its chain, and back."""

    target_of: dict[int, int] = field(default_factory=dict)
    sources_of: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def resolve(self, page_id: int) -> int:
        """The page a link to ``page_id`` counts for."""
        return self.target_of.get(page_id, page_id)


def permanent_redirects(connection: Connection) -> PermanentRedirects:
    """Every permanently moved page whose chain ends at a page the store knows (one
    statement: each redirect row with its target's id, found on the unique URL index)."""
    target = aliased(Page)
    rows = connection.execute(
        select(Page.id, Page.url, Page.redirect_target, target.id.label("target_id"))
        .join(target, target.url == Page.redirect_target)
        .where(PERMANENTLY_MOVED)
    ).all()
    hop = {row.url: row.redirect_target for row in rows}
    id_of = {row.redirect_target: row.target_id for row in rows}
    target_of: dict[int, int] = {}
    for row in rows:
        end = _chain_end(row.url, hop)
        if end is not None:
            target_of[row.id] = id_of[end]
    sources: dict[int, list[int]] = {}
    for old, new in sorted(target_of.items()):
        sources.setdefault(new, []).append(old)
    return PermanentRedirects(target_of, {new: tuple(olds) for new, olds in sources.items()})


def redirected_to(session: Session, url: str) -> list[str]:
    """URLs of the pages that permanently redirect to ``url``, directly or through a chain:
    one statement per hop on the ``redirect_target`` index, each reading at most
    :data:`MAX_REDIRECTED` rows (the few temporary redirects among them are left out here:
    asking for state and status in SQL made SQLite prefer the status index, every 31 of the
    store)."""
    found: list[str] = []
    seen = {url}
    wanted = [url]
    for _ in range(MAX_HOPS):
        if not wanted or len(found) >= MAX_REDIRECTED:
            break
        query = (
            select(Page.url, Page.state, Page.status)
            .where(Page.redirect_target.in_(wanted))
            .order_by(Page.id)
            .limit(MAX_REDIRECTED)
        )
        wanted = [
            row.url
            for row in session.execute(query)
            if row.state == "redirect"
            and row.status == Status.REDIRECT_PERMANENT
            and row.url not in seen
        ]
        seen.update(wanted)
        found += wanted[: MAX_REDIRECTED - len(found)]
    return found


def _chain_end(start: str, hop: dict[str, str]) -> str | None:
    """Where a chain of permanent redirects from ``start`` ends; None for a loop or a
    chain longer than :data:`MAX_HOPS`."""
    seen = {start}
    current = hop[start]
    for _ in range(MAX_HOPS):
        if current in seen:
            return None
        following = hop.get(current)
        if following is None:
            return current
        seen.add(current)
        current = following
    return None
