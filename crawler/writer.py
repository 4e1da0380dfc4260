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
from datetime import timedelta

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from crawler.admission import Admission
from crawler.certificate_pins import CertificatePins
from crawler.frontier import CAPSULES, FRONTIER, PAGES, USER_ROBOTS
from crawler.messages import (
    Deferred,
    FetchRecord,
    Message,
    RobotsRecord,
    Skipped,
)
from crawler.page_batch import PageBatch
from crawler.rejudge import rejudge_robots, settled_values
from crawler.transaction import Transaction, WriterStats
from crawler.url_rows import CapsuleIds
from sextant.errors import StoreError
from sextant.store import utcnow
from sextant.store.batches import in_batches

log = logging.getLogger(__name__)

MAX_BATCH = 64


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
        self.pins = CertificatePins()

    def commit(self, batch: Sequence[Message]) -> None:
        """Store a batch in one transaction; on failure, each message alone."""
        if not batch:
            return
        started = time.thread_time()
        try:
            self._commit(batch)
        finally:
            self.stats.seconds += time.thread_time() - started
            self.stats.certificate_events = self.pins.events

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
        with self.engine.begin() as conn:
            tx = Transaction(conn, utcnow(), owner=self.owner, pins=self.pins)
            fetched = [message for message in batch if isinstance(message, FetchRecord)]
            if fetched:
                PageBatch(tx, self.admission, self.capsules, self.stats).store(fetched)
            for message in batch:
                if isinstance(message, Skipped):
                    self._apply_skipped(tx, message)
                elif isinstance(message, Deferred):
                    self._apply_deferred(tx, message)
                elif isinstance(message, RobotsRecord):
                    self._apply_robots(tx, message)
            tx.flush()

    def _forget(self) -> None:
        """After a rollback, caches may name rows that no longer exist: reread them."""
        self.capsules.forget()
        self.admission.forget()
        self.pins.forget()

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

    # --- the other messages ------------------------------------------------------------------

    def _apply_skipped(self, tx: Transaction, message: Skipped) -> None:
        conn, now = tx.conn, tx.now
        item = message.item
        current = conn.execute(
            select(PAGES.c.state, PAGES.c.error_message).where(PAGES.c.id == item.page_id)
        ).one_or_none()
        if current is not None:
            values = settled_values(message.state, message.reason, now)
            if current.state == message.state and current.error_message == message.reason:
                del values["updated_at"]
            conn.execute(update(PAGES).where(PAGES.c.id == item.page_id).values(**values))
        tx.finish_row(item.id)

    def _apply_deferred(self, tx: Transaction, message: Deferred) -> None:
        conn = tx.conn
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
            tx.defer_capsule(message.capsule_id, message.due_at)

    def _apply_robots(self, tx: Transaction, record: RobotsRecord) -> None:
        conn = tx.conn
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
        tx.update_capsule(record.capsule_id, record.fetched_at, record)
        if record.parked_until is not None:
            tx.defer_capsule(record.capsule_id, record.parked_until)
