"""Pages that do not depend on the store: documentation, robots.txt, known excludes."""

from __future__ import annotations

from functools import cache
from importlib import resources

from search_capsule import paths
from search_capsule.excludes import ExcludeSection
from search_capsule.pages.lines import document, heading, item, link, text

#: Documents shipped in ``search_capsule/static``, by the path they are served at.
DOCUMENTS = {
    paths.ABOUT: "about.gmi",
    paths.DOC_SEARCHING: "documentation/searching.gmi",
    paths.DOC_INDEXING: "documentation/indexing.gmi",
}


@cache
def shipped_document(path: str) -> str:
    """A documentation page; read once, they never change while the capsule runs."""
    return (resources.files("search_capsule") / "static" / DOCUMENTS[path]).read_text("utf-8")


def robots_txt() -> str:
    """Our own robots.txt: other crawlers may read the documentation and the listings, but
    not the pages computed per request (an endless space of queries)."""
    lines = ["# Dynamic pages are computed per request; crawling them helps nobody.", ""]
    lines.append("User-agent: *")
    lines += [f"Disallow: {path}" for path in paths.DYNAMIC]
    return "\n".join(lines) + "\n"


def known_excludes(sections: tuple[ExcludeSection, ...]) -> str:
    lines = [
        heading("What the crawler avoids"),
        "",
        text(
            "Some places in Geminispace never end: proxies onto the web, git browsers, "
            "calendars, query loops. The crawler skips URLs matching these rules, which ship "
            "with it. Patterns starting with gemini:// are URL prefixes (* stays inside one "
            "path segment, ** crosses them, $ marks the end); patterns starting with re: are "
            "regular expressions searched in the URL."
        ),
        text(
            "The operator of this search engine may also remove a capsule or a part of one, "
            "usually because its author asked: those URL prefixes are listed last, with the "
            "reason, and are never crawled again."
        ),
        text(
            "Beyond these rules, the crawler caps how many pages and how deep it goes in one "
            "capsule, and how many query-string variants of one path it follows."
        ),
    ]
    if not sections:
        lines += ["", text("This installation has no built-in rules.")]
    for section in sections:
        lines += ["", heading(section.title or "Rules", 2)]
        for rule in section.rules:
            lines.append(item(f"{rule.pattern} — {rule.reason}" if rule.reason else rule.pattern))
    lines += [
        "",
        link(paths.DOC_INDEXING, "How the crawler behaves"),
        link(paths.HOME, "Home"),
    ]
    return document(lines)
