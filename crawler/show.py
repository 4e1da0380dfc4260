"""Everything the store knows about one URL, as plain data for ``sextant show``."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import aliased

from sextant.protocol import slow_down_seconds
from sextant.store import FetchAttempt, FrontierEntry, Link, Page

PAGES = Page.__table__
LINKS = Link.__table__
ATTEMPTS = FetchAttempt.__table__
FRONTIER = FrontierEntry.__table__


def describe_page(engine: Engine, url: str) -> dict[str, Any] | None:
    """The page row with its outbound links and inbound link count; ``None`` if unknown.

    The keys ``url, status, meta, mime, charset, lang, title, body, links, fetched_at`` are
    the stable ones ``sextant show --json`` promises; the others may grow.
    """
    original = aliased(Page)
    with engine.connect() as conn:
        page = conn.execute(
            select(PAGES, original.url.label("duplicate_url"))
            .outerjoin(original, original.id == PAGES.c.duplicate_of_id)
            .where(PAGES.c.url == url)
        ).one_or_none()
        if page is None:
            return None
        links = conn.execute(
            select(LINKS.c.target_url, LINKS.c.label, LINKS.c.target_scheme)
            .where(LINKS.c.source_id == page.id)
            .order_by(LINKS.c.position, LINKS.c.id)
        ).all()
        inbound = conn.execute(
            select(func.count()).select_from(LINKS).where(LINKS.c.target_id == page.id)
        ).scalar_one()
        due = conn.execute(
            select(FRONTIER.c.due_at).where(FRONTIER.c.page_id == page.id)
        ).scalar_one_or_none()
        last = conn.execute(
            select(ATTEMPTS.c.status, ATTEMPTS.c.meta, ATTEMPTS.c.started_at)
            .where(ATTEMPTS.c.page_id == page.id)
            .order_by(ATTEMPTS.c.id.desc())
            .limit(1)
        ).one_or_none()
    slow_down = None
    if last is not None and last.status == 44:
        # What the capsule asked for (the crawler caps its own wait; ``retry_at`` says when).
        asked = slow_down_seconds(last.meta or "", cap=math.inf)
        slow_down = {"meta": last.meta, "seconds": asked, "at": last.started_at}
    return {
        "url": page.url,
        "status": page.status,
        "meta": page.meta,
        "mime": page.mime,
        "charset": page.charset,
        "lang": page.lang,
        "title": page.title,
        "body": page.body,
        "links": [
            {"url": link.target_url, "label": link.label, "scheme": link.target_scheme}
            for link in links
        ],
        "fetched_at": page.fetched_at,
        "state": page.state,
        "charset_detected": page.charset_detected,
        "size": page.size,
        "truncated": page.truncated,
        "possibly_truncated": page.possibly_truncated,
        "redirect_target": page.redirect_target,
        "duplicate_of": page.duplicate_url,
        "feed_kind": page.feed_kind,
        "error_kind": page.error_kind,
        "error_message": page.error_message,
        "discovered_at": page.discovered_at,
        "changed_at": page.changed_at,
        "next_crawl_at": page.next_crawl_at,
        "depth": page.depth,
        "content_hash": page.content_hash,
        "inbound_links": inbound,
        "links_dropped": page.links_dropped,
        # When the frontier asks for the page next; None when it is not queued.
        "retry_at": due,
        # The latest answer was 44 SLOW DOWN: its meta, the seconds asked, when.
        "slow_down": slow_down,
    }
