"""The census on a real store (SQLite, and PostgreSQL when set up) filled through the models."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta

import pytest
from sqlalchemy import delete, event, select, text, update

from sextant.census import SIZE_BUCKETS, census
from sextant.graph import researcher
from sextant.store import (
    Capsule,
    CertificateEvent,
    Link,
    Page,
    Run,
    make_engine,
    session_factory,
)
from sextant.store.migrate import open_store, upgrade

NOW = datetime(2024, 6, 1, 12, 0, 0)


def _capsule(host, **tls):
    return Capsule(host=host, port=1965, display_host=host, first_seen_at=NOW, **tls)


def _page(capsule, path, **fields):
    return Page(
        url=f"gemini://{capsule.host}{path}",
        capsule=capsule,
        scope=capsule.host,
        discovered_at=NOW,
        updated_at=NOW,
        **fields,
    )


@pytest.fixture
def store(db_url):
    migrator = make_engine(db_url)
    upgrade(migrator)  # PostgreSQL is never migrated on open; SQLite would be
    migrator.dispose()
    engine = open_store(db_url)
    yield session_factory(engine)
    engine.dispose()


def _fill(session):
    alpha = _capsule(
        "alpha.test",
        last_success_at=NOW,
        tls_fingerprint="a" * 64,
        tls_version="TLSv1.3",
        tls_key_type="EC P-256",
        tls_self_signed=True,
        tls_not_after=NOW + timedelta(days=10),  # expiring soon
    )
    beta = _capsule(
        "beta.test",
        last_success_at=NOW,
        tls_fingerprint="b" * 64,
        tls_version="TLSv1.3",
        tls_key_type="RSA 2048",
        tls_self_signed=False,
        tls_not_after=NOW - timedelta(days=1),  # expired
    )
    gamma = _capsule(
        "gamma.test",
        tls_fingerprint="c" * 64,
        tls_version="TLSv1.2",
        tls_key_type="EC P-256",
        tls_self_signed=True,
        tls_not_after=NOW + timedelta(days=400),
    )
    never = _capsule("never.test")  # known from a link, never reached: no TLS facts
    fetched = {"fetched_at": NOW}
    pages = [
        _page(
            alpha,
            "/",
            state="ok",
            status=20,
            mime="text/gemini",
            lang="en",
            charset="utf-8",
            size=500,
            **fetched,
        ),
        _page(
            alpha,
            "/fr",
            state="ok",
            status=20,
            mime="text/gemini",
            lang="fr",
            charset="utf-8",
            size=2048,
            **fetched,
        ),
        _page(
            alpha,
            "/old",
            state="ok",
            status=20,
            mime="text/plain",
            lang=None,
            charset="iso-8859-1",
            size=0,
            **fetched,
        ),
        _page(alpha, "/img.png", state="ok", status=20, mime="image/png", size=200_000, **fetched),
        _page(
            beta,
            "/",
            state="ok",
            status=20,
            mime="text/gemini",
            lang="en",
            charset="utf-8",
            size=20_000_000,
            **fetched,
        ),
        _page(beta, "/moved", state="redirect", status=31, **fetched),
        _page(beta, "/gone", state="gone", status=51, **fetched),
        _page(beta, "/search", state="input", status=10, **fetched),
        _page(gamma, "/", state="error", status=None, error_kind="connect-failed", **fetched),
        _page(never, "/", state="new"),
        _page(gamma, "/private", state="disallowed"),
    ]
    session.add_all([alpha, beta, gamma, never, *pages])
    session.flush()
    home_a, fr_a, *_ = pages
    home_b = pages[4]

    def link(source, url, scheme="gemini", target=None, cross=False):
        return Link(
            source_id=source.id,
            target_url=url,
            target_id=target.id if target else None,
            target_scheme=scheme,
            cross_capsule=cross,
            first_seen_at=NOW,
        )

    session.add_all(
        [
            link(home_a, fr_a.url, target=fr_a),
            link(fr_a, home_a.url, target=home_a),
            link(home_a, home_b.url, target=home_b, cross=True),
            link(home_b, home_a.url, target=home_a, cross=True),
            link(home_b, "gemini://never.test/", target=pages[9], cross=True),
            link(home_a, "https://example.org/", scheme="https"),
            link(home_b, "https://example.net/", scheme="https"),
            link(home_b, "gopher://hole.test/", scheme="gopher"),
        ]
    )
    session.add_all(
        [
            CertificateEvent(
                capsule_id=alpha.id, seen_at=NOW, kind="first-seen", new_fingerprint="a" * 64
            ),
            CertificateEvent(
                capsule_id=beta.id, seen_at=NOW, kind="first-seen", new_fingerprint="0" * 64
            ),
            CertificateEvent(
                capsule_id=beta.id,
                seen_at=NOW,
                kind="changed-after-expiry",
                old_fingerprint="0" * 64,
                new_fingerprint="b" * 64,
            ),
            CertificateEvent(
                capsule_id=gamma.id, seen_at=NOW, kind="first-seen", new_fingerprint="c" * 64
            ),
        ]
    )
    session.add_all(
        [
            Run(
                kind="crawl",
                started_at=NOW - timedelta(days=2),
                finished_at=NOW - timedelta(days=2),
                stats=json.dumps({"pages": 1}),
            ),
            Run(
                kind="crawl",
                started_at=NOW - timedelta(hours=3),
                finished_at=NOW - timedelta(hours=1),
                stats=json.dumps({"pages": 11, "errors": 1}),
            ),
            Run(
                kind="index", started_at=NOW - timedelta(hours=1), finished_at=None, stats="{broken"
            ),
        ]
    )


def test_census_counts_every_fact(store):
    with store.begin() as session:
        _fill(session)
    with store() as session:
        result = census(session, now=NOW)

    assert result.taken_at == NOW
    assert result.pages == 11
    assert dict(result.pages_by_state) == {
        "ok": 5,
        "redirect": 1,
        "gone": 1,
        "input": 1,
        "error": 1,
        "new": 1,
        "disallowed": 1,
    }
    assert result.pages_by_state[0] == ("ok", 5)
    assert (result.capsules, result.capsules_reached) == (4, 2)

    assert result.links == 8
    assert (result.links_within_capsule, result.links_across_capsules) == (2, 3)
    assert result.links_other_schemes == 3
    assert result.links_by_scheme == (("gemini", 5), ("https", 2), ("gopher", 1))

    assert result.mime_types == (("text/gemini", 3), ("image/png", 1), ("text/plain", 1))
    assert result.languages == (("en", 2), ("fr", 1), ("unknown", 1))
    assert result.charsets == (("utf-8", 3), ("iso-8859-1", 1))
    assert result.status_families == (
        ("2x success", 5),
        ("1x input", 1),
        ("3x redirect", 1),
        ("5x permanent failure", 1),
        ("no response", 1),
    )
    assert dict(result.statuses) == {"20": 5, "31": 1, "51": 1, "10": 1, "no response": 1}
    assert [label for label, _ in result.page_sizes] == [label for _, label in SIZE_BUCKETS]
    assert dict(result.page_sizes) == {
        "0 B": 1,
        "1 B-1 KiB": 1,
        "1-10 KiB": 1,
        "10-100 KiB": 0,
        "100 KiB-1 MiB": 1,
        "1-10 MiB": 0,
        ">= 10 MiB": 1,
    }

    assert result.certificates == 3
    assert result.tls_versions == (("TLSv1.3", 2), ("TLSv1.2", 1))
    assert result.certificate_key_types == (("EC P-256", 2), ("RSA 2048", 1))
    assert result.certificate_signers == (("self-signed", 2), ("CA-signed", 1))
    assert (result.certificates_expired, result.certificates_expiring_soon) == (1, 1)
    assert result.certificate_events == (("first-seen", 3), ("changed-after-expiry", 1))
    assert result.certificate_changes == 1

    crawl, index = result.last_runs
    assert (crawl.kind, dict(crawl.figures)) == ("crawl", {"pages": 11, "errors": 1})
    assert crawl.duration == timedelta(hours=2)
    assert (index.kind, index.finished_at, index.duration) == ("index", None, None)
    assert dict(index.figures) == {}  # unreadable JSON does not break the census


def test_expiry_depends_on_now_and_soon(store):
    with store.begin() as session:
        _fill(session)
    with store() as session:
        later = census(session, now=NOW + timedelta(days=11))
        wide = census(session, now=NOW, soon=timedelta(days=500))
    assert (later.certificates_expired, later.certificates_expiring_soon) == (2, 0)
    assert (wide.certificates_expired, wide.certificates_expiring_soon) == (1, 2)


def test_empty_store(store):
    with store() as session:
        result = census(session, now=NOW)
    assert (result.pages, result.capsules, result.links, result.certificates) == (0, 0, 0, 0)
    assert result.pages_by_state == ()
    assert result.mime_types == ()
    assert result.last_runs == ()
    assert all(count == 0 for _, count in result.page_sizes)


def test_census_is_frozen_and_serializes_to_json(store):
    with store.begin() as session:
        _fill(session)
    with store() as session:
        result = census(session, now=NOW)
    with pytest.raises(AttributeError):
        result.pages = 0  # type: ignore[misc]
    data = json.loads(json.dumps(result.as_dict()))
    assert data["taken_at"] == NOW.isoformat()
    assert data["mime_types"] == {"text/gemini": 3, "image/png": 1, "text/plain": 1}
    assert list(data["mime_types"]) == ["text/gemini", "image/png", "text/plain"]
    assert data["last_runs"][0]["figures"] == {"pages": 11, "errors": 1}
    assert data["last_runs"][1]["finished_at"] is None


def test_census_runs_on_a_read_only_connection(store):
    # The search capsule reads while the crawler writes; the census must never need a write.
    with store.begin() as session:
        _fill(session)
    with store() as session:
        if session.bind.dialect.name == "sqlite":
            session.execute(text("PRAGMA query_only = ON"))
        else:
            session.execute(text("SET TRANSACTION READ ONLY"))
        assert census(session, now=NOW).pages == 11
        session.rollback()


# Written as the crawler keeps them; beta closes itself to the researcher, alpha and gamma
# close one page each, and indexer's rule on alpha/old is not the researcher's business.
RESEARCHER_ROBOTS = {
    "alpha.test": "User-agent: *\nDisallow: /fr\n\nUser-agent: indexer\nDisallow: /old\n",
    "beta.test": "User-agent: researcher\nDisallow: /\n",
    "gamma.test": "User-agent: researcher\nAllow: /\nDisallow: /private\n",
}
LEFT_OUT_PAGES = {
    "gemini://alpha.test/fr",
    "gemini://beta.test/",
    "gemini://beta.test/moved",
    "gemini://beta.test/gone",
    "gemini://beta.test/search",
    "gemini://gamma.test/private",
}


def _write_robots(session):
    for host, robots in RESEARCHER_ROBOTS.items():
        session.execute(
            update(Capsule)
            .where(Capsule.host == host)
            .values(robots_status=20, robots_txt=robots, robots_fetched_at=NOW)
        )


def _read_only(session):
    if session.bind.dialect.name == "sqlite":
        session.execute(text("PRAGMA query_only = ON"))
    else:
        session.execute(text("SET TRANSACTION READ ONLY"))


def test_census_leaves_out_what_robots_keeps_from_the_researcher(store):
    with store.begin() as session:
        _fill(session)
        _write_robots(session)
    with store() as session:
        _read_only(session)  # judging robots.txt must not need a write either
        studied = census(session, now=NOW)
        session.rollback()
        if session.bind.dialect.name == "sqlite":  # the pragma outlives the transaction
            session.execute(text("PRAGMA query_only = OFF"))

    assert (studied.pages_left_out, studied.capsules_left_out) == (len(LEFT_OUT_PAGES), 1)
    assert studied.pages == 11 - len(LEFT_OUT_PAGES)
    assert dict(studied.pages_by_state) == {"ok": 3, "error": 1, "new": 1}
    assert (studied.capsules, studied.capsules_reached) == (3, 1)
    assert studied.links == 3  # home_a's three links; fr_a's and home_b's are gone
    assert (studied.links_within_capsule, studied.links_across_capsules) == (1, 1)
    assert studied.certificates == 2
    assert studied.certificate_events == (("first-seen", 2),)
    assert studied.as_dict()["pages_left_out"] == len(LEFT_OUT_PAGES)

    # The oracle: the census of a store that never held the left-out part, with nothing
    # for robots.txt to forbid, says exactly the same.
    with store.begin() as session:
        left = select(Page.id).where(Page.url.in_(LEFT_OUT_PAGES))
        beta = select(Capsule.id).where(Capsule.host == "beta.test")
        session.execute(delete(Link).where(Link.source_id.in_(left)))
        session.execute(update(Link).where(Link.target_id.in_(left)).values(target_id=None))
        session.execute(delete(Page).where(Page.id.in_(left)))
        session.execute(delete(CertificateEvent).where(CertificateEvent.capsule_id.in_(beta)))
        session.execute(delete(Capsule).where(Capsule.host == "beta.test"))
        session.execute(update(Capsule).values(robots_status=None, robots_txt=None))
    with store() as session:
        smaller = census(session, now=NOW)
    assert (smaller.pages_left_out, smaller.capsules_left_out) == (0, 0)
    assert dataclasses.replace(studied, pages_left_out=0, capsules_left_out=0) == smaller


def test_more_left_out_pages_than_one_batch_holds(store):
    # The left-out part is counted a batch of ids at a time; many batches must add up.
    many = researcher.ID_BATCH * 2 + 3
    with store.begin() as session:
        hoard = _capsule("hoard.test", last_success_at=NOW)
        session.add(hoard)
        small_gemtext = {"state": "ok", "mime": "text/gemini", "size": 10, "fetched_at": NOW}
        session.add_all(
            _page(hoard, f"/{'private' if i % 3 else 'public'}/{i}", **small_gemtext)
            for i in range(many)
        )
        session.flush()
        hoard.robots_status, hoard.robots_txt = 20, "User-agent: *\nDisallow: /private/\n"
    public = len([i for i in range(many) if i % 3 == 0])
    with store() as session:
        result = census(session, now=NOW)
    assert result.pages_left_out == many - public
    assert result.pages == public
    assert dict(result.mime_types) == {"text/gemini": public}
    assert dict(result.page_sizes)["1 B-1 KiB"] == public
    assert result.capsules_left_out == 0


def test_census_reads_indexes_not_the_rows_that_hold_the_bodies(store):
    # At 553,014 pages every query that read the pages table (5 GB of rows with bodies)
    # cost 0.6-0.8 s warm and the census 62 s cold; these read covering indexes instead.
    with store.begin() as session:
        _fill(session)
    with store() as session:
        if session.bind.dialect.name != "sqlite":
            pytest.skip("reads SQLite's query plans")
        statements: list[tuple[str, object]] = []

        def record(_conn, _cursor, statement, parameters, _context, _many):
            statements.append((statement, parameters))

        engine = session.get_bind()
        event.listen(engine, "before_cursor_execute", record)
        try:
            census(session, now=NOW)
        finally:
            event.remove(engine, "before_cursor_execute", record)
        scans = []
        for statement, parameters in statements:
            plan = session.connection().exec_driver_sql(
                f"EXPLAIN QUERY PLAN {statement}", parameters
            )
            for row in plan:
                detail = str(row[-1])
                if detail.startswith(("SCAN pages", "SCAN links")) and "COVERING" not in detail:
                    scans.append(f"{detail}: {statement}")
    assert len(statements) > 10
    assert not scans, "\n".join(scans)
