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
    """Word → number of documents containing it.

    Documents are counted by their words as written (:meth:`add`, a C-speed ``Counter``
    update per document); folding and filtering happen once per distinct word, when the
    counts are first needed.
    """

    def __init__(self, counts: Counter[str] | None = None) -> None:
        self._counts: Counter[str] = counts if counts is not None else Counter()
        self._raw: Counter[str] = Counter()
        self._sorted: list[str] | None = None

    @property
    def counts(self) -> Counter[str]:
        if self._raw:
            for word, count in self._raw.items():
                folded = spelling_word(word)
                if folded is not None:
                    self._counts[folded] += count
            self._raw.clear()
            self._sorted = None
        return self._counts

    def add(self, words: Iterable[str]) -> None:
        """Count one document's distinct words (as written)."""
        self._raw.update(words)

    def merge(self, other: Counter[str]) -> None:
        """Add counts of folded words (another worker's :attr:`counts`)."""
        self.counts.update(other)
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
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".vocabulary-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                for word in sorted(self.counts):
                    handle.write(f"{word}\t{self.counts[word]}\n")
            os.replace(temp, directory / VOCABULARY_FILE)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, directory: Path) -> Vocabulary:
        counts: Counter[str] = Counter()
        path = directory / VOCABULARY_FILE
        if path.exists():
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    word, _, count = line.rstrip("\n").partition("\t")
                    if word and count.isdigit():
                        counts[word] = int(count)
        return cls(counts)
