"""Store rows → index documents: what of a page is searchable, and how.

* ``ok`` pages are indexed whatever their type: text bodies (``text/*``) for their words, every
  other type (images, archives) by URL words, anchor text and type, so ``type:image`` finds them.
* ``input`` pages (``1x`` endpoints) are indexed by their prompt (the ``1x`` meta, Gemini spec
  section 3.2.1), with ``kind`` ``input`` for ``type:input``.
* Every other state is not in the index (:data:`INDEXED_STATES`).

Gemtext bodies are re-parsed (:func:`sextant.gemtext.parse`): the body field gets the prose
(paragraphs, list items, quotes, link labels, headings), headings also get a field of their
own, and preformatted blocks contribute only their alt text, because ASCII art and code
would drown the prose. Markdown bodies are read the same way (:func:`sextant.markdown.readable`:
the syntax taken away, link labels kept, fenced code left out).

Anchor text is the labels of links pointing at the page from other pages, links to a page that
moved here for good (``31``, :mod:`sextant.store.redirects`) included. Each distinct label
counts once per linking capsule (scope), so a capsule repeating one label on a thousand pages
weighs what one page does: the simplest link-farm defence, and it keeps the field short.
"""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from sqlalchemy import Connection, Row, select
from sqlalchemy.sql.elements import ColumnElement

from indexer.analysis import (
    analyze,
    analyze_parts,
    detect_language,
    fold,
    primary_language,
)
from indexer.dates import UNKNOWN_DATE, day_number, page_date
from indexer.navigation import capsule_names, is_index_file, is_start_page
from indexer.schema import FLAG_INDEX_FILE, FLAG_TEXTLESS, PART_GAP, text_columns
from indexer.sizefilter import UNKNOWN_SIZE
from sextant import gemtext, markdown
from sextant.errors import InvalidURL
from sextant.store.models import Link, Page
from sextant.store.redirects import PermanentRedirects
from sextant.urls import parse as parse_url

#: Not a field: the document's distinct words as written, for the spelling vocabulary
#: (Whoosh ignores keys starting with "_").
SPELLING_KEY = "_spelling"

#: Page states that have a document in the index.
INDEXED_STATES = ("ok", "input")

#: At most this many distinct anchor labels per page, each cut to ANCHOR_MAX_CHARS: a page
#: linked from everywhere gains nothing from its thousandth label.
MAX_ANCHORS = 200
ANCHOR_MAX_CHARS = 200
TITLE_MAX_CHARS = 200
_NONE_MOVED = PermanentRedirects()

PAGE_COLUMNS = (
    Page.id,
    Page.url,
    Page.scope,
    Page.state,
    Page.mime,
    Page.charset,
    Page.lang,
    Page.size,
    Page.body,
    Page.title,
    Page.meta,
    Page.content_hash,
    Page.feed_kind,
    Page.fetched_at,
    Page.discovered_at,
)


@dataclass(slots=True)
class Inbound:
    """What other pages say about one page: their labels and how many of them link."""

    labels: list[str] = field(default_factory=list)
    sources: set[int] = field(default_factory=set)
    _seen: set[tuple[str, str]] = field(default_factory=set)

    def add(self, source_id: int, scope: str, label: str) -> None:
        self.sources.add(source_id)
        label = label.strip()
        if not label or len(self.labels) >= MAX_ANCHORS:
            return
        key = (scope, fold(label))
        if key not in self._seen:
            self._seen.add(key)
            self.labels.append(label[:ANCHOR_MAX_CHARS])


def iter_pages(
    connection: Connection, where: ColumnElement[bool], *, batch_size: int = 500
) -> Iterator[Sequence[Row[*tuple[Any, ...]]]]:
    """Indexable pages matching ``where``, in id order, a batch at a time (streamed)."""
    query = (
        select(*PAGE_COLUMNS)
        .where(Page.state.in_(INDEXED_STATES), where)
        .order_by(Page.id)
        .execution_options(yield_per=batch_size)
    )
    result = connection.execute(query)
    yield from result.partitions(batch_size)


def inbound_for(
    connection: Connection,
    page_ids: Sequence[int],
    hubs: AbstractSet[int] = frozenset(),
    moved: PermanentRedirects = _NONE_MOVED,
) -> dict[int, Inbound]:
    """Labels and linking pages for each of ``page_ids`` (self-links excluded), counting
    links to the pages ``moved`` says permanently redirect to them.

    Links from ``hubs`` (directories, search result pages: see :mod:`indexer.rank`) count as
    inbound links but lend no anchor text: a search engine's result page repeats whatever
    words it was asked for, and a directory's label is whatever the submitter typed.
    """
    found: dict[int, Inbound] = {}
    if not page_ids:
        return found
    wanted = [*page_ids, *(old for new in page_ids for old in moved.sources_of.get(new, ()))]
    query = (
        select(Link.target_id, Link.source_id, Link.label, Page.scope)
        .join(Page, Page.id == Link.source_id)
        .where(Link.target_id.in_(wanted), Link.source_id != Link.target_id)
        .order_by(Link.target_id, Link.id)
    )
    for linked_id, source_id, label, scope in connection.execute(query):
        assert linked_id is not None  # the IN list above holds page ids only
        target_id = moved.resolve(linked_id)
        if source_id == target_id:
            continue  # the page links to its own old address
        inbound = found.get(target_id)
        if inbound is None:
            inbound = found[target_id] = Inbound()
        inbound.add(source_id, scope, "" if source_id in hubs else label or "")
    return found


def documents_for(
    connection: Connection,
    rows: Sequence[Row[Any]],
    hubs: AbstractSet[int] = frozenset(),
    moved: PermanentRedirects = _NONE_MOVED,
) -> Iterator[dict[str, Any]]:
    """Documents for a batch of page rows, with their inbound links looked up in one query."""
    inbound = inbound_for(connection, [row.id for row in rows], hubs, moved)
    for row in rows:
        document = make_document(row, inbound.get(row.id))
        if document is not None:
            yield document


def make_document(row: Row[Any], inbound: Inbound | None) -> dict[str, Any] | None:
    """The index document for one page row, or None when its URL cannot be parsed."""
    try:
        url = parse_url(row.url)
    except InvalidURL:
        return None
    inbound = inbound or Inbound()
    title = row.title
    headings: Sequence[str] = ()
    body = ""
    prompt = ""
    mime = (row.mime or "").split(";", 1)[0].strip().lower() or None
    if row.state == "input":
        prompt = row.meta or ""
        kind = "input"
        mime = None
    else:
        kind = "page"
        if mime is not None and mime.startswith("text/") and row.body:
            if mime == "text/gemini":
                parsed = gemtext.parse(row.body)
                title = title or parsed.title
                headings = [heading.text for heading in parsed.headings]
                body = "\n".join((parsed.text, *parsed.preformatted_alt))
            elif mime == "text/markdown":
                prose = markdown.readable(row.body)
                title = title or (prose.headings[0] if prose.headings else None)
                title = title or gemtext.first_line(prose.text)
                headings = list(prose.headings)
                body = prose.text
            else:
                body = row.body
                title = title or gemtext.first_line(body)
    lang = primary_language(row.lang)
    if lang is None and (body or prompt):
        lang = detect_language(f"{title or ''}\n{body or prompt}")
    title = (title or "").strip()[:TITLE_MAX_CHARS] or None
    stored_title = title or (prompt.strip()[:TITLE_MAX_CHARS] or None)
    headings_text = "\n".join(headings)
    anchors = "\n".join(inbound.labels)
    words_of_url = url_words(url.host, url.path, url.query)
    # Analyzed here, once, collecting the words the spelling vocabulary needs on the way.
    seen: set[str] = set()
    parts = ((title or "", True), (body, True), (prompt, True), (anchors, False))
    text = analyze_parts(lang, (*parts, (words_of_url, False)), PART_GAP, seen)
    size = row.size
    group = row.content_hash or f"p{row.id}"
    dated = page_date(
        inbound.labels,
        headings[0] if headings else None,
        unquote(url.path),
        row.discovered_at,
        row.fetched_at,
    )
    return {
        "pid": str(row.id),
        "url": row.url,
        "text": text,
        **text_columns(text),
        "title": analyze(lang, title or ""),
        "_stored_title": stored_title,
        "headings": analyze(lang, headings_text),
        "anchors": analyze(lang, anchors),
        "urlwords": analyze(None, words_of_url),
        "host": url.authority,
        "domain": domain_suffixes(url.host),
        "kind": kind,
        "mime": mime,
        "lang": lang,
        "charset": normalize_charset(row.charset),
        "size": size if size is not None and size >= 0 else None,
        "sizes": size if size is not None and size >= 0 else UNKNOWN_SIZE,
        "feed": row.feed_kind or None,
        "capsule": capsule_names(url.host, title) if is_start_page(url.path) else [],
        "flags": (FLAG_INDEX_FILE if is_index_file(url.path) else 0)
        | (0 if title or body or prompt else FLAG_TEXTLESS),
        "first_seen": _naive(row.discovered_at),
        "fetched": _naive(row.fetched_at),
        "date": None if dated is None else dated.isoformat(),
        "dates": UNKNOWN_DATE if dated is None else day_number(dated),
        "inbound": len(inbound.sources),
        "group": group,
        "key": row.id,
        "fold": group_hash(group),
        SPELLING_KEY: seen,
    }


def group_hash(group: str) -> int:
    """A signed 64-bit hash of a fold group, for a fixed-width column."""
    digest = hashlib.blake2b(group.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def url_words(host: str, path: str, query: str | None) -> str:
    """The words of a URL as people would type them (escapes decoded)."""
    text = f"{host} {unquote(path)}"
    return f"{text} {unquote(query)}" if query else text


def domain_suffixes(host: str) -> list[str]:
    """``a.b.example.org`` → itself, ``b.example.org``, ``example.org``, ``org`` (for domain:)."""
    host = host.strip(".").lower()
    parts = host.split(".")
    return [".".join(parts[i:]) for i in range(len(parts))] if host else []


def normalize_charset(charset: str | None) -> str | None:
    """One spelling per encoding (``UTF8``, ``utf-8`` → ``utf-8``) for ``charset:`` filters."""
    if not charset:
        return None
    name = charset.strip().strip('"').lower()
    try:
        name = codecs.lookup(name).name
    except LookupError:
        return name or None
    return {"utf_8": "utf-8"}.get(name, name)


def _naive(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=None)
