"""One writer transaction: its connection, its moment, and the rows every message adds alike.

Fetch attempts, finished or rescheduled frontier rows and a capsule's latest facts come
from every kind of message; they are gathered here and written once, by :meth:`flush`, at
the end of the transaction instead of a statement per message. A transaction object lives
for one attempt only, so nothing gathered outlives a rollback.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, delete, insert, or_, update

from crawler.certificate_pins import CertificatePins
from crawler.frontier import CAPSULES, FRONTIER, PRIORITY_RETRY
from crawler.messages import CapsuleContact
from sextant.store import FetchAttempt, utcnow
from sextant.store.batches import in_batches

ATTEMPTS = FetchAttempt.__table__

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


class Transaction:
    """What the messages of one transaction share; handed to whatever stores them."""

    def __init__(
        self, conn: Connection, now: datetime, *, owner: str, pins: CertificatePins
    ) -> None:
        self.conn = conn
        self.now = now
        self.owner = owner
        self.pins = pins
        self._attempts: list[dict[str, object]] = []
        self._finished: list[int] = []
        self._retries: list[dict[str, object]] = []
        self._postponed: list[dict[str, object]] = []
        self._capsule_facts: dict[int, dict[str, object]] = {}

    def add_attempt(self, values: dict[str, object]) -> None:
        self._attempts.append(values)

    def finish_row(self, frontier_id: int) -> None:
        self._finished.append(frontier_id)

    def retry_row(self, frontier_id: int, due: datetime, *, held: bool = False) -> None:
        if held:
            self._postponed.append({"fid": frontier_id, "due": due, "owner": self.owner})
        else:
            self._retries.append({"fid": frontier_id, "due": due})

    def update_capsule(self, capsule_id: int, now: datetime, contact: CapsuleContact) -> None:
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
                self.pins.judge(
                    self.conn, capsule_id, contact.certificate, contact.tls_version, now
                )
            )
        self._capsule_facts.setdefault(capsule_id, {}).update(values)

    def defer_capsule(self, capsule_id: int, due_at: datetime) -> None:
        """Every row of the capsule not being worked on by someone else waits until then."""
        self.conn.execute(
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

    def flush(self) -> None:
        """Write what was gathered; the last thing before the commit."""
        conn = self.conn
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
