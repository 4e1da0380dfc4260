"""What Geminispace is made of, as the store knows it: the facts a survey reports.

One read-only pass of aggregate queries, shared by ``sextant graph stats`` and the search
capsule's statistics page so both always say the same thing. Every figure is computed by
the database (GROUP BY), never by loading rows, so a census of millions of pages stays cheap
in memory. Breakdowns are ``((label, count), ...)`` sorted by count, largest first (ties by
label), except :attr:`Census.page_sizes`, which keeps its buckets in size order.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from sextant.store.engine import utcnow
from sextant.store.models import Capsule, CertificateEvent, Link, Page, Run

Breakdown = tuple[tuple[str, int], ...]

#: Certificates this close to their end are "expiring soon" unless the caller says otherwise.
SOON = timedelta(days=30)

#: Upper bounds (exclusive, bytes) of the page-size buckets and their labels.
SIZE_BUCKETS: tuple[tuple[int | None, str], ...] = (
    (1, "0 B"),
    (1 << 10, "1 B-1 KiB"),
    (10 << 10, "1-10 KiB"),
    (100 << 10, "10-100 KiB"),
    (1 << 20, "100 KiB-1 MiB"),
    (10 << 20, "1-10 MiB"),
    (None, ">= 10 MiB"),
)

#: Gemini status families (gemini://geminiprotocol.net/docs/protocol-specification.gmi, 3.2).
STATUS_FAMILIES = {
    1: "1x input",
    2: "2x success",
    3: "3x redirect",
    4: "4x temporary failure",
    5: "5x permanent failure",
    6: "6x client certificate",
}
NO_RESPONSE = "no response"  # fetched, but the fetch failed before a header arrived
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The latest run of one kind (crawl, index); ``figures`` is its JSON ``stats``."""

    kind: str
    started_at: datetime
    finished_at: datetime | None
    figures: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def duration(self) -> timedelta | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


@dataclass(frozen=True, slots=True)
class Census:
    taken_at: datetime
    pages: int
    pages_by_state: Breakdown
    capsules: int
    capsules_reached: int  # at least one successful fetch
    links: int
    links_within_capsule: int
    links_across_capsules: int
    links_other_schemes: int
    links_by_scheme: Breakdown  # every scheme, gemini included
    mime_types: Breakdown  # pages that answered 2x
    languages: Breakdown  # ok text pages; "unknown" when neither declared nor detected
    charsets: Breakdown  # ok text pages
    status_families: Breakdown  # fetched pages
    statuses: Breakdown  # fetched pages, exact two-digit codes
    page_sizes: Breakdown  # in bucket order, not by count
    tls_versions: Breakdown  # capsules whose certificate we have seen
    certificate_key_types: Breakdown
    certificate_signers: Breakdown  # self-signed vs CA-signed
    certificates: int
    certificates_expired: int
    certificates_expiring_soon: int  # valid now, but ending within ``soon_days``
    soon_days: int
    certificate_events: Breakdown  # by kind: first-seen, changed-before-expiry, ...
    certificate_changes: int  # every event except a first sighting
    last_runs: tuple[RunSummary, ...]  # the latest of each kind, by kind

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form: breakdowns become ordered objects, datetimes ISO 8601 strings."""
        result: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "last_runs":
                value = [_run_as_dict(run) for run in value]
            elif isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, tuple):
                value = dict(value)
            result[name] = value
        return result


def census(session: Session, *, now: datetime | None = None, soon: timedelta = SOON) -> Census:
    """Take the census. ``now`` (naive UTC) decides what counts as expired; default: the clock."""
    now = now or utcnow()
    pages_by_state = _breakdown(
        session.execute(select(Page.state, func.count()).group_by(Page.state))
    )
    links = _link_totals(session)
    statuses, families = _statuses(session)
    tls = _tls(session, now, soon)
    events = _breakdown(
        session.execute(select(CertificateEvent.kind, func.count()).group_by(CertificateEvent.kind))
    )
    text_ok = (Page.state == "ok") & Page.mime.like("text/%")
    return Census(
        taken_at=now,
        pages=sum(count for _, count in pages_by_state),
        pages_by_state=pages_by_state,
        capsules=session.scalar(select(func.count()).select_from(Capsule)) or 0,
        capsules_reached=session.scalar(
            select(func.count()).where(Capsule.last_success_at.is_not(None))
        )
        or 0,
        links=sum(count for _, count in links["by_scheme"]),
        links_within_capsule=links["within"],
        links_across_capsules=links["across"],
        links_other_schemes=links["other"],
        links_by_scheme=links["by_scheme"],
        mime_types=_breakdown(
            session.execute(
                select(Page.mime, func.count()).where(Page.mime.is_not(None)).group_by(Page.mime)
            )
        ),
        languages=_breakdown(
            session.execute(select(Page.lang, func.count()).where(text_ok).group_by(Page.lang))
        ),
        charsets=_breakdown(
            session.execute(
                select(Page.charset, func.count()).where(text_ok).group_by(Page.charset)
            )
        ),
        status_families=families,
        statuses=statuses,
        page_sizes=_page_sizes(session),
        tls_versions=tls["versions"],
        certificate_key_types=tls["key_types"],
        certificate_signers=tls["signers"],
        certificates=tls["total"],
        certificates_expired=tls["expired"],
        certificates_expiring_soon=tls["soon"],
        soon_days=soon.days,
        certificate_events=events,
        certificate_changes=sum(count for kind, count in events if kind != "first-seen"),
        last_runs=_last_runs(session),
    )


def _breakdown(rows: Iterable[Any]) -> Breakdown:
    counts: Counter[str] = Counter()
    for label, count in rows:
        counts[UNKNOWN if label is None or label == "" else str(label)] += count
    return ranked_breakdown(counts)


def ranked_breakdown(counts: Mapping[str, int]) -> Breakdown:
    """Labels by count, largest first, ties by label, zeros left out."""
    return tuple(sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0])))


def _link_totals(session: Session) -> dict[str, Any]:
    rows = session.execute(
        select(Link.target_scheme, Link.cross_capsule, func.count()).group_by(
            Link.target_scheme, Link.cross_capsule
        )
    ).all()
    by_scheme: Counter[str] = Counter()
    within = across = other = 0
    for scheme, cross, count in rows:
        by_scheme[scheme or UNKNOWN] += count
        if scheme != "gemini":
            other += count
        elif cross:
            across += count
        else:
            within += count
    return {
        "by_scheme": ranked_breakdown(by_scheme),
        "within": within,
        "across": across,
        "other": other,
    }


def _statuses(session: Session) -> tuple[Breakdown, Breakdown]:
    rows = session.execute(
        select(Page.status, func.count())
        .where(Page.fetched_at.is_not(None) | Page.status.is_not(None))
        .group_by(Page.status)
    ).all()
    statuses: Counter[str] = Counter()
    families: Counter[str] = Counter()
    for status, count in rows:
        if status is None:
            statuses[NO_RESPONSE] += count
            families[NO_RESPONSE] += count
            continue
        statuses[str(status)] += count
        families[STATUS_FAMILIES.get(status // 10, f"{status // 10}x other")] += count
    return ranked_breakdown(statuses), ranked_breakdown(families)


def _page_sizes(session: Session) -> Breakdown:
    whens = []
    for index, (bound, _) in enumerate(SIZE_BUCKETS):
        if bound is not None:
            whens.append((Page.size < bound, index))
    bucket = case(*whens, else_=len(SIZE_BUCKETS) - 1)
    rows = session.execute(
        select(bucket.label("bucket"), func.count())
        .where(Page.size.is_not(None))
        .group_by("bucket")
    ).all()
    counts = dict(rows)
    return tuple((label, counts.get(index, 0)) for index, (_, label) in enumerate(SIZE_BUCKETS))


def _tls(session: Session, now: datetime, soon: timedelta) -> dict[str, Any]:
    seen = Capsule.tls_fingerprint.is_not(None)
    versions = _breakdown(
        session.execute(
            select(Capsule.tls_version, func.count()).where(seen).group_by(Capsule.tls_version)
        )
    )
    key_types = _breakdown(
        session.execute(
            select(Capsule.tls_key_type, func.count()).where(seen).group_by(Capsule.tls_key_type)
        )
    )
    signer_rows = session.execute(
        select(Capsule.tls_self_signed, func.count()).where(seen).group_by(Capsule.tls_self_signed)
    ).all()
    signer_labels = {True: "self-signed", False: "CA-signed", None: UNKNOWN}
    signers = ranked_breakdown(
        Counter({signer_labels[_bool_or_none(v)]: n for v, n in signer_rows})
    )
    expired = session.scalar(select(func.count()).where(seen, Capsule.tls_not_after < now))
    expiring = session.scalar(
        select(func.count()).where(
            seen, Capsule.tls_not_after >= now, Capsule.tls_not_after < now + soon
        )
    )
    return {
        "versions": versions,
        "key_types": key_types,
        "signers": signers,
        "total": sum(count for _, count in versions),
        "expired": expired or 0,
        "soon": expiring or 0,
    }


def _bool_or_none(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _last_runs(session: Session) -> tuple[RunSummary, ...]:
    latest = (
        select(Run.kind, func.max(Run.started_at).label("started_at")).group_by(Run.kind).subquery()
    )
    rows = session.scalars(
        select(Run)
        .join(latest, (Run.kind == latest.c.kind) & (Run.started_at == latest.c.started_at))
        .order_by(Run.kind, Run.id.desc())
    )
    runs: dict[str, Run] = {}
    for run in rows:  # two runs of a kind may share a start time: the later row wins
        runs.setdefault(run.kind, run)
    return tuple(
        RunSummary(
            kind=run.kind,
            started_at=run.started_at,
            finished_at=run.finished_at,
            figures=MappingProxyType(_figures(run.stats)),
        )
        for run in runs.values()
    )


def _figures(stats: str | None) -> dict[str, Any]:
    """A run's JSON figures; anything unreadable becomes an empty mapping, not a broken page."""
    if not stats:
        return {}
    try:
        value = json.loads(stats)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _run_as_dict(run: RunSummary) -> dict[str, Any]:
    return {
        "kind": run.kind,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "figures": dict(run.figures),
    }
