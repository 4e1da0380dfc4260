"""Lists drawn from the store: capsules, newest pages, feeds and backlinks."""

from __future__ import annotations

from search_capsule import paths
from search_capsule.pages.lines import day, document, heading, link, plural, text
from search_capsule.store_views import Backlink, Backlinks, HostRow, Listing, PageRow

_HOME = link(paths.HOME, "Home")
_FEED_KINDS = {"gemsub": "Gemini subscriptions (gemsub)", "atom": "Atom feeds", "rss": "RSS feeds"}


def _shown(listing: Listing, noun: str) -> str:
    if len(listing.rows) < listing.total:
        return f"The first {len(listing.rows):,} of {plural(listing.total, noun)}."
    return f"{plural(listing.total, noun)}."


def _empty_store(what: str) -> list[str]:
    return [
        text(f"No {what} yet: the crawler has not reached any capsule."),
        text("Once `sextant crawl` has run, they appear here."),
    ]


def _host_lines(row: HostRow, *, show_first_seen: bool) -> list[str]:
    when = f"first seen {day(row.first_seen_at)}" if show_first_seen else ""
    facts = ", ".join(part for part in (plural(row.pages, "page"), when) if part)
    return [
        link(row.url, f"{row.display} ({facts})"),
        link(paths.with_query(paths.CAPSULE, row.authority), f"↳ health of {row.display}"),
    ]


def known_hosts(listing: Listing) -> str:
    lines = [heading("Known capsules"), ""]
    if not listing.rows:
        lines += _empty_store("capsules")
    else:
        lines += [text(_shown(listing, "capsule") + " Each has answered the crawler."), ""]
        for row in listing.rows:
            assert isinstance(row, HostRow)
            lines += _host_lines(row, show_first_seen=False)
    lines += ["", link(paths.NEWEST_HOSTS, "Newest capsules first"), _HOME]
    return document(lines)


def newest_hosts(listing: Listing) -> str:
    lines = [heading("Newest capsules"), ""]
    if not listing.rows:
        lines += _empty_store("capsules")
    else:
        lines += [text("Capsules in the order the crawler first met them, newest first."), ""]
        for row in listing.rows:
            assert isinstance(row, HostRow)
            lines += _host_lines(row, show_first_seen=True)
    lines += ["", link(paths.KNOWN_HOSTS, "All capsules, alphabetically"), _HOME]
    return document(lines)


def _page_label(row: PageRow) -> str:
    title = row.title or row.url
    return f"{title} ({row.display_host}, {day(row.when)})"


def newest_pages(listing: Listing) -> str:
    """The newest pages as a Gemini subscription (gemsub) feed, so clients can follow it.

    The companion spec "Subscribing to Gemini pages" reads the first level-1 heading as the
    feed's title and every link whose label starts with a YYYY-MM-DD date as an entry; no
    other line here has a dated label, so only pages are entries. The date is the day the
    crawler first met the page, the only date the store keeps for every page.
    """
    lines = [heading("Newest pages"), ""]
    if not listing.rows:
        lines += _empty_store("pages")
    else:
        lines += [
            text(
                _shown(listing, "page") + " Newest discoveries first, each dated the day the "
                "crawler first met it."
            ),
            "",
        ]
        lines += [
            link(row.url, f"{day(row.when)} {row.title or row.url} ({row.display_host})")
            for row in listing.rows
            if isinstance(row, PageRow)
        ]
    lines += [
        "",
        text("Subscribe to this page in your client, or to the same list as an Atom feed:"),
        link(paths.NEWEST_PAGES_ATOM, "Atom feed of the newest pages"),
        _HOME,
    ]
    return document(lines)


def known_feeds(listing: Listing) -> str:
    lines = [heading("Known feeds"), ""]
    if not listing.rows:
        lines += [
            text("No feeds found yet."),
            text(
                "The crawler recognises Gemini subscription pages (a level-1 heading and links "
                "whose labels start with a date) and Atom and RSS files."
            ),
        ]
    else:
        lines.append(text(_shown(listing, "feed") + " Subscribe to them in your client."))
        kind = None
        for row in listing.rows:
            assert isinstance(row, PageRow)
            if row.feed_kind != kind:
                kind = row.feed_kind
                lines += ["", heading(_FEED_KINDS.get(kind or "", f"{kind} feeds"), 2)]
            lines.append(link(row.url, _page_label(row)))
    lines += ["", _HOME]
    return document(lines)


def _backlink_line(backlink: Backlink) -> str:
    label = backlink.source_title or backlink.source_url
    if backlink.label:
        label = f"{label} — “{backlink.label}”"
    return link(backlink.source_url, label)


def backlinks(found: Backlinks) -> str:
    lines = [heading("Backlinks"), "", link(found.url, found.title or found.url), ""]
    if not found.other_total and not found.same_total:
        lines.append(text("No page the crawler has seen links here."))
        if not found.known:
            lines.append(text("The crawler has not met this URL at all yet."))
    for title, group, total in (
        ("From other capsules", found.other_capsules, found.other_total),
        ("From the same capsule", found.same_capsule, found.same_total),
    ):
        if not total:
            continue
        shown = f" (the first {len(group)})" if len(group) < total else ""
        lines += [heading(f"{title}: {total:,}{shown}", 2)]
        lines += [_backlink_line(backlink) for backlink in group]
        lines.append("")
    lines += [link(paths.BACKLINKS, "Backlinks of another URL"), _HOME]
    return document(lines)


def unusable_url(what: str, message: str, retry_path: str) -> str:
    """A typed URL we cannot use: say why and offer the prompt again."""
    return document(
        [
            heading(f"{what}: that URL cannot be used"),
            "",
            text(message),
            "",
            link(retry_path, "Try again"),
            _HOME,
        ]
    )
