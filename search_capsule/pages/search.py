"""Search result pages, compact and verbose: pure functions from results to gemtext."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from indexer.query import VERBATIM, Hit, SearchResults
from search_capsule import paths
from search_capsule.pages.lines import (
    day,
    document,
    heading,
    human_size,
    item,
    link,
    plural,
    quote,
    text,
)
from sextant.display import one_line

# The capsule's own "how to search" links, under every results page.
_FOOTER = (
    link(paths.SEARCH, "New search"),
    link(paths.DOC_SEARCHING, "How to search: phrases, OR, -word, site:, lang:, type: ..."),
    link(paths.HOME, "Home"),
)


# A search whose budget ran out: its results are the best found before it stopped.
STOPPED_EARLY = "Stopped early: the query was too costly; try fewer words or phrases."


def _quoted(query: str) -> str:
    return f"“{one_line(query)}”"


def results_page(results: SearchResults, *, verbose: bool, max_page: int) -> str:
    """One page of results; ``max_page`` is the deepest page the capsule will serve."""
    query = results.query
    last = min(results.pages, max_page)
    lines = [heading(f"Search: {_quoted(query)}"), ""]
    if results.total == 0 and results.partial:
        lines.append(text(STOPPED_EARLY))
        lines += ["", *_FOOTER]
        return document(lines)
    if results.total == 0:
        lines.append(text(f"No pages match {_quoted(query)}."))
        lines += _suggestion(results, verbose)
        lines += ["", text("Fewer or more general words often help; so does checking the filters.")]
        lines += ["", *_FOOTER]
        return document(lines)
    lines.append(
        text(
            f"{plural(results.total, 'result')} · page {results.page} of {last} · "
            f"{results.seconds:.3f} s"
        )
    )
    if results.partial:
        lines.append(text(STOPPED_EARLY))
    lines += _correction(results, verbose)
    lines += _suggestion(results, verbose)
    for hit in results.hits:
        lines.append("")
        lines += _verbose_hit(hit) if verbose else _hit(hit)
    lines += ["", *_navigation(results, last, verbose), "", *_FOOTER]
    return document(lines)


def past_the_end(results: SearchResults, page: int, *, verbose: bool, max_page: int) -> str:
    """Page ``page`` was asked for, but the results (or the capsule's limit) end before it."""
    query = results.query
    last = max(1, min(results.pages, max_page))
    lines = [heading(f"Search: {_quoted(query)}"), ""]
    lines.append(text(f"There is no page {page} of results for {_quoted(query)}."))
    if results.total:
        shown = f"{plural(results.total, 'result')} in all"
        if results.pages > max_page:
            shown += f"; the first {plural(max_page, 'page')} of results are shown"
        lines += [text(shown + "."), ""]
        lines.append(link(paths.search(query, last, verbose=verbose), f"Last page ({last})"))
        lines.append(link(paths.search(query, 1, verbose=verbose), "First page"))
    lines += ["", *_FOOTER]
    return document(lines)


def _suggestion(results: SearchResults, verbose: bool) -> list[str]:
    if not results.suggestion or results.suggestion == results.query:
        return []
    target = paths.search(results.suggestion, verbose=verbose)
    return ["", link(target, f"Did you mean {_quoted(results.suggestion)}?")]


def _correction(results: SearchResults, verbose: bool) -> list[str]:
    """The query found nothing, so these are its correction's results: say so, and offer
    the query as typed (its ``!`` turns the correction off)."""
    if results.corrected_from is None:
        return []
    original = results.corrected_from
    target = paths.search(VERBATIM + original, verbose=verbose)
    return [
        "",
        text(f"No pages match {_quoted(original)}: showing results for {_quoted(results.query)}."),
        link(target, f"Search instead for {_quoted(original)}"),
    ]


def _title(hit: Hit) -> str:
    """The page's title, else the last part of its path, else its host."""
    if hit.title and one_line(hit.title):
        return one_line(hit.title)
    path = unquote(urlsplit(hit.url).path).rstrip("/")
    return path.rsplit("/", 1)[-1] or hit.host


def _facts(hit: Hit) -> str:
    facts = [hit.host, human_size(hit.size)]
    if hit.lang:
        facts.append(hit.lang)
    if hit.mime and not hit.mime.startswith("text/gemini"):
        facts.append(hit.mime)
    return " · ".join(facts)


def _hit(hit: Hit) -> list[str]:
    lines = [link(hit.url, _title(hit)), text(_facts(hit))]
    if one_line(hit.snippet):
        lines.append(quote(hit.snippet))
    return lines


def _verbose_hit(hit: Hit) -> list[str]:
    lines = [link(hit.url, _title(hit))]
    if one_line(hit.snippet):
        lines.append(quote(hit.snippet))
    lines += [
        item(f"URL: {hit.url}"),
        item(f"capsule: {hit.host}"),
        item(f"score: {hit.score:.3f} · link-analysis score: {hit.rank:.6f}"),
        item(
            f"type: {hit.mime or 'unknown'} · charset: {hit.charset or 'none'} · "
            f"language: {hit.lang or 'unknown'} · size: {human_size(hit.size)}"
        ),
        item(
            f"dated: {hit.date.isoformat() if hit.date else 'unknown'} · "
            f"fetched: {day(hit.fetched_at)} · inbound links: {hit.inbound:,}"
        ),
    ]
    return lines


def _navigation(results: SearchResults, last: int, verbose: bool) -> list[str]:
    query, page = results.query, results.page
    lines = []
    if page < last:
        lines.append(
            link(paths.search(query, page + 1, verbose=verbose), f"Next page ({page + 1})")
        )
    if page > 1:
        lines.append(
            link(paths.search(query, page - 1, verbose=verbose), f"Previous page ({page - 1})")
        )
    if verbose:
        lines.append(link(paths.search(query, page), "Compact view of these results"))
    else:
        lines.append(
            link(paths.search(query, page, verbose=True), "Verbose view: scores and details")
        )
    return lines


def index_missing() -> str:
    """What a search shows before the first index exists: an explanation, not an error."""
    return document(
        [
            heading("Nothing to search yet"),
            "",
            text("This capsule has no search index yet, so every search would come back empty."),
            text(
                "Its operator builds one with `sextant crawl` followed by `sextant index`; "
                "searches work as soon as that finishes, without restarting the capsule."
            ),
            "",
            link(paths.KNOWN_HOSTS, "Capsules known so far"),
            link(paths.ABOUT, "About this capsule"),
            link(paths.HOME, "Home"),
        ]
    )


def query_error(query: str, message: str, *, verbose: bool) -> str:
    """A query the index cannot parse: say what is wrong and how to fix it."""
    return document(
        [
            heading("That query could not be understood"),
            "",
            quote(query),
            text(message),
            "",
            link(paths.VERBOSE_SEARCH if verbose else paths.SEARCH, "Try another search"),
            link(paths.DOC_SEARCHING, "The query language, with examples"),
            link(paths.HOME, "Home"),
        ]
    )
