"""Atom and RSS feeds: their title, language, item titles and links, read safely.

A feed is XML, and XML parsers will expand entities on request: a DTD is refused outright
(the door to entity expansion bombs and external entities), and expat reads the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.parsers import expat

FEED_MIMES = {
    "application/atom+xml": "atom",
    "application/rss+xml": "rss",
}
_XML_NS = "http://www.w3.org/XML/1998/namespace"


@dataclass(frozen=True, slots=True)
class Feed:
    kind: str | None
    title: str | None
    links: list[tuple[str, str]]
    lang: str | None
    text: str


class _ForbiddenMarkup(Exception):
    """A DTD in a feed: the door to entity expansion bombs and external entities."""


def read_feed(body: bytes, text: str) -> Feed | None:
    """Parse Atom/RSS with expat, refusing any DTD; ``None`` when it is not usable XML.

    The raw bytes are tried first because the XML declaration names their encoding; a feed
    whose declaration disagrees with its bytes gets a second chance from the decoded text.
    """
    for data in (body, _XML_DECLARATION.sub("", text, count=1).encode("utf-8")):
        reader = _FeedReader()
        try:
            reader.parse(data)
        except (expat.ExpatError, _ForbiddenMarkup, ValueError):
            continue
        return reader.result()
    return None


_XML_DECLARATION = re.compile(r"^\ufeff?\s*<\?xml[^>]*\?>")
_ITEMS = ("entry", "item")
_CONTAINERS = ("feed", "channel")


class _FeedReader:
    def __init__(self) -> None:
        self._stack: list[str] = []
        self._buffer: list[str] | None = None
        self._item: tuple[list[str | None], list[str]] | None = None
        self.root: str | None = None
        self.title: str | None = None
        self.lang: str | None = None
        self.links: list[tuple[str, str]] = []
        self._channel_links: list[str] = []
        self._titles: list[str] = []

    def parse(self, data: bytes) -> None:
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.StartDoctypeDeclHandler = self._forbid
        parser.EntityDeclHandler = self._forbid
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._data
        parser.Parse(data, True)

    def result(self) -> Feed:
        kind = {"feed": "atom", "rss": "rss", "RDF": "rss"}.get(self.root or "")
        links = [(url, self.title or "") for url in self._channel_links] + self.links
        return Feed(kind, self.title, links, self.lang, "\n".join(self._titles))

    @staticmethod
    def _forbid(*_: object) -> None:
        raise _ForbiddenMarkup

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        local = name.rpartition(" ")[2]
        if self.root is None:
            self.root = local
            self.lang = (attrs.get(f"{_XML_NS} lang") or "").strip() or None
        parent = self._stack[-1] if self._stack else None
        self._stack.append(local)
        if local in _ITEMS:
            self._item = ([None], [])
        elif local == "link" and parent in _ITEMS + _CONTAINERS:
            href = attrs.get("href")
            if href:
                self._add_link(href.strip())
            else:
                self._buffer = []  # RSS: <link>URL</link>
        elif local in ("title", "language"):
            self._buffer = []

    def _data(self, data: str) -> None:
        if self._buffer is not None:
            self._buffer.append(data)

    def _end(self, name: str) -> None:
        local = self._stack.pop()
        parent = self._stack[-1] if self._stack else None
        if self._buffer is not None and local in ("title", "link", "language"):
            value = " ".join("".join(self._buffer).split())
            self._buffer = None
            if local == "title" and value:
                self._titles.append(value)
                if parent in _ITEMS and self._item is not None and self._item[0][0] is None:
                    self._item[0][0] = value
                elif parent in _CONTAINERS and self.title is None:
                    self.title = value
            elif local == "link" and value:
                self._add_link(value)
            elif local == "language" and value and self.lang is None:
                self.lang = value
        if local in _ITEMS and self._item is not None:
            (title,), urls = self._item
            self.links.extend((url, title or "") for url in urls)
            self._item = None

    def _add_link(self, url: str) -> None:
        if self._item is not None:
            self._item[1].append(url)
        else:
            self._channel_links.append(url)
