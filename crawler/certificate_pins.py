"""The pinned certificate of each capsule, and the certificate events of a change.

crawler/tofu.py decides, without I/O, what a certificate seen now means against the pinned
one; this is the store side: the pins are read once per capsule and kept for the run, so
judging costs no query per page, and a change is written as one certificate event.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, insert, select

from crawler.frontier import CAPSULES
from crawler.tofu import judge
from sextant.store import CertificateEvent
from sextant.tls import CertificateFacts

CERT_EVENTS = CertificateEvent.__table__

_PIN_OF = select(CAPSULES.c.tls_fingerprint, CAPSULES.c.tls_not_after).where(
    CAPSULES.c.id == bindparam("cid")
)


class CertificatePins:
    """Pinned certificate per capsule, kept across the writer's transactions."""

    def __init__(self) -> None:
        self.events = 0  # certificate events written (some may have been rolled back)
        self._pins: dict[int, tuple[str | None, datetime | None]] = {}

    def forget(self) -> None:
        """After a rollback the pins read or set in it may be wrong: read them again."""
        self._pins.clear()

    def judge(
        self,
        conn: Connection,
        capsule_id: int,
        seen: CertificateFacts,
        tls_version: str | None,
        now: datetime,
    ) -> dict[str, object]:
        """The capsule's TLS columns after a request that showed ``seen``."""
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
        self.events += 1
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
