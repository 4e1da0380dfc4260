"""Markdown (text/markdown) as people read it: the crawler takes its title and links from it,
the indexer its words and the searcher its snippets.

Not a Markdown renderer: the syntax that would otherwise end up in the index and in
snippets as words and punctuation (``# Changelog ## 2026-11-01 - See [the protocol
notes](gemini://…)``) is taken away, the prose stays. Headings lose their ``#`` marks
(setext underlines go), emphasis and code spans their markers, links and images become their
label or alt text (the URLs are links, which the crawler stores apart), list and quote
markers and rules go. Fenced code blocks are left out like gemtext's preformatted blocks:
code and ASCII art would drown the prose. One pass over the lines (:func:`lines`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sextant.gemtext import MAX_HEADINGS, lines

FENCE = re.compile(r"^ {0,3}(```|~~~)")
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE = re.compile(
    r"!?\[([^\]\n]*)\]"  # [label] or ![alt]
    r"\(\s*<?([^)\s>]+)>?"  # (url or (<url>
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"  # optional "title", then )
)
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^<>\s]+)>")
REFERENCE = re.compile(r"^ {0,3}\[([^\]\n]+)\]:[ \t]*<?(\S+?)>?(?:[ \t]+.*)?$")

# What is taken away. Every pattern is linear in the line's length: no lazy span can cross
# the marker that would end it, and spans are bounded, so hostile lines of thousands of
# unmatched "[", "*" or "`" cost what their length does (a crawler's INLINE pattern above
# is for link extraction, not for this).
_LINK = re.compile(
    r"!?\[([^\[\]\n]{0,500})\]\(\s{0,10}<?[^()<>\s]{0,2000}>?"
    r"(?:\s{1,10}(?:\"[^\"\n]{0,500}\"|'[^'\n]{0,500}'))?\s{0,10}\)"
)
_REFERENCE_LINK = re.compile(r"!?\[([^\[\]\n]{1,500})\]\[[^\[\]\n]{0,500}\]")
_CODE_SPAN = re.compile(r"(`{1,3})([^`\n]{1,500})\1")
_EMPHASIS = re.compile(r"(?<![\w*~])(\*{1,3}|~~)(?=[^\s*~])([^*~\n]{1,500}?)(?<=\S)\1(?![\w*~])")
_UNDERSCORES = re.compile(r"(?<![\w_])(_{1,3})(?=[^\s_])([^_\n]{1,500}?)(?<=\S)\1(?![\w_])")
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_LIST_OR_QUOTE = re.compile(r"[ \t]*(?:>[ \t]*)*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?")
_RULE = re.compile(r"^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")


@dataclass(frozen=True, slots=True)
class Readable:
    """A Markdown document's prose and its headings, without the syntax."""

    text: str
    headings: tuple[str, ...]


def inline(line: str) -> str:
    """One line's inline syntax taken away: links and images, code spans, emphasis."""
    if not any(mark in line for mark in "[<`*_~"):
        return line
    line = _LINK.sub(r"\1", line)
    line = _REFERENCE_LINK.sub(r"\1", line)
    line = AUTOLINK.sub(r"\1", line)
    line = _CODE_SPAN.sub(r"\2", line)
    line = _EMPHASIS.sub(r"\2", line)
    return _UNDERSCORES.sub(r"\2", line)


def _closed(heading: str) -> str:
    """An ATX heading without its optional closing ``#``s (``## Title ##``)."""
    opened = heading.rstrip("#")
    if opened == heading or (opened and opened[-1] not in " \t"):
        return heading
    return opened.rstrip(" \t")


def readable(text: str) -> Readable:
    """The prose of a Markdown document and its headings (at most
    :data:`~sextant.gemtext.MAX_HEADINGS`)."""
    kept: list[str] = []
    headings: list[str] = []
    in_fence = False
    for line in lines(text):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or REFERENCE.match(line):
            continue
        if SETEXT.match(line) and kept and kept[-1]:  # before rules: "Title\n---" is a heading
            if len(headings) < MAX_HEADINGS:
                headings.append(kept[-1])
            continue
        if _RULE.match(line):
            continue
        heading = _HEADING.match(line)
        if heading:
            content = inline(_closed(line[heading.end() :].strip(" \t"))).strip()
            if content and len(headings) < MAX_HEADINGS:
                headings.append(content)
            kept.append(content)
            continue
        marker = _LIST_OR_QUOTE.match(line)
        kept.append(inline(line[marker.end() :] if marker else line).strip())
    return Readable("\n".join(kept).strip(), tuple(headings))
