"""What storing one fetch record will do to its page, worked out before any write.

The page's new state and columns follow from the answer: a failure or a 4x keeps what an
earlier fetch stored, a 2x brings content, a 3x a redirect to follow through the frontier
(loops caught, at most five hops, §3.2.3), other families leave no content. The plan also
gathers the link and redirect targets the batch will look up and create together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, select

from crawler.content import ExtractedLink
from crawler.frontier import PAGES
from crawler.messages import MAX_REDIRECTS, FetchRecord
from sextant.errors import InvalidURL
from sextant.urls import GeminiURL, parse, resolve, scheme_of

_REDIRECT_OF = select(PAGES.c.state, PAGES.c.redirect_target).where(PAGES.c.url == bindparam("url"))
# States that have no content of their own: a page that becomes one of these loses its
# body and outbound links (a 51 page links nowhere any more).
_CONTENTLESS = frozenset({"input", "redirect", "gone", "certificate"})
_NO_CONTENT: dict[str, object] = {
    "charset": None,
    "charset_detected": False,
    "lang": None,
    "body": None,
    "title": None,
    "content_hash": None,
    "feed_kind": None,
    "duplicate_of_id": None,
    "links_dropped": 0,
}
_STATE_OF_FAMILY = {1: "input", 2: "ok", 3: "redirect", 5: "gone", 6: "certificate"}


@dataclass(slots=True)
class Target:
    url: GeminiURL
    depth: int
    reason: str = "link"
    redirects: int = 0


@dataclass(slots=True)
class Plan:
    """What storing one record will do, worked out before any write."""

    record: FetchRecord
    page: Row[*tuple[Any, ...]]
    url: GeminiURL
    values: dict[str, object]
    temporary: bool
    links: Sequence[ExtractedLink] | None = None  # None: the page's links stay as they are
    gemini: dict[str, GeminiURL] = field(default_factory=dict)


class Planner:
    """Plans the records of one batch; redirects planned earlier in it count for the loop
    check of later ones, before any of them is stored."""

    def __init__(self, conn: Connection, now: datetime) -> None:
        self.conn = conn
        self.now = now
        self._redirects: dict[str, tuple[str, str | None]] = {}

    def plan(
        self, record: FetchRecord, page: Row[*tuple[Any, ...]], targets: dict[str, Target]
    ) -> Plan:
        url = parse(page.url)
        # A header followed by a failure (a drip cut mid-body, a 2x whose meta is no MIME
        # type) is a failed fetch: the attempt keeps the header, the page does not.
        status = record.status if record.error_kind is None else None
        family = status // 10 if status is not None else None
        values: dict[str, object] = {
            "fetched_at": self.now,
            "status": status,
            "meta": record.meta if status is not None else None,
            "error_kind": record.error_kind,
            "error_message": record.error_message,
        }
        temporary = family is None or family == 4
        if temporary:
            # No answer, or "try later": keep what an earlier fetch stored.
            state = "ok" if page.state == "ok" else "error"
            values["consecutive_failures"] = page.consecutive_failures + 1
            if family == 4 and record.error_kind is None:
                values["error_kind"] = "slow-down" if status == 44 else "temporary-failure"
                values["error_message"] = f"{status} {record.meta or ''}".strip()
            if state == "ok":
                # The stored body is still the page's; status/meta describe that body.
                del values["status"], values["meta"]
        else:
            values["consecutive_failures"] = 0
            state = _STATE_OF_FAMILY[family]  # type: ignore[index]
        plan = Plan(record, page, url, values, temporary)
        if state in _CONTENTLESS:
            values.update(
                _NO_CONTENT,
                mime=None,
                size=None,
                truncated=False,
                possibly_truncated=False,
                redirect_target=None,
            )
            plan.links = ()
        if family == 2:
            self._success(plan)
        elif family == 3:
            state = self._redirect(plan, targets)
        elif family == 1:
            values["error_kind"] = None
        values["state"] = state
        if plan.links:
            depth = page.depth + 1
            for link in plan.links:
                if link.scheme != "gemini":
                    continue
                try:
                    parsed = parse(link.url)
                except InvalidURL:
                    continue
                plan.gemini[link.url] = parsed
                known = targets.get(link.url)
                if known is None:
                    targets[link.url] = Target(parsed, depth)
                elif depth < known.depth:
                    known.depth = depth
        return plan

    @staticmethod
    def _success(plan: Plan) -> None:
        record = plan.record
        content = record.content
        plan.values.update(
            mime=record.mime,
            size=None if record.body_skipped else record.size,
            truncated=record.truncated,
            possibly_truncated=record.possibly_truncated,
            redirect_target=None,
            error_kind=None,
            error_message=None,
        )
        if content is None:
            plan.values.update(_NO_CONTENT)
            plan.links = ()
            return
        plan.values.update(
            charset=content.charset,
            charset_detected=content.charset_detected,
            lang=content.lang,
            body=content.text,
            title=content.title,
            content_hash=content.content_hash,
            feed_kind=content.feed_kind,
            links_dropped=content.dropped_links,
        )
        plan.links = content.links

    def _redirect(self, plan: Plan, targets: dict[str, Target]) -> str:
        """Record a 3x and plan to queue its target; return the page's state.

        Redirects are followed through the frontier, so a target on another capsule waits
        for that capsule's politeness like any URL. Loops are caught by walking the stored
        chain of redirect targets; a chain longer than five hops ends in an error (§3.2.3).
        """
        values = plan.values
        origin = plan.page.url
        try:
            target = resolve(plan.url, plan.record.meta or "")
        except InvalidURL as exc:
            values.update(error_kind="bad-redirect", error_message=str(exc))
            return "error"
        values["redirect_target"] = target
        if scheme_of(target) != "gemini":
            values.update(
                error_kind=None,
                error_message=f"redirect to another scheme ({scheme_of(target)}:) not followed",
            )
            self._redirects[origin] = ("redirect", target)
            return "redirect"
        if target == origin or self._leads_back(target, origin):
            values.update(error_kind="redirect-loop", error_message=f"redirect loop via {target}")
            self._redirects[origin] = ("error", target)
            return "error"
        hops = plan.record.item.redirects + 1
        if hops > MAX_REDIRECTS:
            values.update(
                error_kind="too-many-redirects",
                error_message=f"more than {MAX_REDIRECTS} redirects in a row",
            )
            self._redirects[origin] = ("error", target)
            return "error"
        # Redirects do not lead deeper into a capsule: the target keeps the page's depth.
        targets[target] = Target(parse(target), plan.page.depth, "redirect", hops)
        values["error_kind"] = None
        self._redirects[origin] = ("redirect", target)
        return "redirect"

    def _leads_back(self, target: str, origin: str) -> bool:
        current = target
        for _ in range(MAX_REDIRECTS + 1):
            known = self._redirects.get(current)
            if known is None:
                row = self.conn.execute(_REDIRECT_OF, {"url": current}).one_or_none()
                known = None if row is None else (row.state, row.redirect_target)
            if known is None or known[1] is None or known[0] not in ("redirect", "error"):
                return False
            if known[1] == origin:
                return True
            current = known[1]
        return False
