"""Which handler answers which path, and the canonical spelling of every path.

Each resource has one URL. Other spellings that clearly mean it (a trailing slash,
``/index.gmi``, ``/search/1``, a page number with leading zeros) get ``31 PERMANENT
REDIRECT`` to the canonical URL, so clients and crawlers learn one address and bookmarks
converge. Anything else is ``51 NOT FOUND``.
"""

from __future__ import annotations

from dataclasses import dataclass

from search_capsule import paths
from search_capsule.handlers import listings, search, seed, static
from search_capsule.services import Handler


@dataclass(frozen=True, slots=True)
class Route:
    handler: Handler
    # Costly pages run queries or searches: they are throttled per client.
    costly: bool = False
    # Paged routes also answer PATH/N for page N >= 2.
    paged: bool = False
    verbose: bool = False


ROUTES: dict[str, Route] = {
    paths.HOME: Route(listings.home, costly=True),
    paths.SEARCH: Route(search.search, costly=True, paged=True),
    paths.VERBOSE_SEARCH: Route(search.search, costly=True, paged=True, verbose=True),
    paths.BACKLINKS: Route(listings.backlinks, costly=True),
    paths.STATISTICS: Route(listings.statistics, costly=True),
    paths.KNOWN_HOSTS: Route(listings.known_hosts, costly=True),
    paths.NEWEST_HOSTS: Route(listings.newest_hosts, costly=True),
    paths.NEWEST_PAGES: Route(listings.newest_pages, costly=True),
    paths.NEWEST_PAGES_ATOM: Route(listings.newest_pages_atom, costly=True),
    paths.KNOWN_FEEDS: Route(listings.known_feeds, costly=True),
    paths.CAPSULE: Route(listings.capsule, costly=True),
    paths.ADD_SEED: Route(seed.add_seed, costly=True),
    paths.KNOWN_EXCLUDES: Route(static.known_excludes),
    paths.ABOUT: Route(static.document),
    paths.DOC_SEARCHING: Route(static.document),
    paths.DOC_INDEXING: Route(static.document),
    paths.ROBOTS: Route(static.robots),
}

# Spellings people and old links use for a canonical path.
ALIASES = {
    "/index.gmi": paths.HOME,
    "/index.gemini": paths.HOME,
    "/v": paths.VERBOSE_SEARCH,
    "/documentation": paths.DOC_SEARCHING,
}


@dataclass(frozen=True, slots=True)
class Match:
    route: Route
    page: int


@dataclass(frozen=True, slots=True)
class Redirect:
    path: str  # the canonical path; the query is kept as it was


def resolve(path: str) -> Match | Redirect | None:
    """Find the route for ``path`` (already normalized: no dot segments, never empty)."""
    route = ROUTES.get(path)
    if route is not None:
        return Match(route, 1)
    if path in ALIASES:
        return Redirect(ALIASES[path])
    if len(path) > 1 and path.endswith("/"):
        stripped = path.rstrip("/") or "/"
        found = resolve(stripped)
        return Redirect(stripped) if isinstance(found, Match) else found
    base, _, number = path.rpartition("/")
    route = ROUTES.get(base)
    if route is None or not route.paged or not number.isascii() or not number.isdigit():
        return None
    page = int(number)
    if page < 1:
        return None
    if page == 1:
        return Redirect(base)
    if number != str(page):
        return Redirect(f"{base}/{page}")
    return Match(route, page)
