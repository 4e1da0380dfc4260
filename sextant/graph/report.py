"""The census and graph statistics as text for a terminal.

Titles and labels come from strangers' capsules, so each goes through
:func:`sextant.display.one_line` (an ANSI escape in a title could rewrite the user's
terminal, a bidi override reorder the table).
"""

from __future__ import annotations

from datetime import datetime

from sextant.census import Breakdown, Census, RunSummary
from sextant.display import one_line
from sextant.graph.stats import Degrees, GraphStats, Ranked

LIMIT = 15


def render_census(census: Census, *, limit: int = LIMIT) -> str:
    lines = [f"Geminispace census, {_when(census.taken_at)}", ""]
    lines.append(f"Pages     {census.pages:>10,}  {_inline(census.pages_by_state)}")
    lines.append(f"Capsules  {census.capsules:>10,}  ({census.capsules_reached:,} answered)")
    lines.append(f"          {_left_out(census.pages_left_out, census.capsules_left_out)}")
    lines.append(
        f"Links     {census.links:>10,}  within capsules {census.links_within_capsule:,}, "
        f"across capsules {census.links_across_capsules:,}, "
        f"other schemes {census.links_other_schemes:,}"
    )
    lines.append("")
    sections: list[tuple[str, Breakdown]] = [
        ("Links by scheme", census.links_by_scheme),
        ("MIME types", census.mime_types),
        ("Languages (text pages)", census.languages),
        ("Charsets (text pages)", census.charsets),
        ("Status families", census.status_families),
        ("Page sizes", census.page_sizes),
        ("TLS versions", census.tls_versions),
        ("Certificate keys", census.certificate_key_types),
        ("Certificate signers", census.certificate_signers),
        ("Certificate events", census.certificate_events),
    ]
    for title, rows in sections:
        lines.extend(_table(title, rows, limit))
    lines.append(
        f"Certificates {census.certificates:,}: expired {census.certificates_expired:,}, "
        f"expiring within {census.soon_days} days {census.certificates_expiring_soon:,}, "
        f"changes seen {census.certificate_changes:,}"
    )
    lines.append("")
    lines.append("Last runs")
    if not census.last_runs:
        lines.append("  none yet")
    lines.extend(f"  {_run(run)}" for run in census.last_runs)
    return "\n".join(lines)


def render_stats(stats: GraphStats, *, limit: int = LIMIT) -> str:
    share = f"{stats.reachable_share:.1%}"
    lines = [
        "Link graph",
        f"  pages {stats.pages:,}, capsules {stats.capsules:,}, links between pages "
        f"{stats.links:,} (self-links left out), linked capsule pairs {stats.capsule_links:,}",
        f"  page in-degree     {_degrees(stats.page_in_degree)}",
        f"  page out-degree    {_degrees(stats.page_out_degree)}",
        f"  capsule in-degree  {_degrees(stats.capsule_in_degree)}",
        f"  capsule out-degree {_degrees(stats.capsule_out_degree)}",
        f"  strongly connected components {stats.strongly_connected_components:,}; "
        f"the largest has {stats.largest_component_pages:,} pages "
        f"({_share(stats.largest_component_pages, stats.pages)}) and "
        f"{stats.largest_component_capsules:,} capsules at capsule level",
        f"  reachable from the seeds ({stats.seeds:,} pages): {stats.reachable_from_seeds:,} "
        f"pages ({share})",
        f"  dangling pages (no links to known pages) {stats.dangling_pages:,}: "
        f"{_inline(stats.dangling_by_state)}",
        f"  {_left_out(stats.pages_left_out, stats.capsules_left_out)}",
        "",
    ]
    lines.extend(_ranking("Top pages by inbound links", stats.top_pages_by_inbound))
    lines.extend(_ranking("Top pages by PageRank", stats.top_pages_by_pagerank))
    lines.extend(
        _ranking("Top capsules by links from other capsules", stats.top_capsules_by_inbound)
    )
    lines.extend(_ranking("Top capsules by PageRank", stats.top_capsules_by_pagerank))
    lonely = stats.capsules_without_inbound
    lines.append(f"Capsules no other capsule links to: {len(lonely):,}")
    lines.extend(f"  {one_line(name)}" for name in lonely[:limit])
    if len(lonely) > limit:
        lines.append(f"  … and {len(lonely) - limit:,} more (--json lists them all)")
    return "\n".join(lines)


def _left_out(pages: int, capsules: int) -> str:
    return (
        f"left out because robots.txt disallows researcher: {pages:,} pages; "
        f"whole capsules: {capsules:,}"
    )


def _table(title: str, rows: Breakdown, limit: int) -> list[str]:
    total = sum(count for _, count in rows)
    lines = [title]
    if not total:
        return [*lines, "  none yet", ""]
    labels = [one_line(label)[:40] for label, _ in rows[:limit]]
    width = max(map(len, labels))
    for label, (_, count) in zip(labels, rows[:limit], strict=True):
        lines.append(f"  {label:<{width}}  {count:>10,}  {count / total:>6.1%}")
    rest = rows[limit:]
    if rest:
        others = sum(count for _, count in rest)
        lines.append(f"  {f'{len(rest):,} more':<{width}}  {others:>10,}  {others / total:>6.1%}")
    return [*lines, ""]


def _ranking(title: str, ranked: tuple[Ranked, ...]) -> list[str]:
    lines = [title]
    if not ranked:
        return [*lines, "  none yet", ""]
    for position, entry in enumerate(ranked, 1):
        line = (
            f"  {position:>2}. {one_line(entry.name)}  inbound {entry.inbound:,}, "
            f"PageRank {entry.pagerank:.6f}"
        )
        if entry.title:
            line += f"  “{one_line(entry.title)[:60]}”"
        lines.append(line)
    return [*lines, ""]


def _degrees(degrees: Degrees) -> str:
    return (
        f"mean {degrees.mean:.2f}, median {degrees.median:g}, max {degrees.maximum:,}, "
        f"zero for {degrees.zero:,}"
    )


def _inline(rows: Breakdown) -> str:
    return ", ".join(f"{one_line(label)} {count:,}" for label, count in rows) or "none"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "0%"


def _run(run: RunSummary) -> str:
    if run.duration is None:
        state = f"started {_when(run.started_at)}, not finished"
    else:
        state = f"{_when(run.started_at)}, took {run.duration}"
    figures = ", ".join(f"{key} {value}" for key, value in run.figures.items())
    return f"{run.kind}: {state}" + (f" ({one_line(figures)})" if figures else "")


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")
