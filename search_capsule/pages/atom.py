"""The newest pages as an Atom feed (RFC 4287), for feed readers that do not read gemsub.

Titles and URLs come from strangers' capsules, and XML is less forgiving than gemtext: a
``<`` or ``]]>`` in a title must be escaped, and most control characters are not allowed in
an XML 1.0 document at all, escaped or not, so one NUL or ESC would make a parser reject
the whole feed. The document is built with ElementTree, which escapes markup; the text goes
through the same sanitizer as every page of the capsule (controls become U+FFFD, bidi
controls go), and what that leaves which XML still forbids (surrogates, U+FFFE, U+FFFF)
becomes U+FFFD as well.

Atom wants absolute IRIs for the feed's id and links, while the capsule's pages link by
path only. The feed takes them from the URL the client asked for: that is the name by which
the client reaches the capsule, whatever host name, port or proxy stands in front of it.
"""

from __future__ import annotations

import re
from datetime import datetime
from xml.etree import ElementTree

from search_capsule import paths
from search_capsule.pages.lines import safe_url
from search_capsule.store_views import Listing, PageRow
from sextant.display import REPLACEMENT, one_line
from sextant.urls import GeminiURL

MIME = "application/atom+xml"
_ATOM = "http://www.w3.org/2005/Atom"
_TITLE = "Newest pages"
_SUBTITLE = "Pages the crawler found most recently, each dated the day it first met the page."
# Allowed in XML 1.0 (section 2.2, production [2] Char) only outside these ranges; the
# sanitizer has already removed the controls below U+0020.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def newest_pages(listing: Listing, requested: GeminiURL, *, now: datetime) -> bytes:
    """The feed as UTF-8 XML; ``requested`` is the URL the client used to ask for it."""
    rows = [row for row in listing.rows if isinstance(row, PageRow)]
    feed = ElementTree.Element("feed", xmlns=_ATOM)
    self_url = str(requested.with_path(paths.NEWEST_PAGES_ATOM))
    _add(feed, "id", self_url)
    _add(feed, "title", _TITLE)
    _add(feed, "subtitle", _SUBTITLE)
    newest = max((row.when for row in rows if row.when is not None), default=now)
    _add(feed, "updated", _timestamp(newest))
    _add(feed, "link", rel="self", type=MIME, href=self_url)
    gemtext = str(requested.with_path(paths.NEWEST_PAGES))
    _add(feed, "link", rel="alternate", type="text/gemini", href=gemtext)
    author = _add(feed, "author")
    _add(author, "name", "Sextant search capsule")
    for row in rows:
        entry = _add(feed, "entry")
        url = safe_url(row.url)
        _add(entry, "id", url)
        _add(entry, "title", row.title or row.url)
        _add(entry, "updated", _timestamp(row.when or now))
        _add(entry, "link", rel="alternate", href=url)
        _add(_add(entry, "author"), "name", row.display_host)
    return ElementTree.tostring(feed, encoding="utf-8", xml_declaration=True)


def _add(
    parent: ElementTree.Element, tag: str, text: str | None = None, **attributes: str
) -> ElementTree.Element:
    element = ElementTree.SubElement(
        parent, tag, {name: _xml_text(value) for name, value in attributes.items()}
    )
    if text is not None:
        element.text = _xml_text(text)
    return element


def _xml_text(value: str) -> str:
    return _NOT_XML.sub(REPLACEMENT, one_line(value))


def _timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC, the form Atom's date constructs take; the store keeps naive UTC."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
