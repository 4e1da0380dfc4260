"""Read-only questions the capsule's pages ask the store, answered as plain dataclasses.

Each function takes a SQLAlchemy session and returns immutable values, so the pages that
render them are pure functions and the queries can run in a worker thread. Every list is
capped: a page that lists ten thousand rows helps nobody and costs the server. Everything
is portable SQL (SQLite and PostgreSQL); aggregate counts are done by the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from sextant.robots import DEFAULT_AGENTS, RobotsPolicy, Rule, parse_robots_response
from sextant.store.models import Capsule, CertificateEvent, Link, Page, UserRobots
from sextant.store.redirects import redirected_to
from sextant.urls import DEFAULT_PORT

LIST_LIMIT = 200
BACKLINK_LIMIT = 100
NEIGHBOUR_LIMIT = 50
MAX_USER_ROBOTS = 100  # pubnix users' robots.txt files listed on a capsule's page
FAILING_LIMIT = 50  # failing URLs listed on a capsule's page, the most recent first
#: Pages kept out by robots.txt or an exclusion rule: what the author or operator asked for,
#: not a failure the author has to fix; their numbers are in the pages by state.
_NOT_FAILURES = ("excluded", "disallowed")


def display_authority(display_host: str, port: int) -> str:
    """A capsule's name for people: its unicode host, with the port when not 1965."""
    return display_host if port == DEFAULT_PORT else f"{display_host}:{port}"


@dataclass(frozen=True, slots=True)
class HostRow:
    host: str
    port: int
    display_host: str
    pages: int
    first_seen_at: datetime
    last_success_at: datetime | None

    @property
    def authority(self) -> str:
        return self.host if self.port == DEFAULT_PORT else f"{self.host}:{self.port}"

    @property
    def display(self) -> str:
        return display_authority(self.display_host, self.port)

    @property
    def url(self) -> str:
        return f"gemini://{self.authority}/"


@dataclass(frozen=True, slots=True)
class PageRow:
    url: str
    title: str | None
    display_host: str
    when: datetime | None
    feed_kind: str | None = None


@dataclass(frozen=True, slots=True)
class Listing:
    """The first rows of a list, and how many there are in all."""

    rows: tuple[HostRow, ...] | tuple[PageRow, ...]
    total: int


def known_hosts(session: Session, *, limit: int = 5000) -> Listing:
    """Capsules that answered at least once, alphabetically, with their indexable pages."""
    rows = _host_rows(session, order=(Capsule.host, Capsule.port), limit=limit)
    return Listing(rows, _reached_count(session))


def newest_hosts(session: Session, *, limit: int = LIST_LIMIT) -> Listing:
    rows = _host_rows(session, order=(Capsule.first_seen_at.desc(), Capsule.id.desc()), limit=limit)
    return Listing(rows, _reached_count(session))


def _reached_count(session: Session) -> int:
    return session.scalar(select(func.count()).where(Capsule.last_success_at.is_not(None))) or 0


def _host_rows(session: Session, *, order: tuple, limit: int) -> tuple[HostRow, ...]:
    ok_pages = (
        select(Page.capsule_id, func.count().label("pages"))
        .where(Page.state == "ok")
        .group_by(Page.capsule_id)
        .subquery()
    )
    query = (
        select(Capsule, func.coalesce(ok_pages.c.pages, 0))
        .outerjoin(ok_pages, ok_pages.c.capsule_id == Capsule.id)
        .where(Capsule.last_success_at.is_not(None))
        .order_by(*order)
        .limit(limit)
    )
    return tuple(
        HostRow(
            host=capsule.host,
            port=capsule.port,
            display_host=capsule.display_host or capsule.host,
            pages=pages,
            first_seen_at=capsule.first_seen_at,
            last_success_at=capsule.last_success_at,
        )
        for capsule, pages in session.execute(query)
    )


def newest_pages(session: Session, *, limit: int = LIST_LIMIT) -> Listing:
    """Indexable pages in the order the crawler discovered them, newest first.

    Copies of other pages are left out: a mirror's thousand pages arriving at once would
    otherwise push everything else off the list.
    """
    shown = (Page.state == "ok") & Page.duplicate_of_id.is_(None)
    query = (
        select(Page.url, Page.title, Capsule.display_host, Capsule.port, Page.discovered_at)
        .join(Capsule, Capsule.id == Page.capsule_id)
        .where(shown)
        .order_by(Page.discovered_at.desc(), Page.id.desc())
        .limit(limit)
    )
    rows = tuple(
        PageRow(url=url, title=title, display_host=display_authority(host, port), when=when)
        for url, title, host, port, when in session.execute(query)
    )
    return Listing(rows, session.scalar(select(func.count()).where(shown)) or 0)


def known_feeds(session: Session, *, limit: int = 2000) -> Listing:
    """Feeds the crawler recognised (gemsub pages, Atom and RSS files), by kind then URL."""
    shown = (Page.state == "ok") & Page.feed_kind.is_not(None)
    query = (
        select(
            Page.url,
            Page.title,
            Capsule.display_host,
            Capsule.port,
            Page.fetched_at,
            Page.feed_kind,
        )
        .join(Capsule, Capsule.id == Page.capsule_id)
        .where(shown)
        .order_by(Page.feed_kind, Page.url)
        .limit(limit)
    )
    rows = tuple(
        PageRow(
            url=url,
            title=title,
            display_host=display_authority(host, port),
            when=when,
            feed_kind=kind,
        )
        for url, title, host, port, when, kind in session.execute(query)
    )
    return Listing(rows, session.scalar(select(func.count()).where(shown)) or 0)


# --- backlinks -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Backlink:
    source_url: str
    source_title: str | None
    label: str


@dataclass(frozen=True, slots=True)
class Backlinks:
    url: str
    title: str | None  # of the target, when we have fetched it
    known: bool  # the store has a page for the URL (linked to or fetched)
    other_capsules: tuple[Backlink, ...]
    same_capsule: tuple[Backlink, ...]
    other_total: int
    same_total: int


def backlinks(session: Session, url: str, *, limit: int = BACKLINK_LIMIT) -> Backlinks:
    """Pages linking to ``url`` (its canonical form) or to an address it moved from for good
    (``31``), split by whether they cross capsules.

    A page linking twice to the same URL is listed once, with its first label.
    """
    target = session.execute(select(Page.title).where(Page.url == url)).first()
    addresses = [url, *redirected_to(session, url)]
    groups: dict[bool, tuple[tuple[Backlink, ...], int]] = {}
    for cross in (True, False):
        condition = (Link.target_url.in_(addresses)) & (Link.cross_capsule.is_(cross))
        first_link = (
            select(Link.source_id, func.min(Link.id).label("link_id"))
            .where(condition)
            .group_by(Link.source_id)
            .subquery()
        )
        query = (
            select(Page.url, Page.title, Link.label)
            .join(first_link, first_link.c.source_id == Page.id)
            .join(Link, Link.id == first_link.c.link_id)
            .order_by(Page.url)
            .limit(limit)
        )
        rows = tuple(Backlink(u, t, label or "") for u, t, label in session.execute(query))
        total = session.scalar(select(func.count(func.distinct(Link.source_id))).where(condition))
        groups[cross] = (rows, total or 0)
    return Backlinks(
        url=url,
        title=target[0] if target else None,
        known=target is not None,
        other_capsules=groups[True][0],
        same_capsule=groups[False][0],
        other_total=groups[True][1],
        same_total=groups[False][1],
    )


# --- one capsule ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CertificateChange:
    seen_at: datetime
    kind: str
    old_fingerprint: str | None
    new_fingerprint: str
    new_not_after: datetime | None


@dataclass(frozen=True, slots=True)
class Neighbour:
    display: str
    host: str
    port: int
    links: int

    @property
    def query(self) -> str:
        return self.host if self.port == DEFAULT_PORT else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class RobotsFacts:
    status: int | None
    fetched_at: datetime | None
    text: str | None
    rules: tuple[Rule, ...]  # every group addressing our agents
    crawl_delay: float | None
    agents: tuple[str, ...]  # every agent the file addresses
    readable: bool  # a policy is in force (2x parsed, or 5x = allow all)


@dataclass(frozen=True, slots=True)
class FailingPage:
    """A URL whose last fetch went wrong: no answer, or an answer of 4x, 5x or 6x."""

    url: str
    fetched_at: datetime
    status: int | None  # None: no usable answer (error_kind says why)
    error_kind: str | None  # timeout, connect-failed, temporary-failure, redirect-loop...
    message: str | None  # the error, or the server's meta: text from the network


@dataclass(frozen=True, slots=True)
class CapsuleHealth:
    host: HostRow
    first_seen_at: datetime
    last_attempt_at: datetime | None
    consecutive_failures: int
    parked_until: datetime | None
    pages_by_state: tuple[tuple[str, int], ...]
    pages_by_status: tuple[tuple[int | None, int], ...]
    last_page_fetch: datetime | None
    robots: RobotsFacts
    user_robots: tuple[tuple[str, RobotsFacts], ...]  # pubnix users' own files, by user
    tls_fingerprint: str | None
    tls_not_before: datetime | None
    tls_not_after: datetime | None
    tls_self_signed: bool | None
    tls_key_type: str | None
    tls_version: str | None
    tls_names: str | None
    tls_first_seen_at: datetime | None
    certificate_changes: tuple[CertificateChange, ...]
    inbound: tuple[Neighbour, ...]
    outbound: tuple[Neighbour, ...]
    other_schemes: tuple[tuple[str, int], ...]
    failing: tuple[FailingPage, ...]  # the most recent first, at most FAILING_LIMIT
    failing_total: int


def capsules_on_host(session: Session, host: str) -> tuple[HostRow, ...]:
    """Every port we know on ``host`` (punycode), for when the user gave no port."""
    query = select(Capsule).where(Capsule.host == host).order_by(Capsule.port)
    return tuple(_host_row(capsule, 0) for capsule in session.scalars(query))


def capsule_health(session: Session, host: str, port: int) -> CapsuleHealth | None:
    capsule = session.scalars(
        select(Capsule).where(Capsule.host == host, Capsule.port == port)
    ).first()
    if capsule is None:
        return None
    states = session.execute(
        select(Page.state, func.count())
        .where(Page.capsule_id == capsule.id)
        .group_by(Page.state)
        .order_by(func.count().desc(), Page.state)
    ).all()
    statuses = session.execute(
        select(Page.status, func.count())
        .where(Page.capsule_id == capsule.id, Page.fetched_at.is_not(None))
        .group_by(Page.status)
        .order_by(func.count().desc(), Page.status)
    ).all()
    ok_pages = sum(count for state, count in states if state == "ok")
    last_fetch = session.scalar(
        select(func.max(Page.fetched_at)).where(Page.capsule_id == capsule.id, Page.state == "ok")
    )
    changes = session.scalars(
        select(CertificateEvent)
        .where(CertificateEvent.capsule_id == capsule.id)
        .order_by(CertificateEvent.seen_at.desc(), CertificateEvent.id.desc())
        .limit(20)
    )
    failing, failing_total = _failing_pages(session, capsule.id)
    return CapsuleHealth(
        host=_host_row(capsule, ok_pages),
        first_seen_at=capsule.first_seen_at,
        last_attempt_at=capsule.last_attempt_at,
        consecutive_failures=capsule.consecutive_failures,
        parked_until=capsule.parked_until,
        pages_by_state=tuple((state, count) for state, count in states),
        pages_by_status=tuple((status, count) for status, count in statuses),
        last_page_fetch=last_fetch,
        robots=_robots_facts(capsule.robots_status, capsule.robots_fetched_at, capsule.robots_txt),
        user_robots=tuple(
            (row.user_name, _robots_facts(row.status, row.fetched_at, row.text))
            for row in session.scalars(
                select(UserRobots)
                .where(UserRobots.capsule_id == capsule.id)
                .order_by(UserRobots.user_name)
                .limit(MAX_USER_ROBOTS)
            )
        ),
        tls_fingerprint=capsule.tls_fingerprint,
        tls_not_before=capsule.tls_not_before,
        tls_not_after=capsule.tls_not_after,
        tls_self_signed=capsule.tls_self_signed,
        tls_key_type=capsule.tls_key_type,
        tls_version=capsule.tls_version,
        tls_names=capsule.tls_names,
        tls_first_seen_at=capsule.tls_first_seen_at,
        certificate_changes=tuple(
            CertificateChange(
                seen_at=event.seen_at,
                kind=event.kind,
                old_fingerprint=event.old_fingerprint,
                new_fingerprint=event.new_fingerprint,
                new_not_after=event.new_not_after,
            )
            for event in changes
        ),
        inbound=_neighbours(session, capsule.id, inbound=True),
        outbound=_neighbours(session, capsule.id, inbound=False),
        other_schemes=tuple(
            (scheme, count)
            for scheme, count in session.execute(
                select(Link.target_scheme, func.count())
                .join(Page, Page.id == Link.source_id)
                .where(Page.capsule_id == capsule.id, Link.target_scheme != "gemini")
                .group_by(Link.target_scheme)
                .order_by(func.count().desc(), Link.target_scheme)
            )
        ),
        failing=failing,
        failing_total=failing_total,
    )


def _failing_pages(session: Session, capsule_id: int) -> tuple[tuple[FailingPage, ...], int]:
    """The capsule's URLs whose last fetch failed, the most recent first, and their number.

    A failed fetch of a page already indexed keeps its state ``ok`` (the stored copy stays
    useful), so failure is read from the last attempt itself: an error kind, or a 4x, 5x
    or 6x status.
    """
    condition = (
        (Page.capsule_id == capsule_id)
        & Page.fetched_at.is_not(None)
        & Page.state.not_in(_NOT_FAILURES)
        & (Page.error_kind.is_not(None) | (Page.status >= 40))
    )
    # The window count comes with the rows: one pass over the capsule's pages, not two.
    query = (
        select(
            Page.url,
            Page.fetched_at,
            Page.status,
            Page.error_kind,
            Page.error_message,
            Page.meta,
            func.count().over(),
        )
        .where(condition)
        .order_by(Page.fetched_at.desc(), Page.id.desc())
        .limit(FAILING_LIMIT)
    )
    found = session.execute(query).all()
    rows = tuple(
        FailingPage(
            url=url,
            fetched_at=fetched_at,
            status=status,
            error_kind=kind,
            message=message or meta,
        )
        for url, fetched_at, status, kind, message, meta, _ in found
        if fetched_at is not None  # always, by the condition; said again for the type
    )
    return rows, found[0][-1] if found else 0


def _host_row(capsule: Capsule, pages: int) -> HostRow:
    return HostRow(
        host=capsule.host,
        port=capsule.port,
        display_host=capsule.display_host or capsule.host,
        pages=pages,
        first_seen_at=capsule.first_seen_at,
        last_success_at=capsule.last_success_at,
    )


def _robots_facts(status: int | None, fetched_at: datetime | None, text: str | None) -> RobotsFacts:
    policy: RobotsPolicy | None = None
    if status is not None:
        policy = parse_robots_response(status, text)
    return RobotsFacts(
        status=status,
        fetched_at=fetched_at,
        text=text,
        rules=policy.rules_for(DEFAULT_AGENTS) if policy else (),
        crawl_delay=policy.crawl_delay(DEFAULT_AGENTS) if policy else None,
        agents=policy.agents if policy else (),
        readable=policy is not None,
    )


def _neighbours(session: Session, capsule_id: int, *, inbound: bool) -> tuple[Neighbour, ...]:
    """Other capsules linking here (inbound) or linked from here (outbound), most links first."""
    source = aliased(Page)
    target = aliased(Page)
    here, there = (target, source) if inbound else (source, target)
    links = func.count().label("links")
    query = (
        select(Capsule.display_host, Capsule.host, Capsule.port, links)
        .select_from(Link)
        .join(source, source.id == Link.source_id)
        .join(target, target.id == Link.target_id)
        .join(Capsule, Capsule.id == there.capsule_id)
        .where(here.capsule_id == capsule_id, there.capsule_id != capsule_id)
        .group_by(Capsule.id, Capsule.display_host, Capsule.host, Capsule.port)
        .order_by(links.desc(), Capsule.host)
        .limit(NEIGHBOUR_LIMIT)
    )
    return tuple(
        Neighbour(
            display=display_authority(display, port),
            host=host,
            port=port,
            links=count,
        )
        for display, host, port, count in session.execute(query)
    )
