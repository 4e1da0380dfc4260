"""Running a real crawl in-process against scripted capsules, and reading what it stored."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from crawler.engine import CrawlSummary, run_crawl
from crawler.fetch import FetchLimits
from crawler.options import CrawlOptions
from sextant.config import Settings
from sextant.store import (
    Capsule,
    CertificateEvent,
    FetchAttempt,
    FrontierEntry,
    Link,
    Page,
    Run,
    make_engine,
)
from sextant.store.migrate import upgrade

# Short enough that a hostile capsule costs a test a second at most.
TEST_LIMITS = FetchLimits(
    connect_timeout=2.0, header_timeout=1.0, total_timeout=2.0, rate_grace=0.3, min_rate=2000.0
)
TEST_DELAY = 0.05


@dataclass
class Crawled:
    summary: CrawlSummary
    engine: Engine

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    def pages(self) -> dict[str, Any]:
        with self.session() as session:
            return {page.url: page for page in session.scalars(select(Page))}

    def page(self, url: str) -> Any:
        return self.pages()[url]

    def links_from(self, url: str) -> list[Any]:
        with self.engine.connect() as conn:
            source = conn.execute(select(Page.id).where(Page.url == url)).scalar_one()
        with self.session() as session:
            return list(
                session.scalars(
                    select(Link).where(Link.source_id == source).order_by(Link.position)
                )
            )

    def frontier(self) -> dict[str, Any]:
        """Frontier rows by URL."""
        with self.session() as session:
            rows = session.execute(
                select(Page.url, FrontierEntry).join(Page, Page.id == FrontierEntry.page_id)
            )
            return {row.url: row.FrontierEntry for row in rows}

    def capsule(self, host: str) -> Any:
        with self.session() as session:
            return session.scalars(select(Capsule).where(Capsule.host == host)).one()

    def certificate_events(self) -> list[Any]:
        with self.session() as session:
            return list(session.scalars(select(CertificateEvent).order_by(CertificateEvent.id)))

    def attempts(self) -> list[Any]:
        with self.session() as session:
            return list(session.scalars(select(FetchAttempt).order_by(FetchAttempt.id)))

    def runs(self) -> list[Any]:
        with self.session() as session:
            return list(session.scalars(select(Run).order_by(Run.id)))


def settings_for(tmp_path: Path, db_url: str | None = None) -> Settings:
    return Settings.load(data_dir=tmp_path, db_url=db_url or f"sqlite:///{tmp_path / 'store.db'}")


async def crawl(
    tmp_path: Path, running: Any, *seeds: str, db_url: str | None = None, **overrides: Any
) -> Crawled:
    """Crawl ``seeds`` with every running capsule pinned, a tiny delay and short limits."""
    settings = settings_for(tmp_path, db_url)
    if db_url is not None:
        upgrade(make_engine(db_url))  # PostgreSQL is never migrated implicitly
    options: dict[str, Any] = {
        "seeds": seeds,
        "resolve": tuple(running.resolve_args),
        "delay": TEST_DELAY,
        "quiet": True,
        "fetch_limits": TEST_LIMITS,
        "concurrency": 8,
    }
    options.update(overrides)
    summary = await run_crawl(settings, CrawlOptions(**options))
    return Crawled(summary, make_engine(settings.db_url))


def gaps(times: list[float]) -> list[float]:
    ordered = sorted(times)
    return [later - earlier for earlier, later in itertools.pairwise(ordered)]
