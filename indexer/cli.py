"""``sextant index`` and ``sextant search``: the indexer's two commands."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from indexer.budget import DEFAULT_SECONDS, PATIENT_SECONDS, STOPPED_EARLY, Budget
from sextant.cli import pass_settings
from sextant.config import Settings
from sextant.display import json_text, one_line


@click.command()
@click.option(
    "--rebuild",
    is_flag=True,
    help="Build a fresh index in a new directory and swap it in atomically "
    "(a running search capsule keeps answering from the old one until then).",
)
@click.option(
    "--procs",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes for a full build [default: one per CPU for large stores].",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress line and no summary.")
@click.option("--json", "as_json", is_flag=True, help="Print the run's figures as JSON.")
@click.option(
    "--pool-mb",
    type=click.IntRange(1, None),
    default=None,
    help="Posting pool per writer in MB (default: indexer.build.WRITER_POOL_MB); beyond it "
    "postings spill to disk.",
)
@pass_settings
def index(
    settings: Settings,
    rebuild: bool,
    procs: int | None,
    quiet: bool,
    as_json: bool,
    pool_mb: int | None,
) -> None:
    """Update the search index from the store (only what changed since the last run)."""
    from indexer.build import run_index

    settings.ensure_data_dir()
    status = _StatusLine(enabled=not quiet and sys.stderr.isatty())
    report = run_index(
        settings.index_dir,
        settings.db_url,
        rebuild=rebuild,
        procs=procs,
        progress=status.update,
        limitmb=pool_mb,
    )
    status.clear()
    if as_json:
        click.echo(report.to_json())
    elif not quiet:
        click.echo(
            f"{report.mode} index: {report.indexed:,} pages indexed, {report.deleted:,} removed, "
            f"{report.documents:,} in the index · {report.seconds:.1f} s "
            f"({report.docs_per_second:,.0f} docs/s) · {_size(report.index_bytes)} on disk"
        )


class _StatusLine:
    """A progress line redrawn in place on stderr, with the indexing rate."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.monotonic()
        self.last = 0.0

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and done < total):
            return
        self.last = now
        rate = done / (now - self.started) if now > self.started else 0.0
        percent = 100 * done / total if total else 100.0
        click.echo(
            f"\r\x1b[Kindexing {done:,}/{total:,} pages ({percent:.0f}%) · {rate:,.0f} docs/s",
            err=True,
            nl=False,
        )

    def clear(self) -> None:
        if self.enabled:
            click.echo("\r\x1b[K", err=True, nl=False)


@click.command(
    # `sextant search solar -raspberry`: a word starting with "-" that is not one of the
    # options below is a query word (a NOT), not an error about an unknown option "-r".
    context_settings={"ignore_unknown_options": True}
)
@click.argument("query", nargs=-1, required=True)
@click.option(
    "--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="Results per page."
)
@click.option(
    "--page",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Which page of results.",
)
@click.option(
    "--budget",
    "budget_seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=PATIENT_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Wall time the search may take; a costlier query stops early and shows what it "
    f"found by then (marked partial). The public capsule gives {DEFAULT_SECONDS:g} s; here "
    "you wait for your own searches.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@pass_settings
def search(
    settings: Settings,
    query: tuple[str, ...],
    limit: int,
    page: int,
    budget_seconds: float,
    as_json: bool,
) -> None:
    """Search the index: words, "phrases", OR, -word, site:, lang:, type:, size:>10K...

    The words are joined with spaces, so quote phrases for the shell too:
    sextant search '"sourdough starter"' lang:en. Words may start with "-" (solar
    -raspberry); to search for a word that is also an option, put it after --.
    """
    from indexer.query import open_searcher

    searcher = open_searcher(settings)
    try:
        results = searcher.search(
            " ".join(query), page=page, page_size=limit, budget=Budget(budget_seconds)
        )
    finally:
        searcher.close()
    if as_json:
        click.echo(json_text(_as_json(results)))
        return
    _print_results(results, color=sys.stdout.isatty())


def _as_json(results: Any) -> dict[str, Any]:
    return {
        "total": results.total,
        "exact": results.exact,
        "partial": results.partial,
        "page": results.page,
        "results": [
            {
                "url": hit.url,
                "title": hit.title,
                "snippet": hit.snippet,
                "host": hit.host,
                "mime": hit.mime,
                "lang": hit.lang,
                "size": hit.size,
                "date": None if hit.date is None else hit.date.isoformat(),
                "score": round(hit.score, 6),
            }
            for hit in results.hits
        ],
        "suggestion": results.suggestion,
        "corrected_from": results.corrected_from,
        "seconds": round(results.seconds, 6),
    }


def _print_results(results: Any, *, color: bool) -> None:
    from indexer.query import VERBATIM
    from indexer.snippets import MARK_END, MARK_START

    if results.corrected_from is not None:
        click.echo(
            f"Showing results for {one_line(results.query)} — search instead for "
            f"{VERBATIM}{one_line(results.corrected_from)}"
        )
        click.echo()
    # Every field comes from a capsule; cleaned before styling adds escapes of our own.
    first = (results.page - 1) * results.page_size + 1
    for number, hit in enumerate(results.hits, first):
        title = one_line(hit.title) or one_line(hit.url)
        click.echo(click.style(f"{number}. {title}", bold=True) if color else f"{number}. {title}")
        click.echo(f"   {one_line(hit.url)}")
        snippet = one_line(hit.snippet)
        if snippet:
            if color and MARK_START == MARK_END:
                # On a terminal, marked words show in bold instead of between asterisks.
                parts = snippet.split(MARK_START)
                snippet = "".join(
                    click.style(part, bold=True) if index % 2 else part
                    for index, part in enumerate(parts)
                )
            click.echo(f"   {snippet}")
        facts = [one_line(hit.host), _size(hit.size), one_line(hit.lang) or "language unknown"]
        if hit.date is not None:
            facts.append(hit.date.isoformat())
        if hit.mime and hit.mime != "text/gemini":
            facts.append(one_line(hit.mime))
        click.echo(f"   {' · '.join(facts)}")
        click.echo()
    if results.total:
        shown = min(results.total, results.pages * results.page_size)
        click.echo(
            f"{results.total:,} result{'s' if results.total != 1 else ''} · "
            f"page {results.page} of {max(results.pages, 1)} · {results.seconds:.3f} s"
            + ("" if shown >= results.total else f" (the first {shown:,} can be paged through)")
        )
    else:
        click.echo(f"no results · {results.seconds:.3f} s")
    if results.suggestion:
        click.echo(f"did you mean: {one_line(results.suggestion)}")
    if results.partial:
        click.echo(STOPPED_EARLY)


def _size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    if size < 1024:
        return f"{size} B"
    if size < 1024**2:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024**2:.1f} MB"
