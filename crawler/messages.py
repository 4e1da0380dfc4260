"""What workers tell the single writer: plain frozen values, nothing that touches the store.

Workers decide (politeness, retries, parking); the writer records. Keeping the decisions in
the messages means the writer needs no knowledge of timing rules, and a message can be
retried alone if its batch fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from crawler.content import Content
from crawler.frontier import FrontierItem
from sextant.tls import CertificateFacts

MAX_REDIRECTS = 5  # Gemini spec §3.2.3 (v0.16.1: clients should follow no more than 5)


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
    # The engine keeps the row leased and asks again itself at ``retry_at`` (a 44 it waits
    # out in this run): the row only learns its new due time and attempt, for show and for
    # a restart.
    held: bool = False
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
    user: str | None = None  # a pubnix user's /~user/robots.txt; None: the capsule's own


Message = FetchRecord | Skipped | Deferred | RobotsRecord
#: An exchange with a capsule, as far as the capsule's own record cares (TOFU, failures).
CapsuleContact = FetchRecord | RobotsRecord
