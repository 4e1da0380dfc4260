"""``/search`` and ``/v/search``: prompt, run the query off the event loop, render."""

from __future__ import annotations

from gemserve.server import Response
from search_capsule import paths
from search_capsule.pages import search as pages
from search_capsule.services import Call, Services
from sextant.errors import QueryError

PROMPT = "Search Geminispace"


async def search(services: Services, call: Call) -> Response:
    base = paths.VERBOSE_SEARCH if call.verbose else paths.SEARCH
    if not call.query:
        if call.page > 1:
            # A page number without a query names nothing; start from the prompt.
            return Response.redirect(str(call.url.with_path(base)))
        return Response.input(PROMPT)
    limits = services.limits
    # Past the deepest page we serve, page 1 (usually cached) gives the totals to explain.
    page = call.page if call.page <= limits.max_page else 1
    try:
        results = await services.search.search(
            call.query, page=page, page_size=limits.page_size, client=call.client
        )
    except QueryError as exc:
        return Response.gemtext(pages.query_error(call.query, str(exc), verbose=call.verbose))
    if results is None:
        return Response.gemtext(pages.index_missing())
    if page != call.page or (results.total and not results.hits):
        body = pages.past_the_end(
            results, call.page, verbose=call.verbose, max_page=limits.max_page
        )
    else:
        body = pages.results_page(results, verbose=call.verbose, max_page=limits.max_page)
    return Response.gemtext(body)
