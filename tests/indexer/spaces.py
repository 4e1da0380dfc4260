"""Store rows for indexer tests, written through the models into a real SQLite store.

A space is a mapping URL → :class:`P` (what the crawler would have stored). Links are taken
from gemtext bodies the way the crawler takes them: parsed, resolved against the page URL,
and pointed at the target page's row when that URL is in the space.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine, select, update

from sextant import gemtext
from sextant.errors import InvalidURL
from sextant.store import Capsule, Link, Page, session_factory, utcnow
from sextant.urls import parse, resolve, scope_of


@dataclass
class P:
    body: str | None = None
    mime: str | None = "text/gemini"
    state: str = "ok"
    lang: str | None = None
    title: str | None = None
    charset: str | None = "utf-8"
    meta: str | None = None
    size: int | None = None
    content_hash: str | None = None
    feed_kind: str | None = None


def _hash(body: str | None) -> str | None:
    return None if body is None else hashlib.sha256(body.encode()).hexdigest()


class Space:
    """Builds and edits store rows; every edit moves ``updated_at`` like the crawler does."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessions = session_factory(engine)
        self.ids: dict[str, int] = {}
        self.clock = utcnow()

    def tick(self) -> datetime:
        """Now, strictly later than the previous tick (the watermark compares with ">")."""
        self.clock = max(utcnow(), self.clock + timedelta(microseconds=1))
        return self.clock

    def add(self, pages: dict[str, P]) -> None:
        with self.sessions() as session, session.begin():
            capsules: dict[tuple[str, int], Capsule] = {
                (c.host, c.port): c for c in session.scalars(select(Capsule))
            }
            for url, spec in pages.items():
                parsed = parse(url)
                key = (parsed.host, parsed.port)
                capsule = capsules.get(key)
                if capsule is None:
                    capsule = Capsule(
                        host=parsed.host,
                        port=parsed.port,
                        display_host=parsed.display_host,
                        first_seen_at=self.clock,
                    )
                    session.add(capsule)
                    session.flush()
                    capsules[key] = capsule
                now = self.tick()
                body = spec.body
                page = Page(
                    url=str(parsed),
                    capsule_id=capsule.id,
                    scope=scope_of(parsed),
                    state=spec.state,
                    discovered_at=now,
                    updated_at=now,
                    status={"ok": 20, "input": 10, "gone": 51}.get(spec.state),
                    meta=spec.meta if spec.meta is not None else spec.mime,
                    mime=spec.mime if spec.state == "ok" else None,
                    charset=spec.charset if spec.state == "ok" else None,
                    lang=spec.lang,
                    size=spec.size if spec.size is not None else len((body or "").encode()),
                    body=body,
                    content_hash=spec.content_hash or _hash(body),
                    title=spec.title,
                    feed_kind=spec.feed_kind,
                    fetched_at=now,
                )
                session.add(page)
                session.flush()
                self.ids[page.url] = page.id
        self.relink(list(pages))

    def relink(self, urls: list[str]) -> None:
        """Replace the outgoing links of ``urls`` from their bodies; touch the targets."""
        with self.sessions() as session, session.begin():
            touched: set[int] = set()
            for url in urls:
                page = session.get(Page, self.ids[str(parse(url))])
                old = session.scalars(select(Link).where(Link.source_id == page.id)).all()
                touched.update(link.target_id for link in old if link.target_id)
                for link in old:
                    session.delete(link)
                if page.body is None or page.mime != "text/gemini":
                    continue
                for position, link in enumerate(gemtext.parse(page.body).links):
                    try:
                        target = resolve(page.url, link.url)
                    except InvalidURL:
                        continue
                    target_id = self.ids.get(target)
                    scheme = target.split(":", 1)[0]
                    cross = True
                    if scheme == "gemini":
                        cross = scope_of(parse(target)) != page.scope
                    session.add(
                        Link(
                            source_id=page.id,
                            target_url=target,
                            target_id=target_id,
                            target_scheme=scheme,
                            label=link.label,
                            position=position,
                            cross_capsule=cross,
                            first_seen_at=self.clock,
                        )
                    )
                    if target_id:
                        touched.add(target_id)
            session.flush()
            if touched:
                session.execute(
                    update(Page).where(Page.id.in_(touched)).values(updated_at=self.tick())
                )

    def change(self, url: str, **values: object) -> None:
        """Edit a page the way a re-crawl would, moving its ``updated_at``."""
        url = str(parse(url))
        if "body" in values and "content_hash" not in values:
            values["content_hash"] = _hash(values["body"])  # type: ignore[arg-type]
        with self.sessions() as session, session.begin():
            row = update(Page).where(Page.id == self.ids[url])
            session.execute(row.values(updated_at=self.tick(), **values))
        if "body" in values:
            self.relink([url])

    def delete(self, url: str) -> None:
        """Remove a page's row entirely (its links cascade)."""
        url = str(parse(url))
        with self.sessions() as session, session.begin():
            session.delete(session.get(Page, self.ids.pop(url)))
