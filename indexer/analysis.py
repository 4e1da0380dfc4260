"""Text analysis: the one definition of "a term", shared by indexing, querying and snippets.

A word becomes a term in three steps, and every step is cached per distinct word:

1. **Fold**: lower-case, Unicode compatibility decomposition (NFKD), combining marks dropped,
   and the few letters that do not decompose mapped by hand (``ß``→``ss``, ``ø``→``o``...).
   Searching is accent-insensitive because both sides of the comparison are folded.
2. **Stem**, in the page's language, for the languages that have a Snowball stemmer here and
   that Geminispace writes most in (:data:`STEMMED_LANGUAGES`). Folding comes first so that
   ``hauser`` typed without the umlaut stems like ``Häuser`` (both become ``haus``).
3. Nothing else: no stop words (``"the who"`` must stay searchable as a phrase, and BM25 already
   gives frequent words almost no weight).

A page is stemmed in its own language only, but a query's language is unknown (and a
three-word query is too short to detect reliably), so :func:`query_variants` expands each
query word into its distinct terms across all stemmed languages plus the unstemmed form.
Usually that is one to three terms; a German query word finds the German stem, an English
one the English stem, and a word nobody stems still matches literally.

Words are runs of letters and digits; punctuation, ``_``, ``.`` and ``-`` separate them. So
``example.org`` is two terms, ``example`` and ``org``: a query for ``example`` finds pages
that mention the host, and the query side turns a multi-term word such as ``example.org``
back into a phrase, so the pair still matches precisely (the choice web engines made too).

Chinese, Japanese and Korean have no spaces between words and no stemmer here, so a run of
CJK characters is indexed as overlapping pairs (bigrams) plus single characters at the same
positions. A query for any substring of two or more characters becomes a phrase of its
bigrams, one character a single term: CJK text is findable by exact substring.
"""

from __future__ import annotations

import itertools
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.lang import stemmer_for_language

from sextant.language import identifier

#: Languages stemmed at index time, by ISO 639-1 code. Each one adds a variant to every query
#: word, so the list holds the languages a Gemini search must serve well, not all Snowball has.
STEMMED_LANGUAGES = ("en", "de", "fr", "es")

#: Longer "words" are base64, hashes or URLs run together: noise that would bloat the
#: vocabulary without anyone ever searching for them.
MAX_WORD_CHARS = 40

# CJK Unified Ideographs (+ extension A, compatibility), Hiragana, Katakana, Hangul syllables
# and Jamo, CJK punctuation is excluded on purpose (it separates words).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff"
#: A cheap first check: every CJK character sorts at or above this one.
CJK_FIRST = "\u1100"
_WORD_RE = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]+")
_WORD_CHAR_RE = re.compile(rf"[^\W_{_CJK}]")
#: For ASCII text the word pattern means "runs of ASCII letters and digits": every other
#: ASCII character becomes a space and ``str.split`` finds the runs, 2-2.5 times faster than
#: the pattern's ``findall`` (measured on the benchmark's pages, 85 % of which are ASCII).
_ASCII_SEPARATORS = str.maketrans(
    {chr(code): " " for code in range(128) if not chr(code).isalnum()}
)

# Letters NFKD leaves alone but readers consider the same as an ASCII spelling.
_FOLD_EXTRA = str.maketrans(
    {
        "ß": "ss",
        "æ": "ae",
        "œ": "oe",
        "ø": "o",
        "đ": "d",
        "ð": "d",
        "ł": "l",
        "þ": "th",
        "ı": "i",
    }
)

#: Cache sizes: a cache holds at most twice this many words, which bounds memory on hostile
#: input (endless distinct junk words) and on a large corpus: unbounded, the six caches of a
#: build worker held 68 MB (500,000 words) after 100,000 pages of the 600,000-page store and
#: went on growing. When the words seen since the last turn reach this many, they become the
#: old generation and the one before is dropped; a word found in the old generation moves to
#: the new one, so the words in use survive every turn. Clearing the whole cache instead
#: (until 2026-12-07) made the English maker of a 20,000-page build stem 2.8 times as many
#: words as there were distinct ones (563,747 against 204,543 for an unbounded cache), a third
#: of the CPU of turning pages into documents: with the long tail of rare words, common
#: ones were lost on every clearing and stemmed again.
CACHE_LIMIT = 50_000


def fold(word: str) -> str:
    """Lower-case ``word`` and strip its accents (``Émile`` → ``emile``)."""
    lowered = word.lower()
    if lowered.isascii():
        return lowered
    decomposed = unicodedata.normalize("NFKD", lowered.translate(_FOLD_EXTRA))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def primary_language(lang: str | None) -> str | None:
    """``en-GB`` → ``en``; the primary subtag of a BCP 47 tag, or None when there is none.

    A ``2x`` meta may list several (``lang=en,fr``, Gemini spec section 3.3); the first counts.
    """
    if not lang:
        return None
    first = lang.split(",", 1)[0].strip().replace("_", "-")
    primary = first.split("-", 1)[0].lower()
    if 2 <= len(primary) <= 3 and primary.isascii() and primary.isalpha():
        return primary
    return None


def _stemmer(lang: str | None) -> Callable[[str], str] | None:
    if lang in STEMMED_LANGUAGES:
        stem: Callable[[str], str] = stemmer_for_language(lang)
        return _german_plurals(stem) if lang == "de" else stem
    return None


def _german_plurals(stem: Callable[[str], str]) -> Callable[[str], str]:
    """Snowball's German stemmer, plus two plural forms it leaves alone.

    Snowball removes ``-e``, ``-en``, ``-er``, ``-ern``, ``-es`` and ``-s`` after a consonant,
    so *Tomaten*, *Häuser* and *Kinder* meet their singulars, but not the ``-n`` of nouns in
    ``-el`` (*Kartoffeln*, *Zwiebeln*, *Nudeln*) nor the ``-s`` after a vowel (*Autos*,
    *Fotos*). Only those are added: the stem must keep four letters, and ``-us`` is left
    alone (*Kaktus*, *Status* are singulars).
    """

    def stem_de(word: str) -> str:
        result = stem(word)
        if len(result) > 5 and result.endswith("eln"):
            return result[:-1]
        if len(result) > 4 and result[-1] == "s" and result[-2] in "aioy":
            return result[:-1]
        return result

    return stem_de


class _Words(dict[str, str]):
    """A generation of a :class:`TermMaker`'s word cache: word → term, a missing word made
    by the maker. ``map(words.__getitem__, ...)`` then looks words up at C speed."""

    __slots__ = ("maker",)

    def __init__(self, maker: TermMaker) -> None:
        super().__init__()
        self.maker = maker

    def __missing__(self, word: str) -> str:
        # Looked up in a generation that may have turned old meanwhile: the maker's answer
        # is right whichever generation holds the word now.
        return self.maker._new_term(word)


class TermMaker:
    """Words to terms for one language, with the per-word cache that makes indexing fast.

    Terms are interned: equal terms are one object, so the page-sized dicts of
    :meth:`sequence` compare them by identity, and each is held once however many words
    and pages it stands for."""

    __slots__ = ("_cache", "_old", "_stem", "lang")

    def __init__(self, lang: str | None) -> None:
        self.lang = lang if lang in STEMMED_LANGUAGES else None
        self._stem = _stemmer(self.lang)
        self._cache = _Words(self)  # words seen since the last turn (CACHE_LIMIT)
        self._old: dict[str, str] = {}  # the generation before

    def term(self, word: str) -> str:
        """The term for a non-CJK word; ``""`` when the word is too long to be worth indexing."""
        return self._cache[word]

    def _new_term(self, word: str) -> str:
        """The term for a word not in the new generation of the cache (see CACHE_LIMIT)."""
        result = self._old.get(word)
        if result is None:
            if len(word) > MAX_WORD_CHARS:
                result = ""
            else:
                result = fold(word)
                if self._stem is not None and not result.isdigit():
                    result = self._stem(result)
                result = sys.intern(result)
        if len(self._cache) >= CACHE_LIMIT:
            self._old = self._cache
            self._cache = _Words(self)
        self._cache[word] = result
        return result

    def positions(
        self,
        text: str,
        seen: set[str] | None = None,
        *,
        start: int = 0,
        found: dict[str, list[int]] | None = None,
    ) -> tuple[dict[str, list[int]], int]:
        """Every term of ``text`` with its word positions, and the number of positions used.

        This is the indexing hot path: one regex pass, one dict lookup per word. CJK runs
        contribute a single character and a bigram at each position (see the module doc).
        ``seen``, when given, collects the distinct words as written (for the spelling
        vocabulary, so that it costs no second pass over the text). ``found`` and ``start``
        append to the positions of earlier parts of a field, numbered on from ``start``
        (:func:`analyze_parts`; shifting and merging each part's lists afterwards cost a
        tenth of analysis).
        """
        if found is None:
            found = {}
        position = start
        words = word_list(text)
        if seen is not None:
            seen.update(words)
        for word in words:
            if word[0] >= CJK_FIRST and _CJK_RE.fullmatch(word):
                for offset, char in enumerate(word):
                    found.setdefault(char, []).append(position + offset)
                    pair = word[offset : offset + 2]
                    if len(pair) == 2:
                        found.setdefault(pair, []).append(position + offset)
                position += len(word)
                continue
            term = self._cache[word]
            if term:
                poslist = found.get(term)
                if poslist is None:
                    found[term] = [position]
                else:
                    poslist.append(position)
            position += 1
        return found, position - start

    def sequence(
        self, parts: Iterable[tuple[str, bool]], gap: int, seen: set[str] | None = None
    ) -> TermSequence:
        """:func:`analyze_parts` for text without CJK (whose runs :meth:`positions` splits):
        the term at each position and the distinct terms with their counts.

        Building a list of positions per term, one dict step and one append per word, was a
        tenth of an index build; here each word is one C-level cache lookup (``map``), and
        the distinct terms, their counts and numbers come from a ``Counter`` and a dict of
        the page's own terms, at C speed too (``numpy.unique`` over the terms' identities
        did the same in 1.3 × the time: a dozen numpy calls a field). The terms are numbered
        in the order they first appear, as :meth:`positions` lists them.
        """
        sequence: list[str] = []
        started = False  # a part with text, even without words, puts a gap after it
        for text, collect in parts:
            if not text:
                continue
            if started:
                sequence.extend(itertools.repeat("", gap))
            started = True
            words = word_list(text)
            if collect and seen is not None:
                seen.update(words)
            sequence.extend(map(self._cache.__getitem__, words))
        if not sequence:
            return TermSequence([], [], numpy.empty(0, dtype=numpy.int64))
        counts = Counter(sequence)  # the distinct terms in order of first appearance
        counts.pop("", None)  # gaps and words too long to index: no term
        numbers = dict(zip(counts, range(len(counts)), strict=True))
        numbers[""] = -1
        at = numpy.fromiter(
            map(numbers.__getitem__, sequence), dtype=numpy.int64, count=len(sequence)
        )
        return TermSequence(list(counts), list(counts.values()), at)


_MAKERS: dict[str | None, TermMaker] = {}


def term_maker(lang: str | None) -> TermMaker:
    """The shared :class:`TermMaker` for a language (one cache per language per process)."""
    key = primary_language(lang)
    key = key if key in STEMMED_LANGUAGES else None
    maker = _MAKERS.get(key)
    if maker is None:
        maker = _MAKERS[key] = TermMaker(key)
    return maker


@dataclass(frozen=True, slots=True)
class Word:
    """One word of a text, where it is (for snippets) and whether it is a CJK run."""

    text: str
    start: int
    end: int
    cjk: bool


def word_matches(text: str) -> Iterator[re.Match[str]]:
    """The words of ``text`` as regex matches (the cheapest form with offsets)."""
    return _WORD_RE.finditer(text)


def word_list(text: str) -> list[str]:
    """The words of ``text``, without offsets (several times cheaper than :func:`word_matches`)."""
    if text.isascii():
        return text.translate(_ASCII_SEPARATORS).split()
    return _WORD_RE.findall(text)


def has_cjk(text: str) -> bool:
    return _CJK_RE.search(text) is not None


def is_word_char(char: str) -> bool:
    """Whether ``char`` belongs in a non-CJK word (the same test the word pattern makes)."""
    return _WORD_CHAR_RE.match(char) is not None


def is_cjk(word: str) -> bool:
    return word[0] >= CJK_FIRST and _CJK_RE.fullmatch(word) is not None


def words(text: str) -> Iterator[Word]:
    """The words of ``text`` with their character offsets, as indexing splits them."""
    for match in _WORD_RE.finditer(text):
        word = match.group()
        cjk = word[0] >= CJK_FIRST and _CJK_RE.fullmatch(word) is not None
        yield Word(word, match.start(), match.end(), cjk)


def cjk_sequence(run: str, *, followed: bool = False) -> tuple[str, ...]:
    """The terms that must appear at consecutive positions for a CJK run to match.

    Bigrams cover the run; a single character is its own term. When more words follow in the
    same phrase, the last character is appended so that the next word's position lines up
    (the run occupies one position per character).
    """
    if len(run) == 1:
        return (run,)
    sequence = tuple(run[i : i + 2] for i in range(len(run) - 1))
    return (*sequence, run[-1]) if followed else sequence


def query_variants(text: str, langs: tuple[str | None, ...] | None = None) -> set[tuple[str, ...]]:
    """The distinct term sequences a query word or phrase may match (see
    :func:`query_variants_by_language`)."""
    return set(query_variants_by_language(text, langs))


def query_variants_by_language(
    text: str, langs: tuple[str | None, ...] | None = None
) -> dict[tuple[str, ...], set[str | None]]:
    """The distinct term sequences a query word or phrase may match, each with the languages
    whose analysis produces it (None: the unstemmed form, which pages of any language may hold).

    A sequence of one term is a plain term query; longer sequences are phrases. ``langs``
    narrows the expansion (a ``lang:de`` filter needs only the German stems). Empty when
    ``text`` holds no word at all (punctuation only).
    """
    tokens = list(words(text))
    if not tokens:
        return {}
    variants: dict[tuple[str, ...], set[str | None]] = {}
    for lang in langs if langs is not None else (None, *STEMMED_LANGUAGES):
        maker = term_maker(lang)
        sequence: list[str] = []
        for index, token in enumerate(tokens):
            if token.cjk:
                sequence.extend(cjk_sequence(token.text, followed=index + 1 < len(tokens)))
            else:
                term = maker.term(token.text)
                if term:
                    sequence.append(term)
        if sequence:
            variants.setdefault(tuple(sequence), set()).add(maker.lang)
    return variants


def spelling_word(word: str) -> str | None:
    """The folded form of a word (as :meth:`TermMaker.positions` collects them) when it is
    worth offering as a "did you mean" correction: 3 to 20 letters, not a number, not CJK."""
    if 3 <= len(word) <= 20 and word[0] < CJK_FIRST and not word.isdigit():
        return fold(word)
    return None


@dataclass(frozen=True, slots=True)
class Analyzed:
    """A text already turned into terms and positions (what a :class:`LangText` field indexes)."""

    positions: dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class TermSequence:
    """A field analyzed as its distinct terms (in order of first appearance), how often each
    occurs, and the number of the term at each position (-1: none): what the ``text``
    field's postings and positions column are made of (:meth:`TermMaker.sequence`)."""

    terms: list[str]
    counts: list[int]
    at: numpy.ndarray

    @property
    def positions(self) -> dict[str, list[int]]:
        """The same analysis as :attr:`Analyzed.positions` (term → its positions)."""
        found: dict[str, list[int]] = {term: [] for term in self.terms}
        for position, number in enumerate(self.at.tolist()):
            if number >= 0:
                found[self.terms[number]].append(position)
        return found


def analyze(lang: str | None, text: str, seen: set[str] | None = None) -> Analyzed:
    return Analyzed(term_maker(lang).positions(text, seen)[0])


def analyze_parts(
    lang: str | None,
    parts: Iterable[tuple[str, bool]],
    gap: int,
    seen: set[str] | None = None,
) -> Analyzed | TermSequence:
    """Several texts as one field, ``gap`` positions apart, so no phrase spans two parts.

    ``parts`` are ``(text, collect)`` pairs: words of parts with ``collect`` go to ``seen``.
    Text without CJK runs is analyzed by :meth:`TermMaker.sequence` (ASCII text has none;
    other text is searched for them once, a fifth of what splitting it costs).
    """
    maker = term_maker(lang)
    parts = list(parts)
    if all(text.isascii() or not has_cjk(text) for text, _ in parts):
        return maker.sequence(parts, gap, seen)
    merged: dict[str, list[int]] = {}
    base = 0
    for part, collect in parts:
        if not part:
            continue
        _, used = maker.positions(part, seen if collect else None, start=base, found=merged)
        base += used + gap
    return Analyzed(merged)


#: Detection reads this much text: enough for a confident answer, bounded cost per page.
DETECT_SAMPLE_CHARS = 2000
#: Below this confidence (a probability) the page keeps no language rather than a guess.
DETECT_MIN_CONFIDENCE = 0.5


def detect_language(text: str) -> str | None:
    """The language of ``text`` by py3langid's bundled model (:mod:`sextant.language`), or
    None when unsure."""
    sample = text[:DETECT_SAMPLE_CHARS]
    if len(sample) < 20:
        return None
    lang, confidence = identifier().classify(sample)
    return None if confidence < DETECT_MIN_CONFIDENCE else primary_language(lang)
