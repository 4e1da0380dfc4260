"""The store questions behind the capsule's pages, on every database backend."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from search_capsule import store_views
from search_capsule.seeds import MAX_PENDING, SeedOutcome, request_seed
from sextant.store import make_engine
from sextant.store.migrate import open_store, upgrade
from sextant.store.models import SeedRequest
from tests.search_capsule import space


def migrated(db_url):
    migrator = make_engine(db_url)
    upgrade(migrator)  # PostgreSQL is never migrated on open; SQLite would be
    migrator.dispose()
    return open_store(db_url)


@pytest.fixture
def engine(db_url):
    engine = migrated(db_url)
    space.populate(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine):
    with Session(engine) as session:
        yield session


def test_known_hosts_lists_reached_capsules_alphabetically(session):
    listing = store_views.known_hosts(session)
    assert listing.total == 3  # gamma never answered
    assert [(r.display, r.pages) for r in listing.rows] == [
        ("alpha.example", 3),
        ("beta.example:1966", 2),
        ("bücher.example", 1),
    ]
    assert listing.rows[1].url == space.BETA
    assert listing.rows[2].url == space.BUECHER


def test_newest_hosts_and_pages_come_newest_first(session):
    assert [r.host for r in store_views.newest_hosts(session).rows] == [
        "xn--bcher-kva.example",
        "beta.example",
        "alpha.example",
    ]
    pages = store_views.newest_pages(session, limit=2)
    assert pages.total == 6
    assert [row.url for row in pages.rows] == [space.BETA_FEED, space.ALPHA_LOG]


def test_known_feeds_by_kind(session):
    feeds = store_views.known_feeds(session)
    assert [(row.feed_kind, row.url) for row in feeds.rows] == [
        ("atom", space.BETA_FEED),
        ("gemsub", space.ALPHA_LOG),
    ]


def test_backlinks_split_by_capsule_and_counted_once_per_page(session):
    found = store_views.backlinks(session, space.ALPHA)
    assert found.known
    assert found.title == "Alpha's capsule"
    assert [(b.source_url, b.label) for b in found.other_capsules] == [
        (space.BETA, "Alpha, a fine capsule"),
        (space.BETA_FEED, ""),
        (space.BUECHER, "Alpha auf Englisch"),
    ]
    assert found.other_total == 3
    assert [b.source_url for b in found.same_capsule] == [space.ALPHA_ABOUT]
    limited = store_views.backlinks(session, space.ALPHA, limit=1)
    assert len(limited.other_capsules) == 1
    assert limited.other_total == 3


def test_backlinks_of_unknown_and_other_scheme_urls(session):
    nothing = store_views.backlinks(session, "gemini://nowhere.example/")
    assert not nothing.known
    assert nothing.other_total == nothing.same_total == 0
    web = store_views.backlinks(session, "https://example.org/")
    assert not web.known
    assert [b.source_url for b in web.other_capsules] == [space.ALPHA]


def test_backlinks_find_links_by_target_url_through_an_index(session):
    # Without ix_links_target_url every backlinks page scanned every link of the store
    # (1.9 s at 345,000 pages), and each URL asked for is a cache miss of its own.
    if session.bind.dialect.name != "sqlite":
        pytest.skip("reads SQLite's query plan")
    plan = session.execute(
        text("EXPLAIN QUERY PLAN SELECT source_id FROM links WHERE target_url IN (:a, :b)"),
        {"a": space.ALPHA, "b": "https://example.org/"},
    ).all()
    details = " ".join(str(row[-1]) for row in plan)
    assert "ix_links_target_url" in details, details
    assert "SCAN links" not in details, details


def test_capsule_health(session):
    health = store_views.capsule_health(session, "alpha.example", 1965)
    assert health is not None
    assert health.host.pages == 3
    assert dict(health.pages_by_state) == {"ok": 3, "disallowed": 1, "gone": 1}
    assert dict(health.pages_by_status) == {20: 3, 51: 1}
    assert health.robots.readable
    assert [(r.allow, r.pattern) for r in health.robots.rules] == [(False, "/private/")]
    assert health.robots.crawl_delay == 3.0  # "*" asks it, and every group addressing us holds
    assert [c.kind for c in health.certificate_changes] == ["changed-before-expiry", "first-seen"]
    assert [(n.display, n.links) for n in health.inbound] == [
        ("beta.example:1966", 3),
        ("bücher.example", 1),
    ]
    assert [(n.display, n.links) for n in health.outbound] == [("beta.example:1966", 1)]
    assert health.outbound[0].query == "beta.example:1966"
    assert dict(health.other_schemes) == {"gopher": 1, "https": 1}
    # The 51 is a failure the author can mend; the page robots.txt forbids is not one.
    assert [(f.url, f.status, f.error_kind) for f in health.failing] == [
        ("gemini://alpha.example/old.gmi", 51, None)
    ]
    assert health.failing_total == 1


def test_capsule_health_of_unknown_and_unreached_capsules(session):
    assert store_views.capsule_health(session, "alpha.example", 1966) is None
    assert [r.port for r in store_views.capsules_on_host(session, "beta.example")] == [1966]
    gamma = store_views.capsule_health(session, "gamma.example", 1965)
    assert gamma is not None
    assert gamma.consecutive_failures == 4
    assert not gamma.robots.readable
    assert gamma.robots.status is None
    assert gamma.inbound == gamma.outbound == ()
    assert [(f.url, f.status, f.error_kind) for f in gamma.failing] == [
        ("gemini://gamma.example/", None, "connect-failed")
    ]


def test_empty_store_gives_empty_answers(db_url):
    engine = migrated(db_url)
    with Session(engine) as session:
        assert store_views.known_hosts(session).rows == ()
        assert store_views.newest_pages(session).total == 0
        assert store_views.known_feeds(session).rows == ()
        assert not store_views.backlinks(session, space.ALPHA).known
        assert store_views.capsules_on_host(session, "alpha.example") == ()
    engine.dispose()


def test_seed_requests(session):
    def pending() -> int:
        return session.scalar(select(func.count()).where(SeedRequest.processed_at.is_(None)))

    new = request_seed(session, "gemini://new.example/", now=space.NOW)
    assert new.outcome is SeedOutcome.QUEUED
    row = session.scalars(select(SeedRequest).where(SeedRequest.url == new.url)).one()
    assert (row.source, row.requested_at, row.processed_at) == ("capsule", space.NOW, None)
    again = request_seed(session, "gemini://new.example/", now=space.NOW)
    assert again.outcome is SeedOutcome.ALREADY_QUEUED
    known = request_seed(session, space.ALPHA, now=space.NOW)
    assert known.outcome is SeedOutcome.ALREADY_KNOWN
    assert pending() == 2
    session.add_all(
        SeedRequest(url=f"gemini://s{n}.example/", source="capsule", requested_at=space.NOW)
        for n in range(MAX_PENDING)
    )
    session.commit()
    full = request_seed(session, "gemini://one-too-many.example/", now=space.NOW)
    assert full.outcome is SeedOutcome.INBOX_FULL
    assert pending() == MAX_PENDING + 2
