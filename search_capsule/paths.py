"""The capsule's own URL space, in one place: routes match these paths, pages link to them.

Links on our pages are absolute paths (``/search?...``), never full URLs: clients resolve
them against the URL they requested, so the pages stay right behind any host name, port or
proxy without the capsule having to know its public name.
"""

from __future__ import annotations

from urllib.parse import quote

HOME = "/"
SEARCH = "/search"
VERBOSE_SEARCH = "/v/search"
BACKLINKS = "/backlinks"
STATISTICS = "/statistics"
KNOWN_HOSTS = "/known-hosts"
NEWEST_HOSTS = "/newest-hosts"
NEWEST_PAGES = "/newest-pages"
NEWEST_PAGES_ATOM = "/newest-pages.atom"
KNOWN_FEEDS = "/known-feeds"
CAPSULE = "/capsule"
KNOWN_EXCLUDES = "/known-excludes"
ADD_SEED = "/add-seed"
ABOUT = "/about"
DOC_SEARCHING = "/documentation/searching"
DOC_INDEXING = "/documentation/indexing"
ROBOTS = "/robots.txt"

#: Paths whose answers are computed per request; other crawlers are asked to stay out.
DYNAMIC = (SEARCH, "/v/", BACKLINKS, CAPSULE, ADD_SEED)


def encode_query(value: str) -> str:
    """Percent-encode user input for a query component.

    Everything but unreserved characters is encoded: spaces become ``%20`` (Gemini spec
    section 3.2.1 for input), and a literal ``+`` becomes ``%2B`` so that no client or proxy
    can mistake it for the web-form convention of ``+`` meaning a space.
    """
    return quote(value, safe="")


def search(query: str, page: int = 1, *, verbose: bool = False) -> str:
    base = VERBOSE_SEARCH if verbose else SEARCH
    path = base if page <= 1 else f"{base}/{page}"
    return f"{path}?{encode_query(query)}"


def with_query(path: str, value: str) -> str:
    return f"{path}?{encode_query(value)}"
