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
import string
from collections.abc import Callable, Collection

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
#: Lowered ASCII bytes with everything but word characters (``[^\W_]``: a-z, 0-9) spaced.
_WORD_BYTES_OR_SPACE = bytes(
    byte if chr(byte) in string.ascii_lowercase + string.digits else ord(" ") for byte in range(256)
)
#: Words whose term does not keep their first two letters: the English stemmer's special
#: forms "dying", "lying" and "tying" (to "die", "lie", "tie").
_IRREGULAR_HEADS = {"die": "dy", "lie": "ly", "tie": "ty"}


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

    Only words that begin like a query term can match (:func:`heads`). In ASCII text those
    are found with ``find`` in a copy of the lowered text whose non-word characters are
    spaces (folding ASCII is lowering, and neither changes an offset), and only they are
    turned into terms: splitting the whole text into words
    with a regex cost ten times more, and made snippets a quarter of a search. Other text
    takes its distinct words first; text with CJK runs, whose words need splitting into
    bigrams, goes word by word.
    """
    if not terms:
        return []
    scanned = text[:MAX_SCAN_CHARS]
    if scanned.isascii():
        return _ascii_matches(scanned.lower(), terms, term_maker(lang).term)
    if has_cjk(scanned):
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


def _ascii_matches(
    lowered: str, terms: Collection[str], term_of: Callable[[str], str]
) -> list[tuple[int, int, str]]:
    # Every character that cannot be part of a word becomes a space (one C pass over the
    # bytes, offsets kept), so " " + head finds only word beginnings and the next space
    # ends the word: no regex and no rejected finds inside words, half the cost.
    spaced = b" " + lowered.encode("ascii").translate(_WORD_BYTES_OR_SPACE)
    found: list[tuple[int, int, str]] = []
    for head in heads(terms):
        if not head.isascii():  # cannot occur in ASCII text
            continue
        needle = b" " + head.encode("ascii")
        taken = 0
        at = spaced.find(needle)  # the word starts at lowered[at]: spaced is one longer
        while at != -1:
            space = spaced.find(b" ", at + len(needle))
            end = len(lowered) if space == -1 else space - 1
            term = term_of(lowered[at:end])
            if term in terms:
                found.append((at, end, term))
                taken += 1
                if taken == MAX_MATCHES:  # this head's later words cannot be among the first
                    break
            if space == -1:
                break
            at = spaced.find(needle, space)
    found.sort()
    return found[:MAX_MATCHES]


def heads(terms: Collection[str]) -> set[str]:
    """Beginnings that every word whose term is one of ``terms`` starts with, folded.

    Stemming only rewrites endings: a word's term keeps the word's first two letters (or is
    shorter, and the word starts with all of it), apart from three special cases of the
    English stemmer. The tests check this for every stemmed language. Heads that start
    with another head are dropped, so that no word is found twice.
    """
    found = {term[:2] for term in terms if term}
    found.update(_IRREGULAR_HEADS[term] for term in terms if term in _IRREGULAR_HEADS)
    return {
        head
        for head in found
        if not any(head != other and head.startswith(other) for other in found)
    }


def _matching_words(
    words: Collection[str], terms: Collection[str], lang: str | None
) -> dict[str, str]:
    """Each of ``words`` whose term is one of ``terms``, with that term."""
    term_of = term_maker(lang).term
    starts = tuple(heads(terms))
    matching: dict[str, str] = {}
    for word in words:
        if not fold(word[:3]).startswith(starts):
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
