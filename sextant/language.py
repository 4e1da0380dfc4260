"""Language identification: py3langid's bundled model, its byte automaton walked by numpy.

py3langid finds a text's byte n-grams by walking an automaton one byte at a time in a Python
loop, each step waiting on the last lookup in a 39 MB table: inside an index build that walk
was a third of a detection's 1.8 ms (detection itself a tenth of the build's CPU). The
automaton is Aho-Corasick's over n-grams of at most :data:`NGRAM_BYTES` bytes: its state
after any text is the state the last :data:`NGRAM_BYTES` bytes reach from the start (the
tests check this for every state and byte of the model). So the state at every position of
a text comes from :data:`NGRAM_BYTES` vectorized steps over all positions at once, and the
n-grams found, their counts and their order are py3langid's own: the scores are the same
numbers, computed by py3langid's own code from there on.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy
from py3langid.langid import MODEL_FILE, LanguageIdentifier

#: The longest n-gram of the model, in bytes: how far back the automaton's state depends.
NGRAM_BYTES = 6


class FastIdentifier(LanguageIdentifier):
    """py3langid's identifier with the n-gram search vectorized (see the module docstring).

    Uses py3langid internals (``tk_nextmove``, ``_rowbase``, ``tk_output``, ``_raw_score``,
    ``_sparse_score``), checked by tests/test_language.py."""

    __slots__ = ("_moves", "_outputs", "_rows")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._moves = numpy.frombuffer(self.tk_nextmove, dtype=numpy.uint32)
        self._rows = numpy.asarray(self._rowbase, dtype=numpy.int64)
        self._outputs = numpy.asarray(self.tk_output, dtype=numpy.int64)

    def visits(self, text: bytes) -> dict[int, int]:
        """Feature → count for ``text`` (UTF-8), in order of first appearance: what
        ``py3langid.langid.visit_counts`` gives."""
        data = numpy.frombuffer(text, dtype=numpy.uint8)
        size = len(data)
        states = numpy.zeros(size, dtype=numpy.int64)
        for back in range(min(NGRAM_BYTES, size) - 1, -1, -1):
            # The byte ``back`` places before each position (positions with none stay at
            # the start state until their first byte).
            states[back:] = self._moves[self._rows[states[back:]] + data[: size - back]]
        features = self._outputs[states]
        features = features[features >= 0]
        if not len(features):
            return {}
        unique, first, counts = numpy.unique(features, return_index=True, return_counts=True)
        order = numpy.argsort(first)
        return dict(zip(unique[order].tolist(), counts[order].tolist(), strict=True))

    def _raw_score(self, text: bytes) -> Any:
        visits = self.visits(text)
        if not visits:
            return super()._raw_score(b"")  # py3langid's score for no features
        return self._sparse_score(visits, self.nb_ptc)


@cache
def identifier() -> FastIdentifier:
    """The process's identifier, with normalized probabilities (so that a threshold means
    something); the model loads on first use, in under a second."""
    return FastIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
