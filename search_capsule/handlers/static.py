"""Handlers for pages that need no index: documentation, robots.txt, known excludes."""

from __future__ import annotations

from functools import cache

from gemserve.server import Response
from search_capsule.excludes import ExcludeSection, builtin_rules, operator_removals
from search_capsule.pages import static as pages
from search_capsule.services import Call, Services


async def document(services: Services, call: Call) -> Response:
    return Response.gemtext(pages.shipped_document(call.url.path), lang="en")


async def robots(services: Services, call: Call) -> Response:
    return Response.success(pages.robots_txt().encode("utf-8"), "text/plain; charset=utf-8")


@cache
def _rules() -> tuple[ExcludeSection, ...]:
    return builtin_rules()


async def known_excludes(services: Services, call: Call) -> Response:
    removed = await services.store.cached(operator_removals)
    return Response.gemtext(pages.known_excludes((*_rules(), *removed)), lang="en")
