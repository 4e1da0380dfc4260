"""Where a crawl starts: seeds, the seed inbox, pages due for a recrawl, and stragglers.

Seeds come from a seeds file (one URL per line, ``#`` comments), ``--seed`` options, and the
``seed_requests`` inbox that the search capsule fills when someone submits a capsule. A seed
already crawled is not fetched again (that is the recrawl's job), so running the same
command twice, or resuming a killed crawl, never asks a capsule for its seed page twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import ColumnElement, Connection, Engine, and_, exists, select, update

from crawler.admission import EXCLUDED, Admission
from crawler.frontier import (
    FRONTIER,
    PAGES,
    PRIORITY_LINK,
    PRIORITY_RECRAWL,
    PRIORITY_SEED,
    lock_frontier,
)
from crawler.rejudge import settle, settled_values
from crawler.url_rows import CapsuleIds, Enqueue, NewPage, enqueue, find_pages, insert_pages
from sextant.errors import ConfigError, InvalidURL
from sextant.store import SeedRequest, utcnow
from sextant.urls import GeminiURL, parse

SEED_REQUESTS = SeedRequest.__table__
_BATCH = 1000


@dataclass(frozen=True, slots=True)
class SeedOutcome:
    url: str
    outcome: str  # "queued", "already queued", "already crawled", "excluded: ...", ...


def read_seeds_file(path: Path) -> list[str]:
    """URLs of a seeds file; a line that is not a gemini URL stops everything with its line
    number, because a typo silently dropped would leave a capsule out of every crawl."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"seeds file {path} does not exist; create it (one gemini:// URL per line) "
            "or give seeds with --seed URL"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read seeds file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"seeds file {path} is not UTF-8 text") from None
    seeds: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            seeds.append(str(parse(line)))
        except InvalidURL as exc:
            raise ConfigError(f"{path}:{number}: {exc}") from None
    return seeds


def parse_seed(text: str) -> str:
    try:
        return str(parse(text))
    except InvalidURL as exc:
        raise ConfigError(f"--seed {text!r}: {exc}") from None


def enqueue_seeds(
    conn: Connection,
    seeds: Iterable[str],
    admission: Admission,
    capsules: CapsuleIds,
    now: datetime,
) -> list[SeedOutcome]:
    """Record each seed as a page (depth 0) and queue it unless crawled or queued already."""
    wanted: dict[str, GeminiURL] = {}
    for seed in seeds:
        url = parse(seed)
        wanted.setdefault(str(url), url)
    known = find_pages(conn, wanted.keys())
    outcomes: list[SeedOutcome] = []
    fresh: list[NewPage] = []
    admitted: set[str] = set()
    queue: list[Enqueue] = []
    for text, url in wanted.items():
        ref = known.get(text)
        if ref is not None and ref.queued:
            outcomes.append(SeedOutcome(text, "already queued"))
            continue
        if ref is not None and ref.fetched_at is not None:
            outcomes.append(SeedOutcome(text, "already crawled"))
            continue
        verdict = admission.judge(conn, url, 0)
        if not verdict.admitted:
            outcomes.append(SeedOutcome(text, f"{verdict.kind}: {verdict.reason}"))
            if ref is None:
                state = EXCLUDED if verdict.kind == EXCLUDED else "new"
                fresh.append(NewPage(url, 0, state, verdict.reason if state == EXCLUDED else None))
            continue
        outcomes.append(SeedOutcome(text, "queued"))
        if ref is None:
            fresh.append(NewPage(url, 0))
            admitted.add(text)
        else:
            if ref.state != "new" or ref.depth != 0:
                conn.execute(
                    update(PAGES)
                    .where(PAGES.c.id == ref.id)
                    .values(state="new", depth=0, error_kind=None, error_message=None)
                )
            queue.append(Enqueue(ref.id, ref.capsule_id, 0, "seed", PRIORITY_SEED))
    created = insert_pages(conn, fresh, capsules, now)
    queue.extend(
        Enqueue(ref.id, ref.capsule_id, 0, "seed", PRIORITY_SEED)
        for text, ref in created.items()
        if text in admitted
    )
    enqueue(conn, queue, now)
    return outcomes


def process_inbox(engine: Engine, admission: Admission, capsules: CapsuleIds) -> list[SeedOutcome]:
    """Take the unprocessed ``seed_requests``, queue them, and write down what happened."""
    now = utcnow()
    with engine.begin() as conn:
        lock_frontier(conn)
        rows = conn.execute(
            select(SEED_REQUESTS.c.id, SEED_REQUESTS.c.url)
            .where(SEED_REQUESTS.c.processed_at.is_(None))
            .order_by(SEED_REQUESTS.c.id)
            .limit(_BATCH)
        ).all()
        results: list[SeedOutcome] = []
        for row in rows:
            try:
                url = str(parse(row.url))
            except InvalidURL as exc:
                outcome = SeedOutcome(row.url, f"invalid: {exc}")
            else:
                outcome = enqueue_seeds(conn, [url], admission, capsules, now)[0]
            conn.execute(
                update(SEED_REQUESTS)
                .where(SEED_REQUESTS.c.id == row.id)
                .values(processed_at=now, outcome=outcome.outcome[:500])
            )
            results.append(outcome)
    return results


def enqueue_recrawls(engine: Engine, admission: Admission, now: datetime | None = None) -> int:
    """``--recrawl``: queue every page whose ``next_crawl_at`` has come (and is allowed by
    this run's limits, which are not counted again: the page is in the store already)."""
    now = now or utcnow()
    return _enqueue_pages(
        engine,
        admission,
        and_(PAGES.c.next_crawl_at <= now, PAGES.c.state != EXCLUDED),
        now,
        reason="recrawl",
        priority=PRIORITY_RECRAWL,
    )


def enqueue_stragglers(engine: Engine, admission: Admission, now: datetime | None = None) -> int:
    """Pages known but never fetched and not queued (recorded outside an earlier run's
    ``--allow-host``, or cut by a limit since raised) get queued if this run admits them."""
    now = now or utcnow()
    return _enqueue_pages(
        engine,
        admission,
        and_(PAGES.c.state == "new", PAGES.c.fetched_at.is_(None)),
        now,
    )


def _enqueue_pages(
    engine: Engine,
    admission: Admission,
    condition: ColumnElement[bool],
    now: datetime,
    *,
    reason: str = "link",
    priority: int = PRIORITY_LINK,
) -> int:
    """Queue the pages meeting ``condition`` that are not queued yet and this run admits,
    a batch per transaction (the frontier lock held only that long); how many. Pages this
    run's rules exclude become ``excluded`` (pages outside ``--allow-host`` just wait)."""
    queued = 0
    last_id = 0
    while True:
        with engine.begin() as conn:
            lock_frontier(conn)
            rows = conn.execute(
                select(PAGES.c.id, PAGES.c.url, PAGES.c.capsule_id, PAGES.c.depth)
                .where(
                    PAGES.c.id > last_id,
                    condition,
                    ~exists().where(FRONTIER.c.page_id == PAGES.c.id),
                )
                .order_by(PAGES.c.id)
                .limit(_BATCH)
            ).all()
            if not rows:
                return queued
            last_id = rows[-1].id
            entries = []
            refused: dict[str, list[int]] = defaultdict(list)
            for row in rows:
                try:
                    url = parse(row.url)
                except InvalidURL:
                    continue
                verdict = admission.static(url, row.depth)
                if verdict.admitted:
                    entries.append(Enqueue(row.id, row.capsule_id, row.depth, reason, priority))
                elif verdict.kind == EXCLUDED:
                    # A rule or limit set since the page was stored: it leaves the index now,
                    # not at a recrawl that will never come.
                    refused[verdict.reason or EXCLUDED].append(row.id)
            for why, ids in refused.items():
                settle(conn, ids, settled_values(EXCLUDED, why, now))
            enqueue(conn, entries, now)
            queued += len(entries)
