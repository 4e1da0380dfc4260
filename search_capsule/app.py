"""The search capsule as a Gemini application: one request in, one response out.

The generic server (:mod:`gemserve.server`) has already refused malformed requests (59),
other hosts and schemes (53) and slow clients by the time a request gets here. This layer
adds what is specific to the capsule: routing with canonical redirects (31), decoding the
user's input, per-client throttling (44), overload shedding (41) and a store that cannot
answer (41 as well).

Why 41 SERVER UNAVAILABLE for a locked, unreachable or damaged store: the spec gives 41 to a
server "unavailable due to overload or maintenance", which is what every store page is then,
and clients and crawlers read it as "come back later" for the whole capsule. 40 would claim
only this request failed; 42 (a "CGI process" that died) stays what the generic server
answers for our bugs, so the two never look alike in a log or to a client.
"""

from __future__ import annotations

import logging

from gemserve.admission import client_key
from gemserve.server import Request, Response
from search_capsule import routes, user_input
from search_capsule.services import Call, Overloaded, Services
from search_capsule.throttle import SlowDown
from sextant.errors import MalformedRequest, StoreUnavailable
from sextant.protocol import Status

NOT_FOUND = "no such page here; the start page links to all of them"
OVERLOADED = "the search capsule is busy; please try again in a few seconds"
# Visitors can do nothing about the cause, and its details are for the operator's log.
STORE_UNAVAILABLE = "the store is busy or unreachable; try again in a minute"

log = logging.getLogger(__name__)


class CapsuleApp:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.throttle = services.throttle

    def close(self) -> None:
        """Release what the app holds open: worker threads, the searcher, the store engine."""
        self.services.search.close()
        self.services.store.close()

    async def __call__(self, request: Request) -> Response:
        url = request.url
        found = routes.resolve(url.path)
        if found is None:
            return Response.not_found(NOT_FOUND)
        if isinstance(found, routes.Redirect):
            return Response.redirect(str(url.with_path(found.path, url.query)), permanent=True)
        try:
            query = user_input.decode(url.query)
        except MalformedRequest as exc:
            return Response.bad_request(str(exc))
        route = found.route
        client = client_key(request.peer[0])
        if route.costly and self.throttle is not None:
            wait = self.throttle.take(client)
            if wait:
                return Response.slow_down(wait)
        call = Call(url=url, query=query, page=found.page, verbose=route.verbose, client=client)
        try:
            return await route.handler(self.services, call)
        except Overloaded:
            return Response(Status.SERVER_UNAVAILABLE, OVERLOADED)
        except StoreUnavailable as exc:
            log.warning("%s: %s", url, exc)
            return Response(Status.SERVER_UNAVAILABLE, STORE_UNAVAILABLE)
        except SlowDown as exc:  # its searches sent together overspent its allowance
            return Response.slow_down(exc.seconds)
