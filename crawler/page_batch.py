"""Storing a batch of fetched pages with a fixed number of statements, whatever its size.

What one page needs (its row read, its link targets looked up and created, its links
replaced, its row updated, duplicates found) is done for the whole batch at once: one query
reads every page, one looks up every link target, one inserts every new page, one every
link... Per page, the writer then costs a few rows inside statements rather than a dozen
round trips, each of which also hands the GIL back and forth with the event loop (measured:
the writer's CPU per page fell by half). The result is exactly what storing the pages one
after the other would give: pages earlier in the batch are seen by later ones through
small in-memory overlays (new targets, redirects, content hashes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, bindparam, delete, insert, select, update

from crawler.admission import ADMITTED, EXCLUDED, Admission
from crawler.content import MAX_LINKS_PER_PAGE
from crawler.frontier import MAX_RECRAWL, PAGES, PRIORITY_LINK, PRIORITY_REDIRECT, recrawl_interval
from crawler.messages import FetchRecord
from crawler.page_plan import Plan, Planner, Target
from crawler.transaction import Transaction, WriterStats
from crawler.url_rows import (
    CapsuleIds,
    Enqueue,
    NewPage,
    PageRef,
    enqueue,
    find_pages,
    insert_pages,
)
from sextant.protocol import Status
from sextant.store import Link
from sextant.store.batches import in_batches
from sextant.urls import scope_of

LINKS = Link.__table__
# A writer batch is stored in groups of pages carrying at most this many links together (a
# page alone may carry up to MAX_LINKS_PER_PAGE): 64 pages at the cap would otherwise put
# 128,000 links, their targets and their rows in memory at once. Storing group after group
# in one transaction gives what storing page after page would.
LINKS_PER_GROUP = 2 * MAX_LINKS_PER_PAGE

_SELECT_PAGES = select(
    PAGES.c.id,
    PAGES.c.url,
    PAGES.c.capsule_id,
    PAGES.c.depth,
    PAGES.c.state,
    PAGES.c.status,
    PAGES.c.meta,
    PAGES.c.title,
    PAGES.c.lang,
    PAGES.c.content_hash,
    PAGES.c.redirect_target,
    PAGES.c.duplicate_of_id,
    PAGES.c.fetched_at,
    PAGES.c.next_crawl_at,
    PAGES.c.change_count,
    PAGES.c.consecutive_failures,
).where(PAGES.c.id.in_(bindparam("ids", expanding=True)))
_UPDATE_PAGE = update(PAGES).where(PAGES.c.id == bindparam("pid"))  # SET from the parameters
_TOUCH_PAGES = (
    update(PAGES)
    .where(PAGES.c.id.in_(bindparam("ids", expanding=True)))
    .values(updated_at=bindparam("now"))
)
# Any page with the same body: content_hash is only kept on pages with content. (Adding a
# condition on state made SQLite use the state index and scan every ok page.)
_WITH_HASHES = select(PAGES.c.id, PAGES.c.content_hash).where(
    PAGES.c.content_hash.in_(bindparam("hashes", expanding=True))
)
_SELECT_LINKS = select(
    LINKS.c.source_id,
    LINKS.c.target_url,
    LINKS.c.target_id,
    LINKS.c.label,
    LINKS.c.position,
    LINKS.c.first_seen_at,
).where(LINKS.c.source_id.in_(bindparam("ids", expanding=True)))
_DELETE_LINKS = delete(LINKS).where(LINKS.c.source_id.in_(bindparam("ids", expanding=True)))
_INSERT_LINKS = insert(LINKS)

# Columns whose change the index shows: a change moves updated_at, the indexer's watermark.
_VISIBLE = (
    "state",
    "status",
    "meta",
    "title",
    "lang",
    "content_hash",
    "redirect_target",
    "duplicate_of_id",
)


def _groups(records: Sequence[FetchRecord]) -> list[Sequence[FetchRecord]]:
    """Consecutive runs of records whose links add up to at most ``LINKS_PER_GROUP``."""
    groups: list[Sequence[FetchRecord]] = []
    start, links = 0, 0
    for index, record in enumerate(records):
        count = len(record.content.links) if record.content is not None else 0
        if index > start and links + count > LINKS_PER_GROUP:
            groups.append(records[start:index])
            start, links = index, 0
        links += count
    if start < len(records):
        groups.append(records[start:])
    return groups


class PageBatch:
    """Stores fetch records inside the writer's transaction (see :meth:`Writer.commit`)."""

    def __init__(
        self, tx: Transaction, admission: Admission, capsules: CapsuleIds, stats: WriterStats
    ) -> None:
        self.tx = tx
        self.conn = tx.conn
        self.now = tx.now
        self.admission = admission
        self.capsules = capsules
        self.stats = stats
        self.planner = Planner(tx.conn, tx.now)

    def store(self, records: Sequence[FetchRecord]) -> None:
        for group in _groups(records):
            self._store(group)

    def _store(self, records: Sequence[FetchRecord]) -> None:
        pages = self._load_pages([record.item.page_id for record in records])
        plans: list[Plan] = []
        targets: dict[str, Target] = {}
        for record in records:
            page = pages.get(record.item.page_id)
            if page is None:  # deleted while we fetched it
                self.tx.finish_row(record.item.id)
                continue
            plan = self.planner.plan(record, page, targets)
            plans.append(plan)
        refs, created = self._ensure_targets(targets)
        self._links(plans, refs, created)
        self._duplicates(plans)
        self._update_pages(plans)
        for plan in plans:
            self._after(plan)

    # --- planning ----------------------------------------------------------------------------

    def _load_pages(self, ids: list[int]) -> dict[int, Row[*tuple[Any, ...]]]:
        found: dict[int, Row[*tuple[Any, ...]]] = {}
        for chunk in in_batches(ids):
            for row in self.conn.execute(_SELECT_PAGES, {"ids": list(chunk)}):
                found[row.id] = row
        return found

    # --- targets -----------------------------------------------------------------------------

    def _ensure_targets(self, targets: dict[str, Target]) -> tuple[dict[str, PageRef], set[int]]:
        """Pages for every link and redirect target of the batch, created when new; frontier
        rows for those never fetched, not queued yet, and admitted."""
        if not targets:
            return {}, set()
        conn = self.conn
        refs = find_pages(conn, targets.keys())
        fresh: list[NewPage] = []
        admitted: set[str] = set()
        for text, target in targets.items():
            if text in refs:
                continue
            verdict = self.admission.judge(conn, target.url, target.depth)
            if verdict.kind == EXCLUDED:
                fresh.append(NewPage(target.url, target.depth, EXCLUDED, verdict.reason))
            else:
                fresh.append(NewPage(target.url, target.depth))
                if verdict.kind == ADMITTED:
                    admitted.add(text)
        queue: list[Enqueue] = []
        for ref in refs.values():
            # Known pages never fetched and not queued: from a run with other limits, or
            # outside --allow-host then. Already in the store, so already counted against
            # the caps: only the static checks (host, depth, rules) apply.
            if ref.state != "new" or ref.fetched_at is not None or ref.queued:
                continue
            target = targets[ref.url]
            if self.admission.static(target.url, target.depth).admitted:
                queue.append(_entry(ref, target))
        created = insert_pages(conn, fresh, self.capsules, self.now)
        self.stats.new_pages += len(created)
        refs.update(created)
        queue.extend(
            _entry(ref, targets[text]) for text, ref in created.items() if text in admitted
        )
        enqueue(conn, queue, self.now)
        self.stats.enqueued += len(queue)
        return refs, {ref.id for ref in created.values()}

    # --- links -------------------------------------------------------------------------------

    def _links(self, plans: list[Plan], refs: dict[str, PageRef], created: set[int]) -> None:
        """Swap each page's outbound links for its new ones; bump ``updated_at`` of targets
        whose inbound anchors changed (the indexer's watermark then picks up their new or
        lost anchor text)."""
        relinked = [plan for plan in plans if plan.links is not None]
        fetched_before = [plan.page.id for plan in relinked if plan.page.fetched_at is not None]
        old: dict[int, list[Row[*tuple[Any, ...]]]] = {}
        for chunk in in_batches(fetched_before):
            for row in self.conn.execute(_SELECT_LINKS, {"ids": list(chunk)}):
                old.setdefault(row.source_id, []).append(row)
        # Only pages the index may hold need to know: one never fetched has nothing indexed
        # yet (and one created just now carries updated_at = now anyway).
        unfetched = {ref.id for ref in refs.values() if ref.fetched_at is None} | created
        replaced: list[int] = []
        rows: list[dict[str, object]] = []
        touched: set[int] = set()
        for plan in relinked:
            page_id = plan.page.id
            previous = old.get(page_id, [])
            links = plan.links or ()
            new_triples = sorted((link.url, link.label, link.position) for link in links)
            if new_triples == sorted((row.target_url, row.label, row.position) for row in previous):
                continue
            if previous:
                replaced.append(page_id)
            first_seen = {row.target_url: row.first_seen_at for row in previous}
            source_scope = scope_of(plan.url)
            after: dict[int, set[str]] = {}
            for link in links:
                target = refs.get(link.url)
                parsed = plan.gemini.get(link.url)
                target_id = target.id if target is not None else None
                rows.append(
                    {
                        "source_id": page_id,
                        "target_url": link.url,
                        "target_id": target_id,
                        "target_scheme": link.scheme,
                        "label": link.label,
                        "position": link.position,
                        "cross_capsule": parsed is None or scope_of(parsed) != source_scope,
                        "first_seen_at": first_seen.get(link.url, self.now),
                    }
                )
                if target_id is not None:
                    after.setdefault(target_id, set()).add(link.label)
            before: dict[int, set[str]] = {}
            for row in previous:
                if row.target_id is not None:
                    before.setdefault(row.target_id, set()).add(row.label)
            touched.update(
                target
                for target in before.keys() | after.keys()
                if before.get(target) != after.get(target)
                and target != page_id
                and target not in unfetched
            )
        for chunk in in_batches(replaced):
            self.conn.execute(_DELETE_LINKS, {"ids": list(chunk)})
        if rows:
            self.conn.execute(_INSERT_LINKS, rows)
        for chunk in in_batches(sorted(touched)):
            self.conn.execute(_TOUCH_PAGES, {"ids": list(chunk), "now": self.now})

    # --- duplicates and the page rows ----------------------------------------------------------

    def _duplicates(self, plans: list[Plan]) -> None:
        """``duplicate_of_id``: the first page (lowest id) with the same body, if any."""
        hashes = {
            str(plan.values["content_hash"]) for plan in plans if plan.values.get("content_hash")
        }
        if not hashes:
            return
        in_batch = {plan.page.id for plan in plans}
        first: dict[str, int] = {}
        for chunk in in_batches(sorted(hashes)):
            for row in self.conn.execute(_WITH_HASHES, {"hashes": list(chunk)}):
                if row.id in in_batch:  # its stored hash may be about to change
                    continue
                if row.content_hash not in first or row.id < first[row.content_hash]:
                    first[row.content_hash] = row.id
        for plan in plans:
            digest = plan.values.get("content_hash")
            if not digest:
                continue
            page_id = plan.page.id
            original = first.get(str(digest))
            plan.values["duplicate_of_id"] = (
                original if original is not None and original < page_id else None
            )
            if original is None or page_id < original:
                first[str(digest)] = page_id

    def _update_pages(self, plans: list[Plan]) -> None:
        groups: dict[tuple[str, ...], list[dict[str, object]]] = {}
        for plan in plans:
            values = plan.values
            page = plan.page
            state = values["state"]
            new_hash = values.get("content_hash", page.content_hash)
            changed = (
                page.fetched_at is None or new_hash != page.content_hash or state != page.state
            )
            if changed:
                values["changed_at"] = self.now
                if page.fetched_at is not None:
                    values["change_count"] = page.change_count + 1
            if not plan.temporary or plan.record.retry_at is None:
                previous = (
                    page.next_crawl_at - page.fetched_at
                    if page.next_crawl_at is not None and page.fetched_at is not None
                    else None
                )
                if state == "redirect" and values["status"] == Status.REDIRECT_PERMANENT:
                    # Moved for good: never asked again, its target carries the recrawl
                    # (sextant.store.redirects).
                    values["next_crawl_at"] = None
                else:
                    interval = (
                        MAX_RECRAWL if state == "gone" else recrawl_interval(previous, changed)
                    )
                    values["next_crawl_at"] = self.now + interval
            if any(key in values and values[key] != getattr(page, key) for key in _VISIBLE):
                values["updated_at"] = self.now
            groups.setdefault(tuple(sorted(values)), []).append({"pid": page.id, **values})
        for params in groups.values():
            self.conn.execute(_UPDATE_PAGE, params)

    def _after(self, plan: Plan) -> None:
        """The attempt, the capsule's facts and the frontier row (gathered by the transaction)."""
        record = plan.record
        tx = self.tx
        tx.add_attempt(
            {
                "page_id": plan.page.id,
                "started_at": record.started_at,
                "duration": record.duration,
                "address": record.address,
                "status": record.status,
                "meta": record.meta,
                "error_kind": plan.values["error_kind"],
                "error_message": plan.values["error_message"],
                "bytes_read": record.bytes_read,
                "possibly_truncated": record.possibly_truncated,
            }
        )
        tx.update_capsule(plan.page.capsule_id, self.now, record)
        if record.retry_at is not None:
            tx.retry_row(record.item.id, record.retry_at, held=record.held)
        else:
            tx.finish_row(record.item.id)
        if record.parked_until is not None:
            tx.defer_capsule(plan.page.capsule_id, record.parked_until)


def _entry(ref: PageRef, target: Target) -> Enqueue:
    if target.reason == "redirect":
        return Enqueue(
            ref.id, ref.capsule_id, target.depth, "redirect", PRIORITY_REDIRECT, target.redirects
        )
    return Enqueue(ref.id, ref.capsule_id, target.depth, "link", PRIORITY_LINK)
