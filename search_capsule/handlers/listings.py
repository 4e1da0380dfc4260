"""Handlers for the pages drawn from the store: start page, statistics, lists, one capsule."""

from __future__ import annotations

import logging
import time

from gemserve.server import Response
from search_capsule import paths, store_views
from search_capsule.pages import atom, overview
from search_capsule.pages import capsule as capsule_pages
from search_capsule.pages import listings as pages
from search_capsule.services import Call, Services
from search_capsule.user_input import typed_url
from sextant import urls
from sextant.census import census
from sextant.errors import InvalidURL

log = logging.getLogger(__name__)

BACKLINKS_PROMPT = "URL whose backlinks you want to see"
CAPSULE_PROMPT = "Host name of the capsule (e.g. example.org or example.org:1966)"

#: The listings every visitor may ask for, the same for all of them (no query).
WARM_LISTINGS = (
    census,
    store_views.newest_pages,
    store_views.known_hosts,
    store_views.newest_hosts,
    store_views.known_feeds,
)


async def warm(services: Services) -> None:
    """Compute the shared listings once, at start, before a visitor asks for them.

    At 600,000 pages the first front page took a minute of a store thread; without this the
    first visitors after a restart wait for it. One listing at a time, so that warming takes
    at most one store thread from the searches that arrive meanwhile. A listing that fails
    here, whatever the error, is left for the first visitor to compute (and to see the error
    of): a head start must never stop the server.
    """
    started = time.perf_counter()
    for listing in WARM_LISTINGS:
        try:
            await services.store.cached(listing)
        except Exception as exc:
            log.warning("could not prepare %s at start: %r", listing.__name__, exc)
    log.info("listings ready in %.1f s", time.perf_counter() - started)


async def home(services: Services, call: Call) -> Response:
    return Response.gemtext(overview.home(await services.store.cached(census)), lang="en")


async def statistics(services: Services, call: Call) -> Response:
    return Response.gemtext(overview.statistics(await services.store.cached(census)), lang="en")


async def known_hosts(services: Services, call: Call) -> Response:
    return Response.gemtext(pages.known_hosts(await services.store.cached(store_views.known_hosts)))


async def newest_hosts(services: Services, call: Call) -> Response:
    listing = await services.store.cached(store_views.newest_hosts)
    return Response.gemtext(pages.newest_hosts(listing))


async def newest_pages(services: Services, call: Call) -> Response:
    listing = await services.store.cached(store_views.newest_pages)
    return Response.gemtext(pages.newest_pages(listing))


async def newest_pages_atom(services: Services, call: Call) -> Response:
    listing = await services.store.cached(store_views.newest_pages)
    return Response.success(atom.newest_pages(listing, call.url, now=services.now()), atom.MIME)


async def known_feeds(services: Services, call: Call) -> Response:
    return Response.gemtext(pages.known_feeds(await services.store.cached(store_views.known_feeds)))


async def backlinks(services: Services, call: Call) -> Response:
    if not call.query:
        return Response.input(BACKLINKS_PROMPT)
    try:
        target = typed_url(call.query)
    except InvalidURL as exc:
        return Response.gemtext(pages.unusable_url("Backlinks", str(exc), paths.BACKLINKS))
    found = await services.store.cached(store_views.backlinks, target)
    return Response.gemtext(pages.backlinks(found))


async def capsule(services: Services, call: Call) -> Response:
    if not call.query:
        return Response.input(CAPSULE_PROMPT)
    text = call.query.strip()
    try:
        # A capsule is always gemini://, so "host:port" is never read as a scheme here.
        url = urls.parse(text if "://" in text else "gemini://" + text.removeprefix("//"))
    except InvalidURL as exc:
        return Response.gemtext(pages.unusable_url("Capsule", str(exc), paths.CAPSULE))
    health = await services.store.cached(store_views.capsule_health, url.host, url.port)
    if health is None:
        on_host = await services.store.cached(store_views.capsules_on_host, url.host)
        if len(on_host) == 1:
            health = await services.store.cached(
                store_views.capsule_health, on_host[0].host, on_host[0].port
            )
        elif on_host:
            return Response.gemtext(capsule_pages.choose_port(url.display_host, on_host))
    if health is None:
        return Response.gemtext(capsule_pages.unknown_capsule(url.authority))
    return Response.gemtext(capsule_pages.capsule_page(health, now=services.now()))
