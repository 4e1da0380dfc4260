"""``sextant crawl`` and ``sextant show``: the crawler's face on the command line."""

from __future__ import annotations

import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from crawler.fetch import FetchLimits
from crawler.options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_DELAY,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_PAGES_PER_CAPSULE,
    DEFAULT_MAX_QUERY_URLS_PER_PATH,
    AllowedHosts,
    CrawlOptions,
)
from sextant.cli import pass_settings
from sextant.config import Settings
from sextant.display import json_text, one_line, text_block
from sextant.errors import ConfigError, InvalidURL

DEFAULT_SEEDS = "seeds.txt"


def _default_seeds_file(settings: Settings) -> Path | None:
    """``seeds.txt`` in the current directory, else in the data directory, else none."""
    for candidate in (Path(DEFAULT_SEEDS), settings.data_dir / DEFAULT_SEEDS):
        if candidate.is_file():
            return candidate
    return None


@click.command()
@click.option(
    "--seeds",
    "seeds_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"File of seed URLs, one per line [default: ./{DEFAULT_SEEDS} or DATA_DIR/"
    f"{DEFAULT_SEEDS}, unless --seed is given].",
)
@click.option("--seed", "seeds", multiple=True, metavar="URL", help="A seed URL (repeatable).")
@click.option("--max-pages", type=click.IntRange(min=0), help="Stop after fetching N pages.")
@click.option(
    "--max-pages-per-capsule",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_PAGES_PER_CAPSULE,
    show_default=True,
    help="Pages per capsule (a pubnix ~user directory counts as its own capsule).",
)
@click.option(
    "--max-depth",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_DEPTH,
    show_default=True,
    help="Links followed from a seed.",
)
@click.option(
    "--max-query-urls",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_QUERY_URLS_PER_PATH,
    show_default=True,
    help="URLs with a ?query string per path.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="Requests in flight at once (each to a different capsule and address).",
)
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    default=DEFAULT_DELAY,
    show_default=True,
    help="Seconds between two requests to one capsule or one address "
    "(robots.txt Crawl-delay wins if larger).",
)
@click.option(
    "--exclude",
    "exclude_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Extra exclusion rules (the format of crawler/traps.txt).",
)
@click.option("--recrawl", is_flag=True, help="Also refetch pages whose recrawl time has come.")
@click.option(
    "--resolve",
    multiple=True,
    metavar="HOST:PORT:ADDR",
    help="Connect to ADDR for HOST:PORT, like curl's --resolve (repeatable).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    help="Only contact these capsules (repeatable; *.example.org for subdomains). Links "
    "elsewhere are recorded but never fetched or even resolved.",
)
@click.option(
    "--allow-private",
    is_flag=True,
    help="Let any host resolve to loopback, private, link-local or other non-public "
    "addresses. Without it only hosts named by --resolve or by --allow-host (not *.domain) "
    "may; others are refused before any connection, with the reason on the page.",
)
@click.option("--max-time", type=click.FloatRange(min=0, min_open=True), help="Stop after SECONDS.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds one request may take in all (connect and header limits shrink to fit).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress line and no summary.")
@click.option(
    "--log",
    "log_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append one JSON line per request to FILE.",
)
@click.option(
    "--worker",
    is_flag=True,
    help="Share the frontier with other crawler processes (leases of others are respected).",
)
@click.option(
    "--lease",
    "lease_seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds a claim on frontier rows lasts unless renewed (every third of it): how "
    "soon the capsules of a --worker that died go to the others.",
)
@pass_settings
def crawl(
    settings: Settings,
    seeds_file: Path | None,
    seeds: tuple[str, ...],
    max_pages: int | None,
    max_pages_per_capsule: int,
    max_depth: int,
    max_query_urls: int,
    concurrency: int,
    delay: float,
    exclude_file: Path | None,
    recrawl: bool,
    resolve: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    allow_private: bool,
    max_time: float | None,
    timeout: float | None,
    quiet: bool,
    log_file: Path | None,
    worker: bool,
    lease_seconds: float,
) -> None:
    """Crawl Geminispace into the store, politely, until nothing is due.

    Starts from the seeds, the seed inbox (filled by the search capsule) and whatever an
    earlier run left in the frontier. Ctrl-C stops within two seconds (requests in flight
    get one to finish; a second Ctrl-C cuts them) with exit status 130; the next run
    continues where this one stopped.
    """
    import trio

    from crawler.engine import run_crawl

    if seeds_file is None and not seeds:
        seeds_file = _default_seeds_file(settings)
    limits = FetchLimits()
    if timeout is not None:
        limits = FetchLimits(
            total_timeout=timeout,
            connect_timeout=min(limits.connect_timeout, timeout),
            header_timeout=min(limits.header_timeout, timeout),
        )
    options = CrawlOptions(
        seeds=seeds,
        seeds_file=seeds_file,
        max_pages=max_pages,
        max_pages_per_capsule=max_pages_per_capsule,
        max_depth=max_depth,
        max_query_urls_per_path=max_query_urls,
        concurrency=concurrency,
        delay=delay,
        exclude_file=exclude_file,
        recrawl=recrawl,
        resolve=resolve,
        allow_hosts=AllowedHosts.parse(allow_hosts),
        allow_private=allow_private,
        max_time=max_time,
        quiet=quiet,
        log_file=log_file,
        worker=worker,
        lease_seconds=lease_seconds,
        fetch_limits=limits,
    )
    if settings.is_sqlite:
        settings.ensure_data_dir()
    summary = trio.run(run_crawl, settings, options)
    reason = str(summary.stats.get("stop_reason", ""))
    if not quiet:
        click.echo(summary.table)
        nothing_given = seeds_file is None and not seeds
        if summary.stats.get("pages") == 0 and not summary.frontier_left and nothing_given:
            click.echo("Nothing to crawl: give seeds with --seed URL or --seeds FILE.", err=True)
    if reason in signal.Signals.__members__:
        stopped_by = signal.Signals[reason]
        if stopped_by == signal.SIGINT:  # a person is watching; SIGTERM's sender knows
            click.echo("crawl stopped; the next `sextant crawl` continues from here", err=True)
        sys.exit(128 + stopped_by)  # how shells report a command a signal stopped


# --- show -------------------------------------------------------------------------------------


def _when(moment: datetime | None) -> str | None:
    return moment.isoformat(sep=" ", timespec="seconds") + "Z" if moment else None


@click.command()
@click.argument("urls", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per URL, one per line.")
@click.option("--no-body", is_flag=True, help="Leave the body out of the human output.")
@pass_settings
def show(settings: Settings, urls: tuple[str, ...], as_json: bool, no_body: bool) -> None:
    """Print what the store knows of each URL: answer, metadata, links and body.

    Exits with status 1 if any URL is unknown (the others are still shown).
    """
    from crawler.show import describe_page
    from sextant.store.migrate import open_store
    from sextant.urls import parse

    engine = open_store(settings.db_url)
    missing: list[str] = []
    try:
        for raw in urls:
            try:
                url = str(parse(raw))
            except InvalidURL as exc:
                raise ConfigError(f"{raw!r} is not a gemini URL: {exc}") from None
            facts = describe_page(engine, url)
            if facts is None:
                missing.append(url)
                click.echo(
                    f"{url}: not in the store (crawl it with `sextant crawl --seed {url}`)",
                    err=True,
                )
                continue
            if as_json:
                click.echo(json_text(facts, default=_when))
            else:
                click.echo(_human(facts, body=not no_body))
    finally:
        engine.dispose()
    if missing:
        raise click.exceptions.Exit(1)


def _human(facts: dict[str, Any], *, body: bool) -> str:
    lines = [one_line(facts["url"])]

    def row(label: str, value: object) -> None:
        if value is not None and value != "":
            lines.append(f"  {label:<16}{one_line(str(value))}")

    status = facts["status"]
    row("state", facts["state"])
    row("status", None if status is None else f"{status} {facts['meta'] or ''}".rstrip())
    row("mime", facts["mime"])
    charset = facts["charset"]
    if charset and facts["charset_detected"]:
        charset += " (detected)"
    row("charset", charset)
    row("lang", facts["lang"])
    row("title", facts["title"])
    size = facts["size"]
    if facts["mime"] and size is None and status is not None and status // 10 == 2:
        size_text: str | None = "unknown (body not downloaded)"
    else:
        size_text = None if size is None else f"{size} bytes"
    if size_text and facts["truncated"]:
        size_text += ", truncated at the size limit"
    if size_text and facts["possibly_truncated"]:
        size_text += ", possibly truncated (no TLS close_notify)"
    row("size", size_text)
    row("redirects to", facts["redirect_target"])
    row("duplicate of", facts["duplicate_of"])
    row("feed", facts["feed_kind"])
    if facts["error_kind"] or facts["error_message"]:
        row("error", f"{facts['error_kind'] or ''}: {facts['error_message'] or ''}".strip(": "))
    slow_down = facts["slow_down"]
    if slow_down is not None:
        retry = _when(facts["retry_at"])
        row(
            "slowed down",
            f"the capsule asked to wait {slow_down['seconds']:g} s; "
            + (f"retry after {retry}" if retry else "not queued for a retry"),
        )
    row("first seen", _when(facts["discovered_at"]))
    row("fetched", _when(facts["fetched_at"]))
    row("changed", _when(facts["changed_at"]))
    row("next crawl", _when(facts["next_crawl_at"]))
    row("depth", facts["depth"])
    row("inbound links", facts["inbound_links"])
    links = facts["links"]
    outbound = f"  outbound links  {len(links)}"
    if facts["links_dropped"]:
        from crawler.content import MAX_LINKS_PER_PAGE  # charset and language models: lazily

        outbound += (
            f" ({facts['links_dropped']:,} more dropped: only the first"
            f" {MAX_LINKS_PER_PAGE:,} distinct links of a page are kept)"
        )
    lines.append(outbound)
    for link in links:
        lines.append(f"    => {one_line(link['url'])} {one_line(link['label'])}".rstrip())
    if body and facts["body"] is not None:
        lines.append("")
        lines.append(text_block(facts["body"]))
    return "\n".join(lines)


# --- forget -----------------------------------------------------------------------------------


@click.command()
@click.argument("target", required=False, metavar="HOST[:PORT]|URL-PREFIX")
@click.option("--reason", help="Why (published on the capsule's /known-excludes page).")
@click.option("--list", "listing", is_flag=True, help="List the removals (also without TARGET).")
@click.option("--undo", is_flag=True, help="Take TARGET's removal back; the next crawl refetches.")
@pass_settings
def forget(
    settings: Settings, target: str | None, reason: str | None, listing: bool, undo: bool
) -> None:
    """Remove a capsule or URL prefix from the store and from every later crawl.

    The way to honour a removal request: the pages lose their content and links now, leave
    the index at the next `sextant index`, and are never fetched again.
    """
    from crawler import removals
    from sextant.store.migrate import open_store

    engine = open_store(settings.db_url)
    try:
        if listing or target is None:
            with engine.connect() as conn:
                found = removals.stored_removals(conn)
            if not found:
                click.echo("Nothing forgotten.")
            for removal in found:
                click.echo(
                    f"{one_line(removal.prefix)}  {_when(removal.added_at)}  "
                    f"{one_line(removal.reason)}"
                )
            return
        if undo:
            count = removals.undo(engine, target)
            click.echo(
                f"{removals.removal_prefix(target)} is no longer forgotten; "
                f"the next crawl fetches its {count} pages again."
            )
            return
        count = removals.forget(engine, target, reason or "")
        click.echo(
            f"forgot {removals.removal_prefix(target)}: {count} pages emptied and excluded; "
            "they leave the index at the next `sextant index`."
        )
    finally:
        engine.dispose()
