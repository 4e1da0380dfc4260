"""Which URLs may enter the frontier, and why the others may not.

Every URL reaches the frontier through :meth:`Admission.judge` (seeds, links, redirect
targets, recrawls), so the limits that keep a crawl finite hold whatever the path:
``--allow-host``, the depth cap, exclusion rules, trap heuristics, the per-capsule page cap
and the cap on query-string URLs per path. A refused URL is still recorded as a page, with
the reason in ``error_message``, so people can see why something is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from sqlalchemy import Connection, func, select

from crawler.options import CrawlOptions
from crawler.traps import ExclusionRule, Exclusions, looks_like_trap
from sextant.store import Page
from sextant.urls import GeminiURL, scope_of

PAGES = Page.__table__

ADMITTED = "admitted"
OUTSIDE = "outside"  # another host than --allow-host names: recorded, never contacted
EXCLUDED = "excluded"


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # ADMITTED, OUTSIDE or EXCLUDED
    reason: str | None = None

    @property
    def admitted(self) -> bool:
        return self.kind == ADMITTED


_ADMIT = Verdict(ADMITTED)


def exclusion_reason(rule: ExclusionRule) -> str:
    """What a page excluded by ``rule`` says in ``error_message`` (and ``sextant show``)."""
    return f"exclusion rule {rule.pattern} ({rule.source}): {rule.reason}"


def load_exclusions(options: CrawlOptions) -> Exclusions:
    rules = Exclusions.default()
    if options.exclude_file is not None:
        rules = rules.merged(Exclusions.from_file(options.exclude_file))
    return rules


class Admission:
    """The limits of one run.

    The two counting caps are kept in memory per scope and per path, initialized from the
    store on first use; the single writer is the only one to admit URLs, so the counts stay
    exact within a process (with several workers each counts its own admissions on top of
    what the store held, which can overshoot a cap by a few pages, never by an order).
    """

    def __init__(
        self, options: CrawlOptions, exclusions: Exclusions, *, today: date | None = None
    ) -> None:
        self.options = options
        self.exclusions = exclusions
        self.today = today
        self._scope_counts: dict[str, int] = {}
        self._query_counts: dict[str, int] = {}

    def static(self, url: GeminiURL, depth: int) -> Verdict:
        """The checks that need no counting: host, depth, rules, traps."""
        if not self.options.allow_hosts.allows(url.host, url.port):
            return Verdict(OUTSIDE, "outside --allow-host")
        if depth > self.options.max_depth:
            return Verdict(
                EXCLUDED, f"depth cap: {depth} links from a seed (limit {self.options.max_depth})"
            )
        rule = self.exclusions.match(url)
        if rule is not None:
            return Verdict(EXCLUDED, exclusion_reason(rule))
        trap = looks_like_trap(url, today=self.today)
        if trap is not None:
            return Verdict(EXCLUDED, f"looks like a trap: {trap}")
        return _ADMIT

    def judge(self, conn: Connection, url: GeminiURL, depth: int) -> Verdict:
        """:meth:`static`, then the caps; an admitted URL is counted against them."""
        verdict = self.static(url, depth)
        if not verdict.admitted:
            return verdict
        scope = scope_of(url)
        in_scope = self._scope_count(conn, scope)
        if in_scope >= self.options.max_pages_per_capsule:
            return Verdict(
                EXCLUDED,
                f"page cap: {scope} has {in_scope} pages "
                f"(limit {self.options.max_pages_per_capsule})",
            )
        path_key: str | None = None
        if url.query is not None:
            path_key = str(url.with_path(url.path))
            with_query = self._query_count(conn, path_key)
            if with_query >= self.options.max_query_urls_per_path:
                return Verdict(
                    EXCLUDED,
                    f"query cap: {with_query} URLs with a query string on {path_key} "
                    f"(limit {self.options.max_query_urls_per_path})",
                )
            self._query_counts[path_key] = with_query + 1
        self._scope_counts[scope] = in_scope + 1
        return _ADMIT

    def forget(self) -> None:
        """Drop the counts (after a rolled-back transaction); they are reread from the store."""
        self._scope_counts.clear()
        self._query_counts.clear()

    def _scope_count(self, conn: Connection, scope: str) -> int:
        count = self._scope_counts.get(scope)
        if count is None:
            count = int(
                conn.execute(
                    select(func.count())
                    .select_from(PAGES)
                    .where(PAGES.c.scope == scope, PAGES.c.state != EXCLUDED)
                ).scalar_one()
            )
            self._scope_counts[scope] = count
        return count

    def _query_count(self, conn: Connection, path_url: str) -> int:
        count = self._query_counts.get(path_url)
        if count is None:
            # "?" is 0x3F and "@" 0x40: the range holds exactly the URLs "path?...", and the
            # unique index on pages.url answers it without a scan.
            count = int(
                conn.execute(
                    select(func.count())
                    .select_from(PAGES)
                    .where(
                        PAGES.c.url >= path_url + "?",
                        PAGES.c.url < path_url + "@",
                        PAGES.c.state != EXCLUDED,
                    )
                ).scalar_one()
            )
            self._query_counts[path_url] = count
        return count
