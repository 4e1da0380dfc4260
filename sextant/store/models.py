"""The store's schema: Geminispace as the crawler sees it.

Only Alembic migrations create or change these tables (``sextant db upgrade``);
a test upgrades an empty database and checks that the models and the
migrations agree. Every timestamp is naive UTC (SQLite keeps no zone).

* ``capsules`` — one row per host and port, with its TLS (TOFU) and robots.txt facts.
* ``pages`` — every URL we know, fetched or only linked to; the crawl's results.
* ``frontier`` — the crawl queue. It lives here, not in RAM, so a crawl killed
  at any moment resumes where it was.
* ``links`` — the link graph, including links to other schemes.
* ``fetch_attempts`` — the recent history that explains a page's state.
* ``certificate_events`` — first sightings and changes of certificates.
* ``user_robots`` — pubnix users' own robots.txt files (``/~user/robots.txt``).
* ``seed_requests`` — the inbox for seeds from the CLI and the search capsule.
* ``operator_exclusions`` — URL prefixes the operator removed (``sextant forget``).
* ``exclusion_sweeps`` — the exclusion rules the stored pages were last checked against.
* ``runs`` — when crawls and index builds ran, with their figures.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Stable constraint names: Alembic's batch mode on SQLite must be able to find
# and rebuild constraints by name (Alembic docs, "The Importance of Naming Constraints").
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)

    if TYPE_CHECKING:
        # Every model here maps a table. SQLAlchemy types ``__table__`` as any FromClause (a
        # mapping may be to a join or a select), which insert() and update() then refuse;
        # the Core statements the crawler and the store use take ``Model.__table__`` as is.
        __table__: ClassVar[Table]


class Capsule(Base):
    __tablename__ = "capsules"
    __table_args__ = (UniqueConstraint("host", "port"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    host: Mapped[str] = mapped_column(String(255))  # punycode, lower-case
    port: Mapped[int] = mapped_column(Integer, default=1965)
    display_host: Mapped[str] = mapped_column(String(255))  # unicode form for people
    first_seen_at: Mapped[datetime] = mapped_column(DateTime)
    last_attempt_at: Mapped[datetime | None] = mapped_column(DateTime)
    last_success_at: Mapped[datetime | None] = mapped_column(DateTime)
    address: Mapped[str | None] = mapped_column(String(64))  # last resolved IP
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    parked_until: Mapped[datetime | None] = mapped_column(DateTime)

    robots_txt: Mapped[str | None] = mapped_column(Text)
    robots_status: Mapped[int | None] = mapped_column(Integer)
    robots_fetched_at: Mapped[datetime | None] = mapped_column(DateTime)
    crawl_delay: Mapped[float | None] = mapped_column(Float)

    tls_fingerprint: Mapped[str | None] = mapped_column(String(64))  # SHA-256, hex
    tls_not_before: Mapped[datetime | None] = mapped_column(DateTime)
    tls_not_after: Mapped[datetime | None] = mapped_column(DateTime)
    tls_self_signed: Mapped[bool | None] = mapped_column(Boolean)
    tls_key_type: Mapped[str | None] = mapped_column(String(32))
    tls_version: Mapped[str | None] = mapped_column(String(16))
    tls_names: Mapped[str | None] = mapped_column(Text)  # SAN names, space-separated
    tls_first_seen_at: Mapped[datetime | None] = mapped_column(DateTime)

    pages: Mapped[list[Page]] = relationship(back_populates="capsule", passive_deletes=True)

    def __repr__(self) -> str:
        return f"<Capsule {self.host}:{self.port} failures={self.consecutive_failures}>"


class Page(Base):
    """A URL and, once fetched, what it answered.

    ``state`` summarizes what the page means to the rest of the pipeline
    (see :data:`PAGE_STATES`); the indexer keeps only ``ok`` pages and drops
    the others. ``updated_at`` moves whenever anything the index shows
    changes, which is the indexer's incremental watermark.
    """

    __tablename__ = "pages"
    # The census counts pages by these columns (sextant.census): covered by indexes, its
    # queries never read the rows, which hold the bodies (5 GB at 600,000 pages).
    __table_args__ = (
        Index("ix_pages_census", "state", "mime", "lang", "charset", "size"),
        Index("ix_pages_status", "status", "fetched_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(Text, unique=True)
    capsule_id: Mapped[int] = mapped_column(
        ForeignKey("capsules.id", ondelete="CASCADE"), index=True
    )
    scope: Mapped[str] = mapped_column(String(300), index=True)  # capsule, or host/~user
    depth: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[str] = mapped_column(String(16), default="new", index=True)
    discovered_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime, index=True)

    status: Mapped[int | None] = mapped_column(Integer)  # indexed with fetched_at, above
    meta: Mapped[str | None] = mapped_column(Text)
    mime: Mapped[str | None] = mapped_column(String(255))
    charset: Mapped[str | None] = mapped_column(String(64))
    charset_detected: Mapped[bool] = mapped_column(Boolean, default=False)
    lang: Mapped[str | None] = mapped_column(String(64))
    size: Mapped[int | None] = mapped_column(Integer)  # bytes received; None = unknown
    body: Mapped[str | None] = mapped_column(Text)  # decoded text for text/* types
    content_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    title: Mapped[str | None] = mapped_column(Text)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)  # cut at the size limit
    possibly_truncated: Mapped[bool] = mapped_column(Boolean, default=False)  # no close_notify
    redirect_target: Mapped[str | None] = mapped_column(Text, index=True)
    duplicate_of_id: Mapped[int | None] = mapped_column(
        ForeignKey("pages.id", ondelete="SET NULL"), index=True
    )
    feed_kind: Mapped[str | None] = mapped_column(String(16))  # gemsub, atom, rss
    # Links on the page past the crawler's cap (crawler.content.MAX_LINKS_PER_PAGE): neither
    # stored in ``links`` nor followed. 0 for every page within the cap.
    links_dropped: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    fetched_at: Mapped[datetime | None] = mapped_column(DateTime)
    changed_at: Mapped[datetime | None] = mapped_column(DateTime)
    change_count: Mapped[int] = mapped_column(Integer, default=0)
    next_crawl_at: Mapped[datetime | None] = mapped_column(DateTime, index=True)
    error_kind: Mapped[str | None] = mapped_column(String(32))
    error_message: Mapped[str | None] = mapped_column(Text)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)

    capsule: Mapped[Capsule] = relationship(back_populates="pages")

    def __repr__(self) -> str:
        return f"<Page {self.url} state={self.state} status={self.status}>"


#: What ``Page.state`` may be. ``ok`` pages are indexed; every other state is not.
PAGE_STATES = (
    "new",  # known from a link or a seed, never fetched
    "ok",  # 2x with a stored body, or a non-text 2x recorded by type
    "input",  # 1x: an input endpoint, its prompt in meta
    "redirect",  # 3x: redirect_target says where
    "error",  # 4x or a fetch error; retried later
    "gone",  # 51/52 and other 5x
    "certificate",  # 6x: needs a client certificate
    "excluded",  # an exclusion rule or a cap stopped it
    "disallowed",  # robots.txt forbids it
)


class FrontierEntry(Base):
    """A URL due to be fetched. Leases make crashes harmless.

    A worker leases due rows (``leased_until`` in the future); the single
    writer deletes the row in the same transaction that stores the page. A
    crawl killed mid-flight leaves only expired leases behind, and those rows
    are simply due again.
    """

    __tablename__ = "frontier"
    __table_args__ = (Index("ix_frontier_due", "due_at", "priority"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), unique=True)
    capsule_id: Mapped[int] = mapped_column(
        ForeignKey("capsules.id", ondelete="CASCADE"), index=True
    )
    due_at: Mapped[datetime] = mapped_column(DateTime)
    priority: Mapped[int] = mapped_column(Integer, default=0)  # lower first
    depth: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(String(16), default="link")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    redirects: Mapped[int] = mapped_column(Integer, default=0)  # hops that led here
    enqueued_at: Mapped[datetime] = mapped_column(DateTime)
    leased_until: Mapped[datetime | None] = mapped_column(DateTime, index=True)
    lease_owner: Mapped[str | None] = mapped_column(String(64))

    page: Mapped[Page] = relationship()


class Link(Base):
    __tablename__ = "links"
    # Backlinks select by target URL (links to other schemes and to pages gone from the
    # store have no target_id); without this each backlinks page read every link. A hash
    # index on PostgreSQL, whose B-tree entries cannot hold a 2,048-character link.
    # ix_links_kind: the census counts links by kind without reading the rows.
    __table_args__ = (
        Index("ix_links_target_url", "target_url", postgresql_using="hash"),
        Index("ix_links_kind", "target_scheme", "cross_capsule"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), index=True)
    target_url: Mapped[str] = mapped_column(Text)
    target_id: Mapped[int | None] = mapped_column(
        ForeignKey("pages.id", ondelete="SET NULL"), index=True
    )
    target_scheme: Mapped[str] = mapped_column(String(32))
    label: Mapped[str] = mapped_column(Text, default="")
    position: Mapped[int] = mapped_column(Integer, default=0)
    cross_capsule: Mapped[bool] = mapped_column(Boolean, default=False)
    first_seen_at: Mapped[datetime] = mapped_column(DateTime)


class FetchAttempt(Base):
    __tablename__ = "fetch_attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    page_id: Mapped[int] = mapped_column(ForeignKey("pages.id", ondelete="CASCADE"), index=True)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    duration: Mapped[float] = mapped_column(Float)  # seconds
    address: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[int | None] = mapped_column(Integer)
    meta: Mapped[str | None] = mapped_column(Text)
    error_kind: Mapped[str | None] = mapped_column(String(32))
    error_message: Mapped[str | None] = mapped_column(Text)
    bytes_read: Mapped[int] = mapped_column(Integer, default=0)
    possibly_truncated: Mapped[bool] = mapped_column(Boolean, default=False)


class CertificateEvent(Base):
    __tablename__ = "certificate_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    capsule_id: Mapped[int] = mapped_column(
        ForeignKey("capsules.id", ondelete="CASCADE"), index=True
    )
    seen_at: Mapped[datetime] = mapped_column(DateTime)
    kind: Mapped[str] = mapped_column(String(32))  # first-seen, changed-before-expiry, ...
    old_fingerprint: Mapped[str | None] = mapped_column(String(64))
    new_fingerprint: Mapped[str] = mapped_column(String(64))
    old_not_after: Mapped[datetime | None] = mapped_column(DateTime)
    new_not_after: Mapped[datetime | None] = mapped_column(DateTime)


class UserRobots(Base):
    """A pubnix user's own ``/~user/robots.txt``, kept like the capsule's (``capsules.robots_*``)
    so the next run need not ask again within its lifetime."""

    __tablename__ = "user_robots"

    capsule_id: Mapped[int] = mapped_column(
        ForeignKey("capsules.id", ondelete="CASCADE"), primary_key=True
    )
    user_name: Mapped[str] = mapped_column(String(255), primary_key=True)  # alice in /~alice/
    status: Mapped[int | None] = mapped_column(Integer)
    text: Mapped[str | None] = mapped_column(Text)
    fetched_at: Mapped[datetime] = mapped_column(DateTime)


class SeedRequest(Base):
    __tablename__ = "seed_requests"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(32))  # cli, seeds-file, capsule
    requested_at: Mapped[datetime] = mapped_column(DateTime)
    processed_at: Mapped[datetime | None] = mapped_column(DateTime, index=True)
    outcome: Mapped[str | None] = mapped_column(Text)


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)  # crawl, index
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    stats: Mapped[str | None] = mapped_column(Text)  # JSON figures of the run


class OperatorExclusion(Base):
    """A URL prefix the operator removed (``sextant forget``), usually at its author's request.

    The crawler loads these as exclusion rules, so the pages are never fetched again, and
    the search capsule publishes them with their reasons on ``/known-excludes``.
    """

    __tablename__ = "operator_exclusions"

    id: Mapped[int] = mapped_column(primary_key=True)
    prefix: Mapped[str] = mapped_column(Text, unique=True)  # canonical gemini:// URL prefix
    reason: Mapped[str] = mapped_column(Text)
    added_at: Mapped[datetime] = mapped_column(DateTime)


class ExclusionSweep(Base):
    """An exclusion rule every stored page has been checked against.

    A rule new to this table (an edited ``--exclude`` file, a new release's trap rules) makes
    the next crawl check the stored pages once, so pages it covers leave the index; rules
    already here cost nothing at later runs.
    """

    __tablename__ = "exclusion_sweeps"

    pattern: Mapped[str] = mapped_column(Text, primary_key=True)
    swept_at: Mapped[datetime] = mapped_column(DateTime)
