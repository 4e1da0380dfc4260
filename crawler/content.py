"""What a fetched body means: decoded text, language, title, links and feed kind.

Pure (bytes in, values out) so every rule below is tested without a server, and so the
engine can run it in a worker thread if profiling ever says so.

Decoding follows the Gemini spec §3.3 / §5.2 (``charset`` parameter, UTF-8 when absent) but
reads what capsules really send:

1. a UTF-8 byte order mark means UTF-8, whatever was declared (the WHATWG encoding standard
   gives the BOM the same precedence); the BOM itself is never part of the text;
2. a declared charset wins when the body decodes with it;
3. a declared charset that does not decode, or a name no codec knows, is a lie or a typo: the
   charset is detected (``charset_detected``);
4. nothing declared: strict UTF-8 (the spec's default), else detection;
5. nothing works: UTF-8 with replacement characters. Analysis never raises.
"""

from __future__ import annotations

import codecs
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser

import charset_normalizer

from crawler.feeds import FEED_MIMES, read_feed
from sextant import gemtext, markdown
from sextant.errors import InvalidURL
from sextant.gemtext import MAX_LINK_CHARS, LinkCollector, cap_title, first_line, lines
from sextant.language import identifier
from sextant.protocol import MimeType
from sextant.urls import GeminiURL, resolve, scheme_of

_BOM = b"\xef\xbb\xbf"

# Codecs Python knows that are not character sets: a server declaring them is wrong, and
# decoding with them would interpret escapes or punycode instead of text.
_NOT_CHARSETS = frozenset({"idna", "punycode", "unicode-escape", "raw-unicode-escape", "undefined"})

# Detection looks at a prefix: enough to decide, and bounded so a 5 MiB page costs the same.
_DETECTION_SAMPLE_BYTES = 256 * 1024
# Candidates whose charset-normalizer "chaos" is this close to the best one are all plausible.
_CHAOS_MARGIN = 0.2
_DETECTION_BONUS = {"cp1252": 0.1}

# Language identification needs some material: below this many letters it guesses wildly.
MIN_LETTERS_FOR_LANG = 40
# ... and a normalized probability at least this high (py3langid with norm_probs).
MIN_LANG_PROBABILITY = 0.5
_LANG_SAMPLE_CHARS = 5000
_LANG_SAMPLE_BYTES = 8 * 1024

# A non-gemini link is stored as written; past this it is junk or an attack, not a URL.
MAX_FOREIGN_URL_CHARS = MAX_LINK_CHARS
# Links one page gives the link graph and the frontier: the first this many distinct URLs;
# the others are only counted (``Content.dropped_links``, shown by ``sextant show``). A
# real page rarely links to more than a few hundred places; without a cap one 5 MiB page
# of 600,000 short links cost the crawler 1.7 GB of memory and the store 350 MB.
MAX_LINKS_PER_PAGE = 2000

_XML_MIMES = frozenset({"application/xml", "text/xml", *FEED_MIMES})
_XML_DECLARED_ENCODING = re.compile(rb"^<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._\-]+)[\"']")


@dataclass(frozen=True, slots=True)
class ExtractedLink:
    url: str  # absolute: gemini links normalized; other schemes as written (scheme lower-cased)
    scheme: str
    label: str
    position: int  # order of first appearance among the page's distinct links, from 0


@dataclass(frozen=True, slots=True)
class Content:
    text: str | None
    charset: str | None  # Python codec name: "utf-8", "iso8859-1", "cp1252", ...
    charset_detected: bool
    lang: str | None
    title: str | None
    links: tuple[ExtractedLink, ...]
    invalid_links: int
    dropped_links: int  # past MAX_LINKS_PER_PAGE, neither stored nor followed
    feed_kind: str | None  # "gemsub", "atom", "rss"
    content_hash: str  # sha256 hex of the raw body


def analyse(url: GeminiURL, body: bytes, mime: MimeType) -> Content:
    """Everything the store needs from one body; ``url`` is the base for relative links."""
    content_hash = hashlib.sha256(body).hexdigest()
    essence = mime.essence
    is_xml = essence in _XML_MIMES or (
        essence.endswith("+xml") and mime.type in ("application", "text")
    )
    if not mime.is_text and not is_xml:
        return Content(None, None, False, None, None, (), 0, 0, None, content_hash)

    declared = mime.charset
    if declared is None and is_xml:
        match = _XML_DECLARED_ENCODING.match(body.removeprefix(_BOM))
        declared = match.group(1).decode("ascii").lower() if match else None
    text, charset, detected = decode(body, declared)

    title: str | None = None
    found = LinkCollector(MAX_LINKS_PER_PAGE)
    lang_sample = text
    feed_kind: str | None = None
    lang: str | None = mime.langs[0] if mime.langs else None

    if essence == "text/gemini":
        doc = gemtext.parse(text, max_links=MAX_LINKS_PER_PAGE)
        title = doc.title
        found.links.extend(doc.links)
        found.dropped, found.oversized = doc.links_dropped, doc.links_oversized
        lang_sample = doc.text
        feed_kind = "gemsub" if gemtext.is_gemsub(doc) else None
    elif essence == "text/markdown":
        title = _markdown(text, found)
    elif essence == "text/html":
        page = _HtmlFacts.read(text, found)
        title, lang_sample = page.title, page.text
        lang = lang or page.lang
    elif is_xml:
        feed = read_feed(body, text)
        if feed is not None:
            feed_kind = FEED_MIMES.get(essence) or feed.kind
            title, lang_sample = feed.title, feed.text
            for feed_url, label in feed.links:
                found.add(feed_url, label)
            lang = lang or feed.lang
        else:
            feed_kind = FEED_MIMES.get(essence)
    else:  # text/plain and every other text type: the first line is what a reader sees first
        title = first_line(text)

    links, invalid = _resolve_links(url, found.links)
    return Content(
        text=text,
        charset=charset,
        charset_detected=detected,
        lang=lang or detect_language(lang_sample),
        title=cap_title(title) if title else None,
        links=links,
        invalid_links=invalid + found.oversized,
        dropped_links=found.dropped,
        feed_kind=feed_kind,
        content_hash=content_hash,
    )


# --- decoding ----------------------------------------------------------------------------------


def decode(body: bytes, declared: str | None) -> tuple[str, str, bool]:
    """(text, codec name, detected) by the rules in the module docstring."""
    codec = _codec_name(declared) if declared else None
    if body.startswith(_BOM):
        text = _strict(body[len(_BOM) :], "utf-8")
        if text is not None:
            return text, "utf-8", codec not in (None, "utf-8")
    if codec is not None:
        decoded = _declared(body, codec)
        if decoded is not None:
            return decoded[0].removeprefix("\ufeff"), decoded[1], False
        return _detect(body)
    # Nothing usable declared: UTF-8 is the spec's default (and what most capsules send).
    text = _strict(body, "utf-8")
    if text is not None:
        return text, "utf-8", declared is not None
    return _detect(body)


def _declared(body: bytes, codec: str) -> tuple[str, str] | None:
    """The body decoded with a declared codec, and the codec actually used."""
    # Servers that say ISO-8859-1 and send 0x80-0x9F mean Windows-1252 smart quotes and dashes,
    # not C1 control characters; browsers read the label the same way (WHATWG).
    if codec == "iso8859-1" and _has_c1_bytes(body):
        text = _strict(body, "cp1252")
        if text is not None:
            return text, "cp1252"
    text = _strict(body, codec)
    return None if text is None else (text, codec)


_C1_BYTES = re.compile(rb"[\x80-\x9f]")


def _has_c1_bytes(body: bytes) -> bool:
    return _C1_BYTES.search(body) is not None


def _codec_name(name: str) -> str | None:
    try:
        codec = codecs.lookup(name.strip())
    except LookupError:
        return None
    return None if codec.name in _NOT_CHARSETS else codec.name


def _strict(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def _detect(body: bytes) -> tuple[str, str, bool]:
    """Detect the charset of a body that did not decode as declared (or as UTF-8).

    charset-normalizer alone ranks several code pages almost alike for short Western texts and
    may put a Baltic one first (cp1257 for French, measured). So the candidates close to its
    best are decoded and scored by how clearly py3langid recognises a language in the result,
    with a small bonus for Windows-1252, which is what undeclared pages in Geminispace use.
    """
    sample = body[:_DETECTION_SAMPLE_BYTES]
    matches = list(charset_normalizer.from_bytes(sample))
    best: tuple[float, str] | None = None
    if matches:
        lowest = min(match.chaos for match in matches)
        for match in matches:
            codec = _codec_name(match.encoding)
            if codec is None or match.chaos > lowest + _CHAOS_MARGIN:
                continue
            text = sample[:_LANG_SAMPLE_BYTES].decode(codec, errors="replace")
            score = identifier().classify(text)[1] + _DETECTION_BONUS.get(codec, 0.0)
            if best is None or score > best[0]:
                best = (score, codec)
    codec = best[1] if best else "utf-8"
    return body.decode(codec, errors="replace").removeprefix("\ufeff"), codec, True


# --- language ----------------------------------------------------------------------------------


def detect_language(text: str | None) -> str | None:
    """An ISO 639-1 code when the text is long and clear enough, else ``None``."""
    if not text:
        return None
    sample = text[:_LANG_SAMPLE_CHARS]
    letters = sum(1 for char in sample if char.isalpha())
    if letters < MIN_LETTERS_FOR_LANG:
        return None
    code, probability = identifier().classify(sample)
    if probability < MIN_LANG_PROBABILITY:
        return None
    return str(code)


# --- titles and links --------------------------------------------------------------------------


def _markdown(text: str, links: LinkCollector) -> str | None:
    """Title (first level-1 heading, else first heading, else first line); links go to
    ``links``.

    Fenced code is skipped: links and ``#`` lines in a shell sample are not the page's.
    """
    first_h1: str | None = None
    first_heading: str | None = None
    first_line: str | None = None
    previous = ""
    in_fence = False
    for line in lines(text):
        if markdown.FENCE.match(line):
            in_fence = not in_fence
            previous = ""
            continue
        if in_fence:
            continue
        heading = markdown.ATX.match(line)
        setext = markdown.SETEXT.match(line) if previous.strip() else None
        if heading and heading.group(2):
            level, content = len(heading.group(1)), heading.group(2)
        elif setext:
            level, content = (1 if setext.group(1)[0] == "=" else 2), previous.strip()
        else:
            level, content = 0, ""
        if level:
            first_heading = first_heading or content
            if level == 1:
                first_h1 = first_h1 or content
        elif first_line is None and line.strip() and not setext:
            first_line = line.strip()
        reference = markdown.REFERENCE.match(line)
        if reference:
            links.add(reference.group(2), reference.group(1).strip())
        else:
            for match in markdown.INLINE.finditer(line):
                links.add(match.group(2), match.group(1).strip())
            for match in markdown.AUTOLINK.finditer(line):
                links.add(match.group(1), "")
        previous = line
    return first_h1 or first_heading or first_line


class _HtmlFacts(HTMLParser):
    """Title, ``<a href>`` links, ``<html lang>`` and visible text of an HTML page."""

    def __init__(self, links: LinkCollector) -> None:
        super().__init__(convert_charrefs=True)
        self.title: str | None = None
        self.lang: str | None = None
        self.links = links
        self._chunks: list[str] = []
        self._title_parts: list[str] | None = None
        self._anchor: tuple[str, list[str]] | None = None
        self._skip = 0

    @classmethod
    def read(cls, text: str, links: LinkCollector) -> _HtmlFacts:
        parser = cls(links)
        try:
            parser.feed(text)
            parser.close()
        except (AssertionError, ValueError):  # HTMLParser's reaction to some broken markup
            pass
        return parser

    @property
    def text(self) -> str:
        return " ".join(self._chunks)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "html" and values.get("lang") and self.lang is None:
            self.lang = (values["lang"] or "").strip() or None
        elif tag == "title" and self.title is None:
            self._title_parts = []
        elif tag == "a" and values.get("href"):
            self._anchor = (values["href"] or "", [])
        elif tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._title_parts is not None:
            self.title = " ".join("".join(self._title_parts).split()) or None
            self._title_parts = None
        elif tag == "a" and self._anchor is not None:
            href, parts = self._anchor
            self.links.add(href, " ".join("".join(parts).split()))
            self._anchor = None
        elif tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._title_parts is not None:
            self._title_parts.append(data)
        if self._anchor is not None:
            self._anchor[1].append(data)
        if data.strip():
            self._chunks.append(data.strip())


def _resolve_links(
    base: GeminiURL, raw_links: Iterable[gemtext.Link]
) -> tuple[tuple[ExtractedLink, ...], int]:
    seen: dict[str, ExtractedLink] = {}
    invalid = 0
    for link in raw_links:
        raw, label = link.url, link.label
        try:
            absolute = resolve(base, raw)
        except InvalidURL:
            invalid += 1
            continue
        scheme = scheme_of(absolute)
        if not scheme or len(absolute) > MAX_FOREIGN_URL_CHARS:
            invalid += 1
            continue
        if absolute not in seen:
            seen[absolute] = ExtractedLink(absolute, scheme, _clean_label(label), len(seen))
    return tuple(seen.values()), invalid


def _clean_label(label: str) -> str:
    # Control characters in a label would end up in terminals (`sextant show`) and the index.
    return "".join(c for c in label if unicodedata.category(c) != "Cc").strip()
