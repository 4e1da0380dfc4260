"""Seeds proposed by visitors: check the URL, then leave it in the store's inbox.

The capsule never crawls anything itself; it records a ``SeedRequest`` (source
``"capsule"``) that the next crawl picks up. Because anyone can submit, the checks are
strict: only gemini:// URLs on public host names, since a seed naming ``localhost`` or a
private address would turn our crawler into a way to probe the machine it runs on.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from search_capsule.user_input import typed_url
from sextant import urls
from sextant.errors import InvalidURL
from sextant.store.models import Page, SeedRequest

SOURCE = "capsule"

#: Pending seeds from the capsule beyond which new ones wait for a crawl to drain the inbox.
MAX_PENDING = 1000


class SeedOutcome(Enum):
    QUEUED = "queued"
    ALREADY_QUEUED = "already-queued"
    ALREADY_KNOWN = "already-known"
    INBOX_FULL = "inbox-full"


@dataclass(frozen=True, slots=True)
class SeedResult:
    url: str
    outcome: SeedOutcome


def validate_seed(raw: str) -> str:
    """The canonical URL for what a visitor typed, or :class:`InvalidURL` saying why not.

    A bare host name (``example.org``) is read as ``gemini://example.org/``: that is what
    people type into a prompt.
    """
    text = typed_url(raw)
    scheme = urls.scheme_of(text)
    if scheme != "gemini":
        raise InvalidURL(f"only gemini:// URLs can be crawled, not {scheme}: URLs")
    url = urls.parse(text)
    _require_public_host(url.host)
    return str(url)


def _require_public_host(host: str) -> None:
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        raise InvalidURL(f"{host} is a local name; seeds must be reachable from the internet")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if "." not in host:
            raise InvalidURL(
                f"{host} is not a full host name (expected e.g. example.org)"
            ) from None
        return
    if not address.is_global:
        raise InvalidURL(f"{host} is not a public address; seeds must be reachable by anyone")


def request_seed(session: Session, url: str, *, now: datetime) -> SeedResult:
    """Store a seed request for the canonical ``url`` unless it would change nothing."""
    pending = (SeedRequest.processed_at.is_(None)) & (SeedRequest.source == SOURCE)
    if session.scalar(select(SeedRequest.id).where(pending, SeedRequest.url == url).limit(1)):
        return SeedResult(url, SeedOutcome.ALREADY_QUEUED)
    if session.scalar(select(Page.id).where(Page.url == url, Page.state != "new").limit(1)):
        return SeedResult(url, SeedOutcome.ALREADY_KNOWN)
    if (session.scalar(select(func.count()).where(pending)) or 0) >= MAX_PENDING:
        return SeedResult(url, SeedOutcome.INBOX_FULL)
    session.add(SeedRequest(url=url, source=SOURCE, requested_at=now))
    session.commit()
    return SeedResult(url, SeedOutcome.QUEUED)
