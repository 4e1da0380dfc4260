"""Gemtext (text/gemini) parsing: one pass over the lines, nothing resolved, nothing fetched.

Line types follow the Gemini spec, section 5.4/5.5 (gemtext):

* ``=>`` link: URL, then an optional label, separated by whitespace (spaces or tabs);
  whitespace after ``=>`` is optional. An ``=>`` line with no URL is ignored.
* ``#``, ``##``, ``###`` headings; the space after the markers is optional (``#Title``).
  The spec knows only three levels, so ``####x`` is a level-3 heading whose text is
  ``#x``: we keep the text instead of inventing a level 4 or dropping the line.
* ``* `` list item: the space is required, so ``*emphasis*`` stays a paragraph.
* ``>`` quote.
* a line starting with three backticks toggles preformatted mode; the rest of an
  opening toggle line is the alt text, the rest of a closing one is ignored. Nothing
  inside a block is parsed, and an unterminated block runs to the end of the document.
* everything else is a paragraph line.

Line ends may be CRLF, LF or a lone CR (all seen in the wild); a leading UTF-8 BOM is
dropped. Link URLs are returned as written: resolving them against the page URL is the
caller's job (``sextant.urls.resolve``), which keeps this module independent of where
the text came from.

What one page costs is bounded by the page's size, never by how it is cut up: a 5 MiB body
of two-byte lines is read in slices (no list of millions of lines), the indexable text and
the preformatted text are joined as they grow (no list of millions of strings),
at most :data:`MAX_HEADINGS` headings are kept, and a caller can cap the links it wants
(:class:`LinkCollector`). Python objects cost some 50 bytes each before their content, so a
list entry per line or per link costs ten to twenty times the bytes it stands for.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from sextant.urls import MAX_URL_BYTES

TITLE_MAX_CHARS = 200
# An outline of more headings than this is no outline; their text stays in ``text``.
MAX_HEADINGS = 1000
# Alt texts of preformatted blocks kept, for the same reason.
MAX_PREFORMATTED_ALTS = 1000
# A link longer than this is not looked at: a Gemini URL is at most 1024 bytes once
# normalized (spec section 2), and twice that leaves room for a fragment or dot segments
# that normalizing removes. Resolving a megabyte-long "URL" would cost far more than reading it.
MAX_LINK_CHARS = 2 * MAX_URL_BYTES
# Lines are split this many characters at a time, so no list holds a whole page's lines.
_SLICE_CHARS = 16 * 1024


@dataclass(frozen=True, slots=True)
class Link:
    url: str  # as written, not resolved
    label: str  # "" when the line has none
    line: int  # 1-based


@dataclass(frozen=True, slots=True)
class Heading:
    level: int  # 1..3
    text: str


@dataclass(slots=True)
class LinkCollector:
    """The links of one page, as found; with a ``limit``, up to that many distinct URLs.

    Only the first line naming a URL is kept: later ones add nothing the link graph keeps
    (the first label wins) and would let one page repeat a link a million times. Past the
    limit a line whose URL is not among those kept is only counted (``dropped``), so what
    a page costs does not grow with its number of links. URLs longer than
    :data:`MAX_LINK_CHARS` are counted in ``oversized`` and never kept.
    """

    limit: int | None = None  # None: keep every line, duplicates included
    links: list[Link] = field(default_factory=list)
    dropped: int = 0
    oversized: int = 0
    _seen: set[str] = field(default_factory=set)

    def add(self, url: str, label: str, line: int = 0) -> None:
        if len(url) > MAX_LINK_CHARS:
            self.oversized += 1
            return
        if self.limit is None:
            self.links.append(Link(url, label, line))
            return
        if url in self._seen:
            return
        if len(self._seen) >= self.limit:
            self.dropped += 1
            return
        self._seen.add(url)
        self.links.append(Link(url, label, line))


@dataclass(frozen=True, slots=True)
class Document:
    # First heading, else the first paragraph, list item or quote (markers stripped); never a
    # link label or preformatted text. None for a page with none of these.
    title: str | None
    headings: tuple[Heading, ...]
    links: tuple[Link, ...]
    # What a search index should read: headings, paragraphs, list items, quotes and link
    # labels, one per line, markers stripped. Preformatted content lives apart in
    # ``preformatted`` because ASCII art and code would drown the prose in an index.
    text: str
    preformatted_alt: tuple[str, ...]
    preformatted: str
    # Link lines past ``max_links`` naming a URL not kept (see LinkCollector), and links
    # whose URL is too long to be one (MAX_LINK_CHARS); neither is in ``links``.
    links_dropped: int = 0
    links_oversized: int = 0


def lines(text: str) -> Iterator[str]:
    """The lines of a text with LF, CRLF or lone CR ends, produced a slice at a time."""
    for piece in _slices(text):
        yield from piece.split("\n")


def _slices(text: str) -> Iterator[str]:
    """Runs of whole lines of about ``_SLICE_CHARS``, line ends made LF."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    start, size = 0, len(text)
    while True:
        # Cut at a newline, so a slice never splits a line (a one-line page is one slice).
        end = text.find("\n", start + _SLICE_CHARS) if start + _SLICE_CHARS < size else -1
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


def _fold(joined: list[str], pending: list[str]) -> None:
    """Join the pending lines into one string: a list entry of kilobytes instead of one
    object of some 50 bytes per line."""
    if pending:
        joined.append("\n".join(pending))
        pending.clear()


def parse(text: str, *, max_links: int | None = None) -> Document:
    """Parse a text/gemini body (already decoded to ``str``).

    With ``max_links``, at most that many distinct link URLs are kept (the first of each);
    the others are counted in ``links_dropped``.
    """
    if text.startswith("\ufeff"):
        text = text[1:]

    headings: list[Heading] = []
    collected = LinkCollector(max_links)
    # Lines of a slice are gathered in plain lists and folded into joined parts after each
    # slice (see _fold); a method call per line instead cost a quarter of the parse time.
    chunks: list[str] = []
    text_parts: list[str] = []
    alts: list[str] = []
    pre_lines: list[str] = []
    pre_parts: list[str] = []
    first_text: str | None = None
    in_pre = False
    number = 0

    for piece in _slices(text):
        following = number + 1  # line numbers run on across slices
        for number, line in enumerate(piece.split("\n"), following):
            if in_pre:
                if line.startswith("```"):
                    in_pre = False
                else:
                    pre_lines.append(line)
                continue
            if not line:
                continue
            first = line[0]
            if first == "=" and line.startswith("=>"):
                # str.split() with no separator treats spaces and tabs alike and skips runs.
                parts = line[2:].split(None, 1)
                if parts:
                    label = parts[1].strip() if len(parts) > 1 else ""
                    collected.add(parts[0], label, number)
                    if label:
                        chunks.append(label)
            elif first == "`" and line.startswith("```"):
                in_pre = True
                alt = line[3:].strip()
                if alt and len(alts) < MAX_PREFORMATTED_ALTS:
                    alts.append(alt)
            elif first == "#":
                if line.startswith("###"):
                    level, content = 3, line[3:].strip()
                elif line.startswith("##"):
                    level, content = 2, line[2:].strip()
                else:
                    level, content = 1, line[1:].strip()
                # A bare "#" line is decoration, not a heading worth a title or an outline entry.
                if content:
                    if len(headings) < MAX_HEADINGS:
                        headings.append(Heading(level, content))
                    chunks.append(content)
            else:
                if first == "*" and line.startswith("* "):
                    content = line[2:].strip()
                elif first == ">":
                    content = line[1:].strip()
                else:
                    content = line.strip()
                if content:
                    chunks.append(content)
                    if first_text is None:
                        first_text = content
        _fold(text_parts, chunks)
        _fold(pre_parts, pre_lines)

    title = headings[0].text if headings else first_text
    return Document(
        title=None if title is None else cap_title(title),
        headings=tuple(headings),
        links=tuple(collected.links),
        text="\n".join(text_parts),
        preformatted_alt=tuple(alts),
        preformatted="\n".join(pre_parts),
        links_dropped=collected.dropped,
        links_oversized=collected.oversized,
    )


def cap_title(title: str) -> str:
    """Cut an over-long title at a word boundary near the limit, marking the cut."""
    if len(title) <= TITLE_MAX_CHARS:
        return title
    cut = title[: TITLE_MAX_CHARS - 1]
    space = cut.rfind(" ")
    if space >= TITLE_MAX_CHARS * 3 // 4:
        cut = cut[:space]
    return cut.rstrip() + "…"


def first_line(text: str) -> str | None:
    """The first line with something on it: the title of a page that is not gemtext (what
    a reader sees first), for the crawler and the indexer alike."""
    for line in lines(text):
        stripped = line.strip()
        if stripped:
            return stripped
    return None


# --- Gemini subscriptions (gemsub) -----------------------------------------------------
# The companion spec "Subscribing to Gemini pages": a page with a level-1 heading whose
# link labels start with an ISO date (YYYY-MM-DD) is a feed; each dated link is an entry.


@dataclass(frozen=True, slots=True)
class FeedEntry:
    published: datetime.date
    url: str  # as written, not resolved
    title: str  # the label after the date and its separator


# The date must not run on into more digits ("2024-01-011" is not a date).
_DATED_LABEL_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?![0-9])")
# Separators authors put between date and title: "2024-01-05 - Title", "2024-01-05: Title",
# "2024-01-05 | Title", "2024-01-05 — Title"; also none at all ("2024-01-05 Title").
_SEPARATOR_RE = re.compile(r"^\s*(?:[-–—:|~·•]+\s*)?")


def feed_entries(doc: Document) -> tuple[FeedEntry, ...]:
    """The dated links of a page, in page order; labels with impossible dates are skipped."""
    entries: list[FeedEntry] = []
    for link in doc.links:
        match = _DATED_LABEL_RE.match(link.label)
        if match is None:
            continue
        try:
            published = datetime.date(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            continue
        rest = link.label[match.end() :]
        title = _SEPARATOR_RE.sub("", rest, count=1).strip()
        entries.append(FeedEntry(published, link.url, title))
    return tuple(entries)


def is_gemsub(doc: Document) -> bool:
    """True when the page qualifies as a Gemini subscription feed."""
    return any(h.level == 1 for h in doc.headings) and bool(feed_entries(doc))
