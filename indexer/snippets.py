"""Snippets: the passage of a page that shows why it matched, with matched words marked.

The index stores no page text (that halves its size and its build time), so snippets are cut
from the body the store keeps. A word is marked when its term, computed exactly as indexing
computes it in the page's language, is one of the query's terms: a query for ``running``
marks ``runs`` in an English page, ``Häuser`` marks ``hauser``.

The passage is the window of about :data:`SNIPPET_CHARS` characters holding the most
distinct query terms (then the most matches, then the earliest), widened to word boundaries,
lines joined with spaces. A page that matched only by title, URL or anchor text gets its
opening lines instead.

Marks are ``**word**``: gemtext has no inline markup (Gemini spec section 5.4), and the double
asterisk is what plain-text readers already take for emphasis.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from indexer.analysis import (
    fold,
    has_cjk,
    is_cjk,
    is_word_char,
    term_maker,
    word_list,
    word_matches,
)

MARK_START = "**"
MARK_END = "**"
SNIPPET_CHARS = 200
#: Context kept before the first match of the chosen window.
LEAD_CHARS = 40
#: More matches than this in one page add nothing to the choice of a window.
MAX_MATCHES = 40
#: Only this much of a page is read for a snippet: the passage people need is nearly always
#: early, and scanning whole long pages for every hit would cost more than the search.
MAX_SCAN_CHARS = 4000

_SPACE_RE = re.compile(r"\s+")


def make_snippet(
    text: str,
    terms: Collection[str],
    lang: str | None,
    *,
    max_chars: int = SNIPPET_CHARS,
) -> str:
    """The best passage of ``text`` for ``terms`` (analyzed query terms), marked."""
    if not text:
        return ""
    matches = _matches(text, terms, lang)
    if not matches:
        return _clean(_cut(text, 0, max_chars))
    start, end = _best_window(matches, len(text), max_chars)
    start, end = _widen(text, start, end)
    pieces: list[str] = ["…"] if start > 0 else []
    cursor = start
    for match_start, match_end, _term in matches:
        if match_start < start or match_end > end:
            continue
        pieces.append(text[cursor:match_start])
        pieces.append(f"{MARK_START}{text[match_start:match_end]}{MARK_END}")
        cursor = match_end
    pieces.append(text[cursor:end])
    if end < len(text):
        pieces.append("…")
    return _clean("".join(pieces))


def _matches(text: str, terms: Collection[str], lang: str | None) -> list[tuple[int, int, str]]:
    """The first :data:`MAX_MATCHES` words of ``text`` whose term is a query term.

    A page repeats its words, so the terms are made once per distinct word and the matching
    words are then found with ``str.find``: five times cheaper than making a term at every
    word, which made snippets half the cost of a search. Text with CJK runs, whose words
    need splitting into bigrams, takes the word-by-word path.
    """
    if not terms:
        return []
    scanned = text[:MAX_SCAN_CHARS]
    if scanned.isascii():
        # Folding ASCII is lowering, which keeps every offset: search the lowered text.
        scanned = scanned.lower()
    elif has_cjk(scanned):
        return _matches_by_word(scanned, terms, lang)
    wanted = _matching_words(set(word_list(scanned)), terms, lang)
    found: list[tuple[int, int, str]] = []
    for word, term in wanted.items():
        at = scanned.find(word)
        while at != -1:
            end = at + len(word)
            if _word_edge(scanned, at - 1) and _word_edge(scanned, end):
                found.append((at, end, term))
            at = scanned.find(word, end)
    found.sort()
    return found[:MAX_MATCHES]


def _matching_words(
    words: Collection[str], terms: Collection[str], lang: str | None
) -> dict[str, str]:
    """Each of ``words`` whose term is one of ``terms``, with that term."""
    term_of = term_maker(lang).term
    # Stemming keeps the first three letters of a word of five or more (Snowball only
    # rewrites endings), so a longer word whose folded start no term shares cannot match:
    # skipping it saves stemming every new word of every hit on a cold searcher.
    # Nor does it change a word's first letter (checked for all 1-4 letter words over
    # "aeiouybcdfghlmnrst" in every stemmed language), which rules out most short words.
    heads = {term[:3] for term in terms}
    firsts = {term[:1] for term in terms}
    matching: dict[str, str] = {}
    for word in words:
        if word.isascii():
            lowered = word.lower()
            if lowered[:1] not in firsts or (len(word) >= 5 and lowered[:3] not in heads):
                continue
        elif len(word) >= 5 and fold(word[:3])[:3] not in heads:
            continue
        term = term_of(word)
        if term in terms:
            matching[word] = term
    return matching


def _word_edge(text: str, at: int) -> bool:
    """Whether ``text[at]`` cannot continue a word (or lies outside ``text``)."""
    return at < 0 or at >= len(text) or not is_word_char(text[at])


def _matches_by_word(
    text: str, terms: Collection[str], lang: str | None
) -> list[tuple[int, int, str]]:
    matches = list(word_matches(text))
    wanted = _matching_words({m.group() for m in matches}, terms, lang)
    found: list[tuple[int, int, str]] = []
    for match in matches:
        word = match.group()
        if is_cjk(word):
            found.extend(_cjk_matches(word, match.start(), terms))
        elif word in wanted:
            found.append((match.start(), match.end(), wanted[word]))
        if len(found) >= MAX_MATCHES:
            break
    return found[:MAX_MATCHES]


def _cjk_matches(run: str, offset: int, terms: Collection[str]) -> list[tuple[int, int, str]]:
    """Character ranges of a CJK run covered by a query bigram or single character."""
    covered = [False] * len(run)
    for i in range(len(run)):
        if run[i] in terms:
            covered[i] = True
        if run[i : i + 2] in terms and i + 1 < len(run):
            covered[i] = covered[i + 1] = True
    found: list[tuple[int, int, str]] = []
    i = 0
    while i < len(run):
        if covered[i]:
            j = i
            while j < len(run) and covered[j]:
                j += 1
            found.append((offset + i, offset + j, run[i:j]))
            i = j
        else:
            i += 1
    return found


def _best_window(
    matches: list[tuple[int, int, str]], length: int, max_chars: int
) -> tuple[int, int]:
    best_key: tuple[int, int, int] | None = None
    best = (0, min(length, max_chars))
    for i, (first_start, _, _) in enumerate(matches):
        start = max(0, first_start - LEAD_CHARS)
        end = start + max_chars
        distinct: set[str] = set()
        count = 0
        for _, match_end, term in matches[i:]:
            if match_end > end:
                break
            distinct.add(term)
            count += 1
        key = (-len(distinct), -count, start)
        if best_key is None or key < best_key:
            best_key, best = key, (start, min(end, length))
    return best


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """Move the cut points off the middle of words."""
    while 0 < start < len(text) and not text[start - 1].isspace():
        start -= 1
        if start == 0:
            break
    if end < len(text):
        space = text.rfind(" ", start, end)
        newline = text.rfind("\n", start, end)
        cut = max(space, newline)
        if cut > start:
            end = cut
    return start, end


def _cut(text: str, start: int, max_chars: int) -> str:
    end = min(len(text), start + max_chars)
    start, end = _widen(text, start, end)
    return text[start:end] + ("…" if end < len(text) else "")


def _clean(snippet: str) -> str:
    return _SPACE_RE.sub(" ", snippet).strip()
