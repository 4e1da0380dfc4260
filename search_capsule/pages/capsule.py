"""One capsule's health as the crawler sees it: for authors checking on their capsule."""

from __future__ import annotations

from datetime import datetime

from search_capsule import paths
from search_capsule.pages.lines import (
    day,
    document,
    heading,
    item,
    link,
    minute,
    plural,
    preformatted,
    text,
)
from search_capsule.store_views import (
    CapsuleHealth,
    FailingPage,
    HostRow,
    Neighbour,
    RobotsFacts,
)
from sextant.display import one_line

# robots.txt files can be long; the rules in force are listed in full above the excerpt.
_ROBOTS_EXCERPT_CHARS = 4000
# Error messages and metas run to a thousand characters; the start says what went wrong.
_REASON_CHARS = 200


def capsule_page(health: CapsuleHealth, *, now: datetime) -> str:
    host = health.host
    lines = [heading(f"Capsule {host.display}"), "", link(host.url, f"Visit {host.display}"), ""]
    lines += [heading("Crawling", 2)]
    lines += [
        item(f"first seen {minute(health.first_seen_at)}"),
        item(f"last attempt {minute(health.last_attempt_at)}"),
        item(f"last successful fetch {minute(host.last_success_at)}"),
        item(f"last page fetched {minute(health.last_page_fetch)}"),
        item(f"indexable pages: {host.pages:,}"),
    ]
    if health.consecutive_failures:
        lines.append(item(f"failing: {plural(health.consecutive_failures, 'failure')} in a row"))
    if health.parked_until and health.parked_until > now:
        lines.append(item(f"left alone until {minute(health.parked_until)} after failures"))
    if health.pages_by_state:
        lines += ["", heading("Pages by state", 3)]
        lines += [item(f"{state}: {count:,}") for state, count in health.pages_by_state]
    if health.pages_by_status:
        lines += ["", heading("Pages by status", 3)]
        lines += [
            item(f"{status if status is not None else 'no response'}: {count:,}")
            for status, count in health.pages_by_status
        ]
    lines += ["", *_failing(health)]
    lines += ["", *_robots(health.robots)]
    if health.user_robots:
        lines += ["", *_user_robots(health.user_robots)]
    lines += ["", *_certificate(health, now)]
    lines += ["", *_neighbours("Capsules linking here", health.inbound)]
    lines += ["", *_neighbours("Capsules linked from here", health.outbound)]
    if health.other_schemes:
        lines += ["", heading("Links to other protocols", 3)]
        lines += [item(f"{scheme}: {count:,}") for scheme, count in health.other_schemes]
    lines += ["", link(paths.CAPSULE, "Another capsule"), link(paths.HOME, "Home")]
    return document(lines)


def _failing(health: CapsuleHealth) -> list[str]:
    """The URLs the crawler could not read and why, so the author can mend them."""
    lines = [heading("URLs the crawler could not read", 2)]
    total, shown = health.failing_total, len(health.failing)
    if not total:
        lines.append(text("None: the last fetch of every page worked."))
    else:
        which = f"the {shown:,} most recent" if shown < total else "the most recent first"
        lines.append(text(f"{plural(total, 'URL')} failed at the last attempt; {which}:"))
        prefix = f"gemini://{health.host.authority}"
        lines += [link(page.url, _failure(page, prefix)) for page in health.failing]
    # robots.txt and exclusion rules keep pages out on purpose: counted, not listed.
    kept_out = dict(health.pages_by_state)
    asked = [
        plural(kept_out[state], "page") + " " + why
        for state, why in (("disallowed", "robots.txt disallows"), ("excluded", "excluded by rule"))
        if kept_out.get(state)
    ]
    if asked:
        lines.append(text("Not failures, so not listed: " + ", ".join(asked) + "."))
    return lines


def _failure(page: FailingPage, prefix: str) -> str:
    path = page.url.removeprefix(prefix)
    where = path if path.startswith("/") else page.url
    what = page.error_kind or str(page.status)
    detail = one_line(page.message)
    if len(detail) > _REASON_CHARS:
        detail = detail[:_REASON_CHARS] + "…"
    separator = ": " if page.error_kind else " "
    reason = what + separator + detail if detail else what
    return f"{where} — {reason} ({minute(page.fetched_at)})"


def _robots(robots: RobotsFacts) -> list[str]:
    lines = [heading("robots.txt", 2)]
    if robots.status is None:
        return [*lines, text("Not fetched yet; nothing else is crawled until it is.")]
    lines.append(item(f"fetched {minute(robots.fetched_at)}, status {robots.status}"))
    if not robots.readable:
        return [*lines, text("Could not be read for now, so the crawler waits before crawling.")]
    if robots.status // 10 == 5:
        return [*lines, text("There is none (status 5x), so everything may be crawled.")]
    if not robots.rules:
        lines.append(text("No rules apply to this crawler (agents sextant, indexer, *)."))
    else:
        lines.append(text("Rules in force for this crawler (agents sextant, indexer, *):"))
    lines += [item(rule) for rule in _rules_in_force(robots)]
    if robots.agents:
        lines.append(text("Agents the file names: " + ", ".join(robots.agents)))
    if robots.text:
        excerpt = robots.text[:_ROBOTS_EXCERPT_CHARS]
        if len(robots.text) > _ROBOTS_EXCERPT_CHARS:
            excerpt += "\n[… cut]"
        lines += preformatted(excerpt, "robots.txt")
    return lines


def _user_robots(files: tuple[tuple[str, RobotsFacts], ...]) -> list[str]:
    """One line per pubnix user whose own /~user/robots.txt the crawler obeys."""
    lines = [
        heading("robots.txt of users", 3),
        text("Each applies to its user's directory, on top of the capsule's own:"),
    ]
    for user, robots in files:
        if not robots.readable or robots.status is None:
            summary = "could not be read for now"
        elif robots.status // 10 == 5:
            summary = f"none (status {robots.status})"
        else:
            summary = "; ".join(_rules_in_force(robots)) or "no rules for this crawler"
        lines.append(item(f"~{user} (fetched {minute(robots.fetched_at)}): {summary}"))
    return lines


def _rules_in_force(robots: RobotsFacts) -> list[str]:
    """The rules for this crawler as the file writes them, Crawl-delay last."""
    rules = [f"{'Allow' if rule.allow else 'Disallow'}: {rule.pattern}" for rule in robots.rules]
    if robots.crawl_delay is not None:
        rules.append(f"Crawl-delay: {robots.crawl_delay:g} s")
    return rules


def _certificate(health: CapsuleHealth, now: datetime) -> list[str]:
    lines = [heading("Certificate", 2)]
    if not health.tls_fingerprint:
        return [*lines, text("No certificate seen yet.")]
    expired = health.tls_not_after is not None and health.tls_not_after < now
    signer = {True: "self-signed", False: "signed by a CA", None: "signer unknown"}
    lines += [
        item(f"SHA-256 fingerprint {health.tls_fingerprint}"),
        item(
            f"valid {day(health.tls_not_before)} to {day(health.tls_not_after)}"
            + (" — EXPIRED" if expired else "")
        ),
        item(
            f"{signer[health.tls_self_signed]}, key {health.tls_key_type or 'unknown'}, "
            f"{health.tls_version or 'TLS version unknown'}"
        ),
        item(f"names: {health.tls_names or 'none'}"),
        item(f"first seen {minute(health.tls_first_seen_at)}"),
    ]
    changes = [c for c in health.certificate_changes if c.kind != "first-seen"]
    if changes:
        lines += ["", heading(f"Certificate changes seen: {len(changes)}", 3)]
        for change in changes:
            lines.append(
                item(
                    f"{minute(change.seen_at)} {change.kind}: "
                    f"{(change.old_fingerprint or '?')[:16]}… → {change.new_fingerprint[:16]}…"
                )
            )
    else:
        lines.append(text("No certificate change seen."))
    return lines


def _neighbours(title: str, neighbours: tuple[Neighbour, ...]) -> list[str]:
    lines = [heading(title, 2)]
    if not neighbours:
        return [*lines, text("None seen.")]
    return lines + [
        link(
            paths.with_query(paths.CAPSULE, neighbour.query),
            f"{neighbour.display} ({plural(neighbour.links, 'link')})",
        )
        for neighbour in neighbours
    ]


def choose_port(host: str, rows: tuple[HostRow, ...]) -> str:
    """Several capsules share the host name on different ports: let the user pick one."""
    lines = [heading(f"Capsules on {host}"), ""]
    lines += [
        link(paths.with_query(paths.CAPSULE, row.authority), f"{row.display} ({row.pages:,} pages)")
        for row in rows
    ]
    lines += ["", link(paths.HOME, "Home")]
    return document(lines)


def unknown_capsule(authority: str) -> str:
    return document(
        [
            heading("Unknown capsule"),
            "",
            text(f"The crawler knows no capsule at {authority}."),
            text("If it exists, suggest it and the next crawl will visit it."),
            "",
            link(paths.with_query(paths.ADD_SEED, f"gemini://{authority}/"), f"Add {authority}"),
            link(paths.CAPSULE, "Another capsule"),
            link(paths.HOME, "Home"),
        ]
    )
