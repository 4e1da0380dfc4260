"""The single writer: everything a fetch taught us, stored in one transaction.

Workers never write to the store. They hand what they learned to one writer task over a
trio channel, and the writer stores, per fetched page and atomically: the page itself, its
links (replacing the old ones), the pages and frontier rows of new link targets, the capsule's
facts (address, failures, TLS with its TOFU verdict), the fetch attempt, and the removal (or
rescheduling) of the frontier row. A crawl killed at any instant therefore loses only the
requests in flight: their rows are still in the frontier, leased, and become due again.

Messages that arrive together are committed together (group commit): each one is still
all-or-nothing, and one commit per batch instead of per page is what lets a single SQLite
writer keep up with many fetching workers. If a batch fails, each message is retried alone
so one bad page cannot take its neighbours down.

Timestamps are the writer's ``utcnow()`` at commit time, except the attempt start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import SQLAlchemyError

from crawler.admission import ADMITTED, EXCLUDED, Admission
from crawler.content import Content, ExtractedLink
from crawler.frontier import (
    CAPSULES,
    FRONTIER,
    MAX_RECRAWL,
    PAGES,
    PRIORITY_REDIRECT,
    PRIORITY_RETRY,
    CapsuleIds,
    Enqueue,
    FrontierItem,
    NewPage,
    PageRef,
    enqueue,
    find_pages,
    insert_pages,
    recrawl_interval,
)
from crawler.tofu import judge
from sextant.errors import InvalidURL, StoreError
from sextant.store import CertificateEvent, FetchAttempt, Link, utcnow
from sextant.tls import CertificateFacts
from sextant.urls import GeminiURL, parse, resolve, scheme_of, scope_of

log = logging.getLogger(__name__)

LINKS = Link.__table__
ATTEMPTS = FetchAttempt.__table__
CERT_EVENTS = CertificateEvent.__table__

MAX_REDIRECTS = 5  # Gemini spec §3.2.3 (v0.16.1: "no more than 5")
MAX_BATCH = 64

# The statements of the hot path, built once (see frontier._FIND_PAGES for why).
_SELECT_PAGE = select(
    PAGES.c.id,
    PAGES.c.url,
    PAGES.c.capsule_id,
    PAGES.c.scope,
    PAGES.c.depth,
    PAGES.c.state,
    PAGES.c.status,
    PAGES.c.meta,
    PAGES.c.title,
    PAGES.c.lang,
    PAGES.c.content_hash,
    PAGES.c.redirect_target,
    PAGES.c.duplicate_of_id,
    PAGES.c.fetched_at,
    PAGES.c.next_crawl_at,
    PAGES.c.change_count,
    PAGES.c.consecutive_failures,
).where(PAGES.c.id == bindparam("pid"))
_UPDATE_PAGE = update(PAGES).where(PAGES.c.id == bindparam("pid"))  # SET from the parameters
_TOUCH_PAGES = (
    update(PAGES)
    .where(PAGES.c.id.in_(bindparam("ids", expanding=True)))
    .values(updated_at=bindparam("now"))
)
# Any page with the same body; content_hash is only kept on pages with content. (A
# condition on state here made SQLite pick the state index and scan every ok page.)
_FIRST_WITH_HASH = select(func.min(PAGES.c.id)).where(
    PAGES.c.content_hash == bindparam("hash"), PAGES.c.id != bindparam("pid")
)
_REDIRECT_OF = select(PAGES.c.state, PAGES.c.redirect_target).where(PAGES.c.url == bindparam("url"))
_SELECT_LINKS = select(
    LINKS.c.target_url,
    LINKS.c.target_id,
    LINKS.c.label,
    LINKS.c.position,
    LINKS.c.first_seen_at,
).where(LINKS.c.source_id == bindparam("sid"))
_DELETE_LINKS = delete(LINKS).where(LINKS.c.source_id == bindparam("sid"))
_INSERT_LINKS = insert(LINKS)
_INSERT_ATTEMPT = insert(ATTEMPTS)
_UPDATE_CAPSULE = update(CAPSULES).where(CAPSULES.c.id == bindparam("cid"))
_DELETE_ROW = delete(FRONTIER).where(FRONTIER.c.id == bindparam("fid"))
_DELETE_ROWS = delete(FRONTIER).where(FRONTIER.c.id.in_(bindparam("ids", expanding=True)))
_RETRY_ROW = (
    update(FRONTIER)
    .where(FRONTIER.c.id == bindparam("fid"))
    .values(
        due_at=bindparam("due"),
        attempts=FRONTIER.c.attempts + 1,
        priority=PRIORITY_RETRY,
        lease_owner=None,
        leased_until=None,
    )
)

# States that have no content of their own: a page that becomes one of these loses its
# body and outbound links (a 51 page links nowhere any more).
_CONTENTLESS = frozenset({"input", "redirect", "gone", "certificate"})


# --- messages --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRecord:
    """One request for a frontier row and what came back."""

    item: FrontierItem
    started_at: datetime
    duration: float
    address: str | None
    status: int | None = None
    meta: str | None = None
    mime: str | None = None  # essence, e.g. "text/gemini"
    error_kind: str | None = None
    error_message: str | None = None
    bytes_read: int = 0  # everything received, header included
    size: int | None = None  # body bytes kept
    body_skipped: bool = False
    truncated: bool = False
    possibly_truncated: bool = False
    tls_version: str | None = None
    certificate: CertificateFacts | None = None
    content: Content | None = None
    # What happens to the frontier row: None = done (deleted), else due again then.
    retry_at: datetime | None = None
    # The capsule after this request (decided by the engine's politeness rules).
    capsule_failures: int = 0
    parked_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A row settled without a request: excluded by a rule or disallowed by robots.txt."""

    item: FrontierItem
    state: str  # "excluded" or "disallowed"
    reason: str


@dataclass(frozen=True, slots=True)
class Deferred:
    """Rows going back to the frontier, due at ``due_at``; with ``capsule_id`` every row of
    that capsule that is not leased by someone else moves too (parking, repeated 44s)."""

    item_ids: tuple[int, ...]
    due_at: datetime
    capsule_id: int | None = None
    attempted: bool = False  # count an attempt on the rows (a 44 for that very page)


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """The outcome of asking a capsule for its robots.txt."""

    capsule_id: int
    fetched_at: datetime
    address: str | None
    status: int | None  # None: no usable answer (connection failure, malformed header)
    text: str | None
    usable: bool  # a policy was obtained (2x or 5x): cache it
    crawl_delay: float | None
    capsule_failures: int = 0
    parked_until: datetime | None = None
    certificate: CertificateFacts | None = None
    tls_version: str | None = None


Message = FetchRecord | Skipped | Deferred | RobotsRecord


@dataclass(slots=True)
class WriterStats:
    transactions: int = 0
    messages: int = 0
    retried_alone: int = 0
    failed: int = 0
    new_pages: int = 0
    enqueued: int = 0
    certificate_events: int = 0
    seconds: float = 0.0  # CPU time of the writer thread
    events: list[str] = field(default_factory=list)


class Writer:
    """Applies messages to the store. Blocking; the engine calls :meth:`commit` in a thread,
    one batch at a time, so exactly one transaction is open at any moment."""

    def __init__(self, engine: Engine, admission: Admission, *, owner: str) -> None:
        self.engine = engine
        self.admission = admission
        self.owner = owner
        self.capsules = CapsuleIds()
        self.stats = WriterStats()
        # Pinned certificate per capsule, to judge TOFU without a query per page.
        self._pins: dict[int, tuple[str | None, datetime | None]] = {}
        # Gathered during a transaction, written at its end (see _transaction).
        self._attempts: list[dict[str, object]] = []
        self._finished: list[int] = []
        self._capsule_facts: dict[int, dict[str, object]] = {}

    def commit(self, batch: Sequence[Message]) -> None:
        """Store a batch in one transaction; on failure, each message alone."""
        if not batch:
            return
        started = time.thread_time()
        try:
            self._commit(batch)
        finally:
            self.stats.seconds += time.thread_time() - started

    def _commit(self, batch: Sequence[Message]) -> None:
        try:
            self._transaction(batch)
            self.stats.transactions += 1
            self.stats.messages += len(batch)
            return
        except SQLAlchemyError as exc:
            if len(batch) == 1:
                self._forget()
                self._give_up(batch[0], exc)
                return
            log.warning("batch of %d failed (%s); storing one by one", len(batch), exc)
            self._forget()
        for message in batch:
            try:
                self._transaction([message])
                self.stats.transactions += 1
                self.stats.messages += 1
                self.stats.retried_alone += 1
            except SQLAlchemyError as exc:
                self._forget()
                self._give_up(message, exc)

    def _transaction(self, batch: Sequence[Message]) -> None:
        """One transaction. Rows every page adds alike (its fetch attempt, the removal of
        its frontier row, its capsule's latest facts) are gathered and written once per
        batch: a statement per batch instead of per page, same atomicity."""
        self._attempts = []
        self._finished = []
        self._capsule_facts = {}
        with self.engine.begin() as conn:
            for message in batch:
                self._apply(conn, message)
            if self._attempts:
                conn.execute(_INSERT_ATTEMPT, self._attempts)
            for start in range(0, len(self._finished), 500):
                conn.execute(_DELETE_ROWS, {"ids": self._finished[start : start + 500]})
            for capsule_id, values in self._capsule_facts.items():
                conn.execute(_UPDATE_CAPSULE, {"cid": capsule_id, **values})

    # --- dispatch --------------------------------------------------------------------------

    def _apply(self, conn: Connection, message: Message) -> None:
        if isinstance(message, FetchRecord):
            self._apply_fetch(conn, message)
        elif isinstance(message, Skipped):
            self._apply_skipped(conn, message)
        elif isinstance(message, Deferred):
            self._apply_deferred(conn, message)
        else:
            self._apply_robots(conn, message)

    def _forget(self) -> None:
        self.capsules.forget()
        self.admission.forget()
        self._pins.clear()

    def _give_up(self, message: Message, exc: SQLAlchemyError) -> None:
        """A message the store refuses even alone: keep the crawl going, but do not let the
        row come back at once (it would fail the same way), and say so in the log."""
        self.stats.failed += 1
        log.error("cannot store %r: %s", message, exc)
        if not isinstance(message, FetchRecord | Skipped):
            return
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(FRONTIER)
                    .where(FRONTIER.c.id == message.item.id)
                    .values(
                        due_at=utcnow() + timedelta(days=1), lease_owner=None, leased_until=None
                    )
                )
                conn.execute(
                    update(PAGES)
                    .where(PAGES.c.id == message.item.page_id)
                    .values(error_kind="store-error", error_message=str(exc)[:500])
                )
        except SQLAlchemyError as again:
            raise StoreError(f"the store refuses every write: {again}") from again

    # --- a fetched page ----------------------------------------------------------------------

    def _apply_fetch(self, conn: Connection, record: FetchRecord) -> None:
        now = utcnow()
        item = record.item
        page = conn.execute(_SELECT_PAGE, {"pid": item.page_id}).one_or_none()
        if page is None:  # deleted while we fetched it
            conn.execute(_DELETE_ROW, {"fid": item.id})
            return
        url = parse(page.url)
        # A header followed by a failure (a drip cut mid-body, a 2x whose meta is no MIME
        # type) is a failed fetch: the attempt keeps the header, the page does not.
        status = record.status if record.error_kind is None else None
        family = status // 10 if status is not None else None
        values: dict[str, object] = {
            "fetched_at": now,
            "status": status,
            "meta": record.meta if status is not None else None,
            "error_kind": record.error_kind,
            "error_message": record.error_message,
        }
        temporary = False
        if family is None or family == 4:
            # No answer, or "try later": keep what an earlier fetch stored.
            temporary = True
            state = "ok" if page.state == "ok" else "error"
            values["consecutive_failures"] = page.consecutive_failures + 1
            if family == 4 and record.error_kind is None:
                values["error_kind"] = "slow-down" if status == 44 else "temporary-failure"
                values["error_message"] = f"{status} {record.meta or ''}".strip()
            if state == "ok":
                # The stored body is still the page's; status/meta describe that body.
                values.pop("status")
                values.pop("meta")
        else:
            values["consecutive_failures"] = 0
            state = {1: "input", 2: "ok", 3: "redirect", 5: "gone", 6: "certificate"}[family]
        if state in _CONTENTLESS:
            values.update(
                mime=None,
                charset=None,
                charset_detected=False,
                lang=None,
                body=None,
                title=None,
                content_hash=None,
                size=None,
                truncated=False,
                possibly_truncated=False,
                feed_kind=None,
                duplicate_of_id=None,
                redirect_target=None,
            )
            self._replace_links(conn, page, url, (), now)
        if family == 2:
            self._store_success(conn, record, page, url, values, now)
        elif family == 3:
            state = self._follow_redirect(conn, record, page, url, values, now)
        elif family == 1 and status is not None:
            values["error_kind"] = None

        values["state"] = state
        new_hash = values.get("content_hash", page.content_hash)
        changed = page.fetched_at is None or new_hash != page.content_hash or state != page.state
        if changed and page.fetched_at is not None:
            values["changed_at"] = now
            values["change_count"] = page.change_count + 1
        elif page.fetched_at is None:
            values["changed_at"] = now
        if not temporary or record.retry_at is None:
            previous = (
                page.next_crawl_at - page.fetched_at
                if page.next_crawl_at is not None and page.fetched_at is not None
                else None
            )
            interval = MAX_RECRAWL if state == "gone" else recrawl_interval(previous, changed)
            values["next_crawl_at"] = now + interval
        if _visible_change(page, values):
            values["updated_at"] = now
        conn.execute(_UPDATE_PAGE, {"pid": page.id, **values})

        self._attempts.append(
            {
                "page_id": page.id,
                "started_at": record.started_at,
                "duration": record.duration,
                "address": record.address,
                "status": record.status,
                "meta": record.meta,
                "error_kind": values["error_kind"],
                "error_message": values["error_message"],
                "bytes_read": record.bytes_read,
                "possibly_truncated": record.possibly_truncated,
            }
        )
        self._update_capsule(
            conn,
            page.capsule_id,
            now,
            address=record.address,
            answered=status is not None,
            failures=record.capsule_failures,
            parked_until=record.parked_until,
            certificate=record.certificate,
            tls_version=record.tls_version,
        )
        if record.retry_at is not None:
            conn.execute(_RETRY_ROW, {"fid": item.id, "due": record.retry_at})
        else:
            self._finished.append(item.id)
        if record.parked_until is not None:
            self._defer_capsule(conn, page.capsule_id, record.parked_until)

    def _store_success(
        self,
        conn: Connection,
        record: FetchRecord,
        page: Row[Any],
        url: GeminiURL,
        values: dict[str, object],
        now: datetime,
    ) -> None:
        content = record.content
        values.update(
            mime=record.mime,
            size=None if record.body_skipped else record.size,
            truncated=record.truncated,
            possibly_truncated=record.possibly_truncated,
            redirect_target=None,
            error_kind=None,
            error_message=None,
        )
        if content is None:
            values.update(
                charset=None,
                charset_detected=False,
                lang=None,
                body=None,
                title=None,
                content_hash=None,
                feed_kind=None,
                duplicate_of_id=None,
            )
            self._replace_links(conn, page, url, (), now)
            return
        values.update(
            charset=content.charset,
            charset_detected=content.charset_detected,
            lang=content.lang,
            body=content.text,
            title=content.title,
            content_hash=content.content_hash,
            feed_kind=content.feed_kind,
        )
        page_id = page.id
        original = conn.execute(
            _FIRST_WITH_HASH, {"hash": content.content_hash, "pid": page_id}
        ).scalar_one()
        first = original is None or original > page_id
        values["duplicate_of_id"] = None if first else original
        self._replace_links(conn, page, url, content.links, now)

    # --- links -------------------------------------------------------------------------------

    def _replace_links(
        self,
        conn: Connection,
        page: Row[Any],
        url: GeminiURL,
        links: Sequence[ExtractedLink],
        now: datetime,
    ) -> None:
        """Swap the page's outbound links for ``links``; record and enqueue new targets;
        bump ``updated_at`` of targets whose inbound anchors changed (the indexer's
        watermark then picks up their new or lost anchor text)."""
        page_id: int = page.id
        # A page never fetched has no links yet: one query saved per new page.
        old = [] if page.fetched_at is None else conn.execute(_SELECT_LINKS, {"sid": page_id}).all()
        if not old and not links:
            return
        new_triples = [(link.url, link.label, link.position) for link in links]
        if sorted(new_triples) == sorted((row.target_url, row.label, row.position) for row in old):
            return
        first_seen = {row.target_url: row.first_seen_at for row in old}

        gemini: dict[str, GeminiURL] = {}
        for link in links:
            if link.scheme == "gemini":
                try:
                    gemini[link.url] = parse(link.url)
                except InvalidURL:
                    continue
        depth = page.depth + 1
        targets, created = self._ensure_targets(conn, gemini, depth, now, reason="link")
        unfetched = {ref.id for ref in targets.values() if ref.fetched_at is None}

        source_scope = scope_of(url)
        if old:
            conn.execute(_DELETE_LINKS, {"sid": page_id})
        rows = []
        for link in links:
            target = targets.get(link.url)
            parsed = gemini.get(link.url)
            rows.append(
                {
                    "source_id": page_id,
                    "target_url": link.url,
                    "target_id": target.id if target is not None else None,
                    "target_scheme": link.scheme,
                    "label": link.label,
                    "position": link.position,
                    "cross_capsule": parsed is None or scope_of(parsed) != source_scope,
                    "first_seen_at": first_seen.get(link.url, now),
                }
            )
        if rows:
            conn.execute(_INSERT_LINKS, rows)

        before: dict[int, set[str]] = {}
        for row in old:
            if row.target_id is not None:
                before.setdefault(row.target_id, set()).add(row.label)
        after: dict[int, set[str]] = {}
        for row in rows:
            if row["target_id"] is not None:
                after.setdefault(row["target_id"], set()).add(row["label"])
        # Only pages the index may hold need to know: one never fetched has nothing
        # indexed yet (created just now, it carries updated_at = now anyway).
        touched = [
            target
            for target in before.keys() | after.keys()
            if before.get(target) != after.get(target)
            and target != page_id
            and target not in created
            and target not in unfetched
        ]
        for start in range(0, len(touched), 500):
            conn.execute(_TOUCH_PAGES, {"ids": touched[start : start + 500], "now": now})

    def _ensure_targets(
        self,
        conn: Connection,
        targets: dict[str, GeminiURL],
        depth: int,
        now: datetime,
        *,
        reason: str,
        redirects: int = 0,
    ) -> tuple[dict[str, PageRef], set[int]]:
        """Pages for link (or redirect) targets, created when new; frontier rows for those
        never fetched, not queued yet, and admitted. Returns the refs and the created ids."""
        if not targets:
            return {}, set()
        refs = find_pages(conn, targets.keys())
        fresh: list[NewPage] = []
        admitted: set[str] = set()
        for text, target in targets.items():
            if text in refs:
                continue
            verdict = self.admission.judge(conn, target, depth)
            if verdict.kind == EXCLUDED:
                fresh.append(NewPage(target, depth, EXCLUDED, verdict.reason))
            else:
                fresh.append(NewPage(target, depth, "new", None))
                if verdict.kind == ADMITTED:
                    admitted.add(text)
        # Known pages never fetched and not queued: from a run with other limits, or outside
        # --allow-host then; they get their chance now if this run admits them.
        waiting = [
            ref
            for ref in refs.values()
            if ref.state == "new" and ref.fetched_at is None and not ref.queued
        ]
        queue: list[Enqueue] = []
        for ref in waiting:
            # Already in the store, so already counted against the caps: only the static
            # checks (host, depth, rules) apply.
            if self.admission.static(targets[ref.url], depth).admitted:
                queue.append(self._entry(ref, depth, reason, redirects))
        created = insert_pages(conn, fresh, self.capsules, now)
        self.stats.new_pages += len(created)
        refs.update(created)
        queue.extend(
            self._entry(ref, depth, reason, redirects)
            for text, ref in created.items()
            if text in admitted
        )
        enqueue(conn, queue, now)
        self.stats.enqueued += len(queue)
        return refs, {ref.id for ref in created.values()}

    @staticmethod
    def _entry(ref: PageRef, depth: int, reason: str, redirects: int) -> Enqueue:
        if reason == "redirect":
            return Enqueue(ref.id, ref.capsule_id, depth, reason, PRIORITY_REDIRECT, redirects)
        return Enqueue(ref.id, ref.capsule_id, depth, reason)

    # --- redirects ---------------------------------------------------------------------------

    def _follow_redirect(
        self,
        conn: Connection,
        record: FetchRecord,
        page: Row[Any],
        url: GeminiURL,
        values: dict[str, object],
        now: datetime,
    ) -> str:
        """Record a 3x and queue its target; return the page's state.

        Redirects are followed through the frontier, so a target on another capsule waits
        for that capsule's politeness like any URL. Loops are caught by walking the stored
        chain of redirect targets; a chain longer than five hops ends in an error (§3.2.3).
        """
        meta = record.meta or ""
        try:
            target = resolve(url, meta)
        except InvalidURL as exc:
            values.update(error_kind="bad-redirect", error_message=str(exc))
            return "error"
        values["redirect_target"] = target
        if scheme_of(target) != "gemini":
            values.update(
                error_kind=None,
                error_message=f"redirect to another scheme ({scheme_of(target)}:) not followed",
            )
            return "redirect"
        if target == page.url or self._leads_back(conn, target, page.url):
            values.update(error_kind="redirect-loop", error_message=f"redirect loop via {target}")
            return "error"
        hops = record.item.redirects + 1
        if hops > MAX_REDIRECTS:
            values.update(
                error_kind="too-many-redirects",
                error_message=f"more than {MAX_REDIRECTS} redirects in a row",
            )
            return "error"
        self._ensure_targets(
            conn,
            {target: parse(target)},
            page.depth,
            now,
            reason="redirect",
            redirects=hops,
        )
        values["error_kind"] = None
        return "redirect"

    @staticmethod
    def _leads_back(conn: Connection, target: str, origin: str) -> bool:
        current = target
        for _ in range(MAX_REDIRECTS + 1):
            row = conn.execute(_REDIRECT_OF, {"url": current}).one_or_none()
            if row is None or row.redirect_target is None or row.state not in ("redirect", "error"):
                return False
            if row.redirect_target == origin:
                return True
            current = row.redirect_target
        return False

    # --- capsules ----------------------------------------------------------------------------

    def _update_capsule(
        self,
        conn: Connection,
        capsule_id: int,
        now: datetime,
        *,
        address: str | None,
        answered: bool,
        failures: int,
        parked_until: datetime | None,
        certificate: CertificateFacts | None,
        tls_version: str | None,
    ) -> None:
        values: dict[str, object] = {
            "last_attempt_at": now,
            "consecutive_failures": failures,
            "parked_until": parked_until,
        }
        if address is not None:
            values["address"] = address
        if answered:
            values["last_success_at"] = now
        if certificate is not None:
            values.update(self._judge_certificate(conn, capsule_id, certificate, tls_version, now))
        self._capsule_facts.setdefault(capsule_id, {}).update(values)

    def _judge_certificate(
        self,
        conn: Connection,
        capsule_id: int,
        seen: CertificateFacts,
        tls_version: str | None,
        now: datetime,
    ) -> dict[str, object]:
        pin = self._pins.get(capsule_id)
        if pin is None:
            row = conn.execute(
                select(CAPSULES.c.tls_fingerprint, CAPSULES.c.tls_not_after).where(
                    CAPSULES.c.id == capsule_id
                )
            ).one()
            pin = (row.tls_fingerprint, row.tls_not_after)
        verdict = judge(pin[0], pin[1], seen, now)
        self._pins[capsule_id] = (verdict.fingerprint, seen.not_after)
        values: dict[str, object] = {"tls_version": tls_version} if tls_version else {}
        if not verdict.is_event:
            return values
        conn.execute(
            insert(CERT_EVENTS).values(
                capsule_id=capsule_id,
                seen_at=now,
                kind=verdict.kind,
                old_fingerprint=verdict.previous_fingerprint,
                new_fingerprint=verdict.fingerprint,
                old_not_after=pin[1],
                new_not_after=seen.not_after,
            )
        )
        self.stats.certificate_events += 1
        # The crawler is no person to protect: it keeps crawling and pins the new
        # certificate, so one change is one event, not one per page.
        values.update(
            tls_fingerprint=verdict.fingerprint,
            tls_not_before=seen.not_before,
            tls_not_after=seen.not_after,
            tls_self_signed=seen.self_signed,
            tls_key_type=seen.key_type,
            tls_names=" ".join(seen.names) or None,
            tls_first_seen_at=now,
        )
        return values

    def _defer_capsule(self, conn: Connection, capsule_id: int, due_at: datetime) -> None:
        conn.execute(
            update(FRONTIER)
            .where(
                FRONTIER.c.capsule_id == capsule_id,
                FRONTIER.c.due_at < due_at,
                or_(
                    FRONTIER.c.lease_owner.is_(None),
                    FRONTIER.c.lease_owner == self.owner,
                    FRONTIER.c.leased_until < utcnow(),
                ),
            )
            .values(due_at=due_at, lease_owner=None, leased_until=None)
        )

    # --- the other messages ------------------------------------------------------------------

    def _apply_skipped(self, conn: Connection, message: Skipped) -> None:
        now = utcnow()
        item = message.item
        current = conn.execute(
            select(PAGES.c.state, PAGES.c.error_message).where(PAGES.c.id == item.page_id)
        ).one_or_none()
        if current is not None:
            values: dict[str, object] = {
                "state": message.state,
                "error_kind": message.state,
                "error_message": message.reason,
                # robots.txt may change; a rule-excluded page waits for a rule change instead.
                "next_crawl_at": now + timedelta(days=1) if message.state == "disallowed" else None,
            }
            if current.state != message.state or current.error_message != message.reason:
                values["updated_at"] = now
            conn.execute(update(PAGES).where(PAGES.c.id == item.page_id).values(**values))
        conn.execute(delete(FRONTIER).where(FRONTIER.c.id == item.id))

    def _apply_deferred(self, conn: Connection, message: Deferred) -> None:
        ids = list(message.item_ids)
        for start in range(0, len(ids), 500):
            values: dict[str, object] = {
                "due_at": message.due_at,
                "lease_owner": None,
                "leased_until": None,
            }
            if message.attempted:
                values["attempts"] = FRONTIER.c.attempts + 1
            conn.execute(
                update(FRONTIER)
                .where(
                    and_(
                        FRONTIER.c.id.in_(ids[start : start + 500]),
                        FRONTIER.c.lease_owner == self.owner,
                    )
                )
                .values(**values)
            )
        if message.capsule_id is not None:
            self._defer_capsule(conn, message.capsule_id, message.due_at)

    def _apply_robots(self, conn: Connection, record: RobotsRecord) -> None:
        values: dict[str, object] = {}
        if record.usable:
            values.update(
                robots_txt=record.text,
                robots_status=record.status,
                robots_fetched_at=record.fetched_at,
                crawl_delay=record.crawl_delay,
            )
        self._update_capsule(
            conn,
            record.capsule_id,
            record.fetched_at,
            address=record.address,
            answered=record.status is not None,
            failures=record.capsule_failures,
            parked_until=record.parked_until,
            certificate=record.certificate,
            tls_version=record.tls_version,
        )
        if values:
            conn.execute(
                update(CAPSULES).where(CAPSULES.c.id == record.capsule_id).values(**values)
            )
        if record.parked_until is not None:
            self._defer_capsule(conn, record.capsule_id, record.parked_until)


def _visible_change(page: Row[Any], values: dict[str, object]) -> bool:
    """Whether anything the index shows differs from what the page row holds."""
    for column in (
        "state",
        "status",
        "meta",
        "title",
        "lang",
        "content_hash",
        "redirect_target",
        "duplicate_of_id",
    ):
        if column in values and values[column] != getattr(page, column):
            return True
    return False
