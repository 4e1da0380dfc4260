"""Seeds proposed by visitors: check the URL, then leave it in the store's inbox.

The capsule never crawls anything itself; it records a ``SeedRequest`` (source
``"capsule"``) that the next crawl picks up. Because anyone can submit, the checks are
strict: only gemini:// URLs on public host names and the Gemini port, since a seed naming
``localhost``, a private address or another port would turn our crawler into a way to probe
the machine it runs on. Numeric hosts are read the way the system resolver reads them
(``127.1`` and ``0x7f.0.0.1`` are loopback); names that resolve to private addresses are the
crawler's to refuse, when it resolves them (crawler/resolver.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from search_capsule.user_input import typed_url
from sextant import urls
from sextant.addresses import classify, numeric_host
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


#: The ports seeds may name unless the operator allows more (``sextant serve --seed-port``).
DEFAULT_SEED_PORTS = frozenset({urls.DEFAULT_PORT})

# Names that only mean something on a local network (RFC 6761, RFC 6762, RFC 8375...).
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa", ".lan")


def validate_seed(raw: str, *, ports: Collection[int] = DEFAULT_SEED_PORTS) -> str:
    """The canonical URL for what a visitor typed, or :class:`InvalidURL` saying why not.

    A bare host name (``example.org``) is read as ``gemini://example.org/``: that is what
    people type into a prompt. Only ``ports`` are accepted: any other would let visitors
    point the crawler at services that are not capsules.
    """
    text = typed_url(raw)
    scheme = urls.scheme_of(text)
    if scheme != "gemini":
        raise InvalidURL(f"only gemini:// URLs can be crawled, not {scheme}: URLs")
    url = urls.parse(text)
    _require_public_host(url.host)
    if url.port not in ports:
        allowed = ", ".join(str(port) for port in sorted(ports))
        raise InvalidURL(f"port {url.port} is not accepted here; seeds must use port {allowed}")
    return str(url)


def _require_public_host(host: str) -> None:
    if host == "localhost" or host.endswith(_LOCAL_SUFFIXES):
        raise InvalidURL(f"{host} is a local name; seeds must be reachable from the internet")
    address = numeric_host(host)
    if address is None:
        if "." not in host:
            raise InvalidURL(f"{host} is not a full host name (expected e.g. example.org)")
        last_label = host.rsplit(".", 1)[-1]
        if last_label.isdigit() or last_label.startswith("0x"):
            # No top-level domain is a number (RFC 3696 2): a mistyped or hostile address.
            raise InvalidURL(f"{host} looks like an IP address but is not a valid one")
        return
    reason = classify(address)
    if reason is not None:
        said = host if address.compressed == host else f"{host} (that is {address})"
        raise InvalidURL(
            f"{said} is not a public address: {reason}; seeds must be reachable by anyone"
        )


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
