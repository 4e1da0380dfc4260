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
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

TITLE_MAX_CHARS = 200


@dataclass(frozen=True, slots=True)
class Link:
    url: str  # as written, not resolved
    label: str  # "" when the line has none
    line: int  # 1-based


@dataclass(frozen=True, slots=True)
class Heading:
    level: int  # 1..3
    text: str


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


def parse(text: str) -> Document:
    """Parse a text/gemini body (already decoded to ``str``)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")

    headings: list[Heading] = []
    links: list[Link] = []
    chunks: list[str] = []
    alts: list[str] = []
    pre_lines: list[str] = []
    first_text: str | None = None
    in_pre = False

    for number, line in enumerate(text.split("\n"), 1):
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
                links.append(Link(parts[0], label, number))
                if label:
                    chunks.append(label)
        elif first == "`" and line.startswith("```"):
            in_pre = True
            alt = line[3:].strip()
            if alt:
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

    title = headings[0].text if headings else first_text
    return Document(
        title=None if title is None else cap_title(title),
        headings=tuple(headings),
        links=tuple(links),
        text="\n".join(chunks),
        preformatted_alt=tuple(alts),
        preformatted="\n".join(pre_lines),
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
    for line in text.splitlines():
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
