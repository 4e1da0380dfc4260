"""Trust on first use: what a newly seen server certificate means for a capsule.

Gemini has no certificate authorities (spec §4: self-signed certificates are normal), so the
only signal a client has is continuity: the certificate pinned the first time a capsule was
seen should stay the same until it expires. A crawler is not a person who can be phished, so it
never refuses a page here; it records how the certificate changed, and a change *before* the
pinned certificate expired is the suspicious case that statistics and operators care about.

Pure on purpose: the store-side bookkeeping (pinning, writing certificate events) belongs to the
engine, and keeping the decision free of I/O lets every branch be tested by a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sextant.tls import CertificateFacts

FIRST_SEEN = "first-seen"
SAME = "same"
CHANGED_BEFORE_EXPIRY = "changed-before-expiry"
CHANGED_AFTER_EXPIRY = "changed-after-expiry"
VERDICT_KINDS = (FIRST_SEEN, SAME, CHANGED_BEFORE_EXPIRY, CHANGED_AFTER_EXPIRY)


@dataclass(frozen=True, slots=True)
class TofuVerdict:
    """How ``seen`` relates to the pinned certificate, with what a certificate event records."""

    kind: str
    fingerprint: str  # the certificate just seen (SHA-256 hex)
    previous_fingerprint: str | None = None  # the pinned one, when there was one

    def __post_init__(self) -> None:
        if self.kind not in VERDICT_KINDS:
            raise ValueError(f"unknown TOFU verdict {self.kind!r}")

    @property
    def is_event(self) -> bool:
        """Whether this deserves a row in ``certificate_events`` (everything but "same")."""
        return self.kind != SAME

    @property
    def is_suspicious(self) -> bool:
        """A replaced certificate that was still valid: the pattern of an impersonation."""
        return self.kind == CHANGED_BEFORE_EXPIRY


def judge(
    known_fingerprint: str | None,
    known_not_after: datetime | None,
    seen: CertificateFacts,
    now: datetime,
) -> TofuVerdict:
    """Compare the certificate just ``seen`` with the pinned one.

    ``known_not_after`` and ``now`` are naive UTC like everything in the store (aware values
    are converted). A pin without a known expiry cannot prove that the old certificate had run
    out, so a change is then treated as before expiry: the cautious reading.
    """
    seen_fingerprint = seen.fingerprint_sha256.lower()
    if known_fingerprint is None:
        return TofuVerdict(FIRST_SEEN, seen_fingerprint)
    known = known_fingerprint.lower()
    if known == seen_fingerprint:
        return TofuVerdict(SAME, seen_fingerprint, known)
    if known_not_after is not None and _naive_utc(now) > _naive_utc(known_not_after):
        return TofuVerdict(CHANGED_AFTER_EXPIRY, seen_fingerprint, known)
    return TofuVerdict(CHANGED_BEFORE_EXPIRY, seen_fingerprint, known)


def _naive_utc(moment: datetime) -> datetime:
    if moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None)
    return moment
