"""Navigational queries: someone typing a capsule's name wants the capsule.

``gemlog`` on a space holding ``gemlog.example`` should answer with its start page, not with
the pages that say "gemlog" most often. So start pages (:func:`is_start_page`) are indexed
with their capsule's names in the ``capsule`` field: the host (``gemlog.example``), its
first label (``gemlog``), the host without its last label, and the start page's title as
folded words (``alice s gemlog``).

A query names a capsule (:func:`indexer.querylang.capsule_names_in`) when all of its words,
joined, are one of those names, or when it contains a host name (``files.example``) or a
Gemini URL of a start page (``gemini://files.example/``). The named start pages then rank
first; a query that is a name and nothing else (no filters, no exclusions) shows them even
when their text does not hold the words (``gemini://files.example/`` is no word of any
page). A single word that is merely part of a longer query (``gemini client``) names
nothing: there the text decides.

Copies of one start page (``gemini://host/`` and ``gemini://host/index.gmi``) share a
content hash and fold into one result; :data:`INDEX_FILES` marks the longer address, so the
fold shows ``gemini://host/``.
"""

from __future__ import annotations

import re

from indexer.analysis import fold, word_list
from sextant.errors import InvalidURL
from sextant.urls import parse as parse_url

NAVIGATION_FIELD = "capsule"
#: File names a Gemini server answers for a directory: ``/index.gmi`` is the start page too.
INDEX_FILES = ("index.gmi", "index.gemini")
_HOST = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z][a-z0-9-]*[a-z0-9]")


def is_start_page(path: str) -> bool:
    return path in ("", "/") or path.lstrip("/") in INDEX_FILES


def is_index_file(path: str) -> bool:
    """``/index.gmi`` and the like anywhere: the shorter directory URL is the same page."""
    return path.rsplit("/", 1)[-1] in INDEX_FILES


def capsule_names(host: str, title: str | None) -> list[str]:
    """The names a start page answers to (see the module doc)."""
    host = host.lower().rstrip(".")
    labels = host.split(".")
    names = {host, labels[0]}
    if len(labels) > 2:
        names.add(".".join(labels[:-1]))
    if title:
        words = " ".join(fold(word) for word in word_list(title))
        if words:
            names.add(words)
    return sorted(names)


def hosts_in(value: str) -> list[str]:
    """Host names written in a query word: ``files.example``, ``gemini://files.example/``."""
    text = value.strip().lower()
    if "://" in text:
        try:
            url = parse_url(text)
        except InvalidURL:
            return []
        return [url.host] if is_start_page(url.path) else []
    return [match.group() for match in _HOST.finditer(text)]
