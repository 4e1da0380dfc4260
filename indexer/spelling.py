""" "Did you mean": corrections drawn from the index's own vocabulary.

The index's terms are stemmed (``capsul``), which makes poor suggestions, so the indexer also
keeps the folded, unstemmed words of titles, headings and bodies with the number of documents
each appeared in (``vocabulary.tsv`` beside the index). Incremental runs add the words of the
pages they index and never subtract, so counts drift upward for pages that changed; that only
nudges the ranking between candidates, and a suggestion is offered only after the corrected
query was run and found more results.

Candidates are words within Damerau-Levenshtein distance 1 (2 for words of six letters or more)
sharing the first letter (most typos are not in the first letter, and the restriction keeps a
lookup to milliseconds), ranked by distance, then by how many documents use them.
"""

from __future__ import annotations

import os
import tempfile
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

# The Whoosh internals this module uses are checked by tests/indexer/test_whoosh_internals.py.
from whoosh.automata.fsa import find_all_matches
from whoosh.automata.lev import levenshtein_automaton

from indexer.analysis import spelling_word

VOCABULARY_FILE = "vocabulary.tsv"

#: Words longer than this are not typed by people; they are not suggestion material.
MAX_WORD_CHARS = 24

#: The most words a vocabulary keeps: the ones in the most documents (English uses about
#: 170,000). Every distinct word a page writes, junk included, used to be kept, so a crawl's
#: vocabulary grew without end (a page of random tokens adds a hundred thousand), in every
#: index worker and in every search process that loads it.
MAX_WORDS = 200_000


def _within(words: list[str], word: str, max_distance: int) -> Iterator[tuple[int, str]]:
    """Words of the sorted list ``words`` within ``max_distance`` edits of ``word`` (same first
    letter), nearest first, found by walking a Levenshtein automaton over the sorted list."""
    if not words:
        return

    def next_word_at_or_after(key: str) -> str | None:
        at = bisect_left(words, key)
        return words[at] if at < len(words) else None

    seen: set[str] = set()
    for distance in range(1, max_distance + 1):
        automaton = levenshtein_automaton(word, distance, prefix=1).to_dfa()
        for match in find_all_matches(automaton, next_word_at_or_after):
            if match not in seen:
                seen.add(match)
                yield distance, match


class Vocabulary:
    """Word → number of documents containing it, for the :data:`MAX_WORDS` commonest words.

    Documents are counted by their words as written (:meth:`add`, a C-speed ``Counter``
    update per document); folding and filtering happen once per distinct word, when the
    counts are first needed or when ``max_words`` words as written have piled up. Past twice
    ``max_words`` the rarest words are dropped (a word dropped and seen again starts from
    one): memory stays under about three times ``max_words`` entries whatever is indexed.
    """

    def __init__(self, *, max_words: int = MAX_WORDS) -> None:
        self.max_words = max_words
        self._counts: Counter[str] = Counter()
        self._raw: Counter[str] = Counter()
        self._sorted: list[str] | None = None

    @property
    def counts(self) -> Counter[str]:
        self._fold()
        return self._counts

    def add(self, words: Iterable[str]) -> None:
        """Count one document's distinct words (as written)."""
        self._raw.update(words)
        if len(self._raw) >= self.max_words:
            self._fold()

    def merge(self, other: Counter[str]) -> None:
        """Add counts of folded words (another worker's :attr:`counts`)."""
        self.counts.update(other)
        self._sorted = None
        self._trim()

    def _fold(self) -> None:
        """Move the words as written into the folded counts (then trim those)."""
        if not self._raw:
            return
        for word, count in self._raw.items():
            folded = spelling_word(word)
            if folded is not None:
                self._counts[folded] += count
        self._raw.clear()
        self._sorted = None
        self._trim()

    def _trim(self) -> None:
        if len(self._counts) > 2 * self.max_words:
            self._keep_commonest()

    def _keep_commonest(self) -> None:
        if len(self._counts) > self.max_words:
            self._counts = Counter(dict(self._counts.most_common(self.max_words)))
            self._sorted = None

    def __contains__(self, word: str) -> bool:
        return word in self.counts

    def __len__(self) -> int:
        return len(self.counts)

    def suggest(self, word: str) -> str | None:
        """The likeliest intended word for ``word`` (folded), or None."""
        if not word or len(word) > MAX_WORD_CHARS:
            return None
        if self._sorted is None:
            self._sorted = sorted(self.counts)
        max_distance = 2 if len(word) >= 6 else 1
        best: tuple[int, int, str] | None = None
        for distance, candidate in _within(self._sorted, word, max_distance):
            if candidate == word:
                continue
            key = (distance, -self.counts[candidate], candidate)
            if best is None or key < best:
                best = key
        return None if best is None else best[2]

    def save(self, directory: Path) -> None:
        """Write the commonest :attr:`max_words` words, in alphabetical order."""
        self._fold()
        self._keep_commonest()
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".vocabulary-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                for word in sorted(self._counts):
                    handle.write(f"{word}\t{self._counts[word]}\n")
            os.replace(temp, directory / VOCABULARY_FILE)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, directory: Path, *, max_words: int = MAX_WORDS) -> Vocabulary:
        """Read a saved vocabulary; one saved by a version without the bound is trimmed as
        it is read, so loading it never holds all of it."""
        vocabulary = cls(max_words=max_words)
        path = directory / VOCABULARY_FILE
        if path.exists():
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    word, _, count = line.rstrip("\n").partition("\t")
                    if word and count.isdigit():
                        vocabulary._counts[word] = int(count)
                        vocabulary._trim()
            vocabulary._keep_commonest()
        return vocabulary
