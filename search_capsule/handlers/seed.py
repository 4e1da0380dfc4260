"""``/add-seed``: a visitor suggests a URL; it is checked and left for the next crawl."""

from __future__ import annotations

from gemserve.server import Response
from search_capsule import paths
from search_capsule.pages.listings import unusable_url
from search_capsule.pages.seed import seed_added
from search_capsule.seeds import request_seed, validate_seed
from search_capsule.services import Call, Services
from sextant.errors import InvalidURL

PROMPT = "URL of a Gemini capsule or page for the crawler to visit"


async def add_seed(services: Services, call: Call) -> Response:
    if not call.query:
        return Response.input(PROMPT)
    try:
        url = validate_seed(call.query, ports=services.limits.seed_ports)
    except InvalidURL as exc:
        return Response.gemtext(unusable_url("Suggest a capsule", str(exc), paths.ADD_SEED))
    result = await services.store.run(request_seed, url, now=services.now())
    return Response.gemtext(seed_added(result))
