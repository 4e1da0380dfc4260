"""The single writer: everything a fetch taught us, stored in one transaction.

Workers never write to the store. They hand what they learned to one writer task over a
trio channel (:mod:`crawler.messages`), and the writer stores, per fetched page and
atomically: the page itself, its links (replacing the old ones), the pages and frontier rows
of new link targets, the capsule's facts (address, failures, TLS with its TOFU verdict), the
fetch attempt, and the removal (or rescheduling) of the frontier row. A crawl killed at any
instant therefore loses only the requests in flight: their rows are still in the frontier,
leased, and become due again.

Messages that arrive together are committed together (group commit): each one is still
all-or-nothing, and one commit per batch instead of per page is what lets a single SQLite
writer keep up with many fetching workers; :mod:`crawler.page_batch` stores the pages of a
batch with a fixed number of statements. If a batch fails, each message is retried alone
so one bad page cannot take its neighbours down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, bindparam, delete, insert, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from crawler.admission import Admission
from crawler.frontier import (
    CAPSULES,
    FRONTIER,
    PAGES,
    PRIORITY_RETRY,
    USER_ROBOTS,
    CapsuleIds,
)
from crawler.messages import (
    CapsuleContact,
    Deferred,
    FetchRecord,
    Message,
    RobotsRecord,
    Skipped,
)
from crawler.page_batch import PageBatch
from crawler.rejudge import rejudge_robots, settled_values
from crawler.tofu import judge
from sextant.errors import StoreError
from sextant.store import CertificateEvent, FetchAttempt, utcnow
from sextant.store.batches import in_batches
from sextant.tls import CertificateFacts

log = logging.getLogger(__name__)

ATTEMPTS = FetchAttempt.__table__
CERT_EVENTS = CertificateEvent.__table__

MAX_BATCH = 64

_INSERT_ATTEMPTS = insert(ATTEMPTS)
_UPDATE_CAPSULE = update(CAPSULES).where(CAPSULES.c.id == bindparam("cid"))
_DELETE_ROWS = delete(FRONTIER).where(FRONTIER.c.id.in_(bindparam("ids", expanding=True)))
_RETRY_ROWS = (
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
# A row the engine still holds (a 44 waited out in this run): it keeps its lease and learns
# its due time and attempt, so a restart, or `sextant show`, knows when it may be asked
# again and the page's own 44 back-off goes on from there.
_POSTPONE_ROWS = (
    update(FRONTIER)
    .where(FRONTIER.c.id == bindparam("fid"), FRONTIER.c.lease_owner == bindparam("owner"))
    .values(due_at=bindparam("due"), attempts=FRONTIER.c.attempts + 1)
)
_PIN_OF = select(CAPSULES.c.tls_fingerprint, CAPSULES.c.tls_not_after).where(
    CAPSULES.c.id == bindparam("cid")
)


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
        self._retries: list[dict[str, object]] = []
        self._postponed: list[dict[str, object]] = []
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
            self._forget()
            if len(batch) == 1:
                self._give_up(batch[0], exc)
                return
            log.warning("batch of %d failed (%s); storing one by one", len(batch), exc)
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
        """One transaction: the fetched pages set-wise, then the other messages in order.
        Rows every message adds alike (fetch attempts, finished frontier rows, a capsule's
        latest facts) are gathered and written once at the end."""
        self._attempts = []
        self._finished = []
        self._retries = []
        self._postponed = []
        self._capsule_facts = {}
        now = utcnow()
        with self.engine.begin() as conn:
            fetched = [message for message in batch if isinstance(message, FetchRecord)]
            if fetched:
                PageBatch(self, conn, now).store(fetched)
            for message in batch:
                if isinstance(message, Skipped):
                    self._apply_skipped(conn, message, now)
                elif isinstance(message, Deferred):
                    self._apply_deferred(conn, message)
                elif isinstance(message, RobotsRecord):
                    self._apply_robots(conn, message)
            if self._attempts:
                conn.execute(_INSERT_ATTEMPTS, self._attempts)
            if self._retries:
                conn.execute(_RETRY_ROWS, self._retries)
            if self._postponed:
                conn.execute(_POSTPONE_ROWS, self._postponed)
            for chunk in in_batches(self._finished):
                conn.execute(_DELETE_ROWS, {"ids": chunk})
            for capsule_id, values in self._capsule_facts.items():
                conn.execute(_UPDATE_CAPSULE, {"cid": capsule_id, **values})

    def _forget(self) -> None:
        """After a rollback, caches may name rows that no longer exist: reread them."""
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

    # --- gathered rows (used by PageBatch too) -------------------------------------------------

    def add_attempt(self, values: dict[str, object]) -> None:
        self._attempts.append(values)

    def finish_row(self, frontier_id: int) -> None:
        self._finished.append(frontier_id)

    def retry_row(
        self, conn: Connection, frontier_id: int, due: datetime, *, held: bool = False
    ) -> None:
        if held:
            self._postponed.append({"fid": frontier_id, "due": due, "owner": self.owner})
        else:
            self._retries.append({"fid": frontier_id, "due": due})

    def update_capsule(
        self, conn: Connection, capsule_id: int, now: datetime, contact: CapsuleContact
    ) -> None:
        """What one exchange with the capsule (a page or its robots.txt) tells of it."""
        values: dict[str, object] = {
            "last_attempt_at": now,
            "consecutive_failures": contact.capsule_failures,
            "parked_until": contact.parked_until,
        }
        if contact.address is not None:
            values["address"] = contact.address
        if contact.status is not None:  # the capsule answered
            values["last_success_at"] = now
        if contact.certificate is not None:
            values.update(
                self._judge_certificate(
                    conn, capsule_id, contact.certificate, contact.tls_version, now
                )
            )
        self._capsule_facts.setdefault(capsule_id, {}).update(values)

    def defer_capsule(self, conn: Connection, capsule_id: int, due_at: datetime) -> None:
        """Every row of the capsule not being worked on by someone else waits until then."""
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

    # --- TLS -----------------------------------------------------------------------------------

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
            row = conn.execute(_PIN_OF, {"cid": capsule_id}).one()
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

    # --- the other messages ------------------------------------------------------------------

    def _apply_skipped(self, conn: Connection, message: Skipped, now: datetime) -> None:
        item = message.item
        current = conn.execute(
            select(PAGES.c.state, PAGES.c.error_message).where(PAGES.c.id == item.page_id)
        ).one_or_none()
        if current is not None:
            values = settled_values(message.state, message.reason, now)
            if current.state == message.state and current.error_message == message.reason:
                del values["updated_at"]
            conn.execute(update(PAGES).where(PAGES.c.id == item.page_id).values(**values))
        self.finish_row(item.id)

    def _apply_deferred(self, conn: Connection, message: Deferred) -> None:
        ids = list(message.item_ids)
        values: dict[str, object] = {
            "due_at": message.due_at,
            "lease_owner": None,
            "leased_until": None,
        }
        if message.attempted:
            values["attempts"] = FRONTIER.c.attempts + 1
        for chunk in in_batches(ids):
            conn.execute(
                update(FRONTIER)
                .where(
                    FRONTIER.c.id.in_(chunk),
                    FRONTIER.c.lease_owner == self.owner,
                )
                .values(**values)
            )
        if message.capsule_id is not None:
            self.defer_capsule(conn, message.capsule_id, message.due_at)

    def _apply_robots(self, conn: Connection, record: RobotsRecord) -> None:
        rejudge_robots(conn, record, record.fetched_at)  # before the new file replaces the old
        if record.usable and record.user is not None:
            key = (USER_ROBOTS.c.capsule_id == record.capsule_id) & (
                USER_ROBOTS.c.user_name == record.user
            )
            conn.execute(delete(USER_ROBOTS).where(key))
            conn.execute(
                insert(USER_ROBOTS).values(
                    capsule_id=record.capsule_id,
                    user_name=record.user,
                    status=record.status,
                    text=record.text,
                    fetched_at=record.fetched_at,
                )
            )
        elif record.usable:
            conn.execute(
                update(CAPSULES)
                .where(CAPSULES.c.id == record.capsule_id)
                .values(
                    robots_txt=record.text,
                    robots_status=record.status,
                    robots_fetched_at=record.fetched_at,
                    crawl_delay=record.crawl_delay,
                )
            )
        self.update_capsule(conn, record.capsule_id, record.fetched_at, record)
        if record.parked_until is not None:
            self.defer_capsule(conn, record.capsule_id, record.parked_until)
