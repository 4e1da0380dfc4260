"""Everything the store knows about one URL, as plain data for ``sextant show``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import aliased

from sextant.store import Link, Page

PAGES = Page.__table__
LINKS = Link.__table__


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
    }
