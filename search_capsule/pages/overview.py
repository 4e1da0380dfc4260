"""The start page and the statistics page, both drawn from the store's census."""

from __future__ import annotations

from search_capsule import paths
from search_capsule.pages.lines import document, heading, item, link, minute, plural, text
from sextant.census import SOON, Breakdown, Census, RunSummary

# Long tails (hundreds of MIME types, charsets) are summed up after this many entries.
_TOP = 15


def _ok_pages(census: Census) -> int:
    return dict(census.pages_by_state).get("ok", 0)


def _run(census: Census, kind: str) -> RunSummary | None:
    return next((run for run in census.last_runs if run.kind == kind), None)


def _run_text(run: RunSummary | None) -> str:
    if run is None:
        return "never"
    if run.finished_at is None:
        return f"started {minute(run.started_at)}, still running or interrupted"
    return f"{minute(run.finished_at)}"


def home(census: Census) -> str:
    lines = [
        heading("Sextant — search Geminispace"),
        "",
        text(
            "A search engine for Gemini: its crawler visits capsules politely, and this "
            "capsule searches the pages it found. Any Gemini client can use it."
        ),
        "",
        link(paths.SEARCH, "Search"),
        link(paths.VERBOSE_SEARCH, "Search, with scores and details for every result"),
        link(paths.BACKLINKS, "Which pages link to a URL?"),
        "",
    ]
    if census.pages == 0:
        lines.append(
            text(
                "The crawler has not visited any capsule yet, so there is nothing "
                "to search. Come back after the first crawl."
            )
        )
    else:
        lines.append(
            text(
                f"{plural(_ok_pages(census), 'page')} from "
                f"{plural(census.capsules_reached, 'capsule')}. "
                f"Last crawl: {_run_text(_run(census, 'crawl'))}. "
                f"Last indexing: {_run_text(_run(census, 'index'))}."
            )
        )
    lines += [
        "",
        heading("Explore", 2),
        link(paths.STATISTICS, "Statistics of Geminispace"),
        link(paths.KNOWN_HOSTS, "Known capsules"),
        link(paths.NEWEST_HOSTS, "Newest capsules"),
        link(paths.NEWEST_PAGES, "Newest pages"),
        link(paths.KNOWN_FEEDS, "Known feeds"),
        link(paths.CAPSULE, "Health of one capsule"),
        "",
        heading("Help", 2),
        link(paths.DOC_SEARCHING, "How to search"),
        link(paths.DOC_INDEXING, "How the crawler works and how to keep it out"),
        link(paths.KNOWN_EXCLUDES, "What the crawler avoids, and why"),
        link(paths.ADD_SEED, "Suggest a capsule to crawl"),
        link(paths.ABOUT, "About this capsule"),
    ]
    return document(lines)


def _breakdown(title: str, rows: Breakdown, *, keep_order: bool = False) -> list[str]:
    lines = [heading(title, 2)]
    shown = rows if keep_order else rows[:_TOP]
    if not shown:
        return [*lines, text("Nothing yet.")]
    total = sum(count for _, count in rows)
    for label, count in shown:
        share = f" ({count / total:.1%})" if total else ""
        lines.append(item(f"{label}: {count:,}{share}"))
    rest = rows[len(shown) :]
    if rest:
        others = sum(count for _, count in rest)
        lines.append(item(f"{len(rest)} others: {others:,}"))
    return [*lines, ""]


def statistics(census: Census) -> str:
    lines = [
        heading("Statistics of Geminispace"),
        "",
        text(f"As the store knew it at {minute(census.taken_at)}."),
        "",
        heading("Size", 2),
        item(f"indexable pages: {_ok_pages(census):,}"),
        item(f"URLs known: {census.pages:,}"),
        item(f"capsules: {census.capsules:,}, of which {census.capsules_reached:,} answered"),
        item(f"links: {census.links:,}"),
        item(f"links within a capsule: {census.links_within_capsule:,}"),
        item(f"links across capsules: {census.links_across_capsules:,}"),
        item(f"links to other protocols: {census.links_other_schemes:,}"),
        "",
        heading("Runs", 2),
    ]
    for kind in ("crawl", "index"):
        run = _run(census, kind)
        lines.append(item(f"last {kind}: {_run_text(run)}"))
    lines.append("")
    lines += _breakdown("Pages by state", census.pages_by_state)
    lines += _breakdown("MIME types", census.mime_types)
    lines += _breakdown("Languages", census.languages)
    lines += _breakdown("Character sets", census.charsets)
    lines += _breakdown("Status families", census.status_families)
    lines += _breakdown("Page sizes", census.page_sizes, keep_order=True)
    lines += _breakdown("Links by protocol", census.links_by_scheme)
    lines += _breakdown("TLS versions", census.tls_versions)
    lines += _breakdown("Certificate keys", census.certificate_key_types)
    lines += [heading("Certificates", 2)]
    signers = dict(census.certificate_signers)
    self_signed = signers.get("self-signed", 0)
    share = f" ({self_signed / census.certificates:.1%})" if census.certificates else ""
    lines += [
        item(f"certificates seen: {census.certificates:,}"),
        item(f"self-signed: {self_signed:,}{share}"),
        item(f"expired: {census.certificates_expired:,}"),
        item(f"expiring within {SOON.days} days: {census.certificates_expiring_soon:,}"),
        item(f"changes seen (TOFU events): {census.certificate_changes:,}"),
        "",
    ]
    lines += _breakdown("Certificate events", census.certificate_events)
    lines += [link(paths.KNOWN_HOSTS, "Known capsules"), link(paths.HOME, "Home")]
    return document(lines)
