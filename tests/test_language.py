"""The vectorized language identifier gives py3langid's own answers, to the bit."""

from __future__ import annotations

import random

import numpy
import pytest
from py3langid.langid import MODEL_FILE, LanguageIdentifier, visit_counts

from sextant.language import NGRAM_BYTES, FastIdentifier, identifier

TEXTS = [
    "The quick brown fox jumps over the lazy dog, and then it goes home to sleep.",
    "Der schnelle braune Fuchs springt über den faulen Hund und geht dann nach Hause.",
    "Le renard brun rapide saute par-dessus le chien paresseux, puis rentre chez lui.",
    "El rápido zorro marrón salta sobre el perro perezoso y luego vuelve a casa.",
    "Быстрая коричневая лиса прыгает через ленивую собаку и идёт домой спать.",
    "素早い茶色の狐がのろまな犬を飛び越えて、それから家に帰って寝ます。",
    "敏捷的棕色狐狸跳过了懒狗，然后回家睡觉。",
    "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
    "# Gemlog\n=> gemini://example.org/ Home\n* one\n* two\n```\nls -la /tmp\n```\n",
    "ALL CAPITALS ARE LOWERED FIRST BY PY3LANGID BEFORE IT LOOKS AT THE BYTES",
    "",
    "a",
    "ab",
    "x" * 5000,
    "\ud800 a lone surrogate, which py3langid passes through",
]


@pytest.fixture(scope="module")
def reference() -> LanguageIdentifier:
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _random_texts(count: int) -> list[bytes]:
    rng = random.Random(7)
    texts = [bytes(rng.randrange(256) for _ in range(rng.randrange(60))) for _ in range(count)]
    # Runs of a few letters repeated: the automaton's deepest states.
    letters = b"aeinost \xc3\xa9"
    texts += [bytes(rng.choice(letters) for _ in range(rng.randrange(400))) for _ in range(count)]
    return texts


def test_the_same_answers_and_scores_as_py3langid(reference: LanguageIdentifier) -> None:
    fast = identifier()
    for text in [*TEXTS, *_random_texts(200)]:
        assert fast.classify(text) == reference.classify(text), text
        assert (fast._decide(text) == reference._decide(text)).all(), text


def test_the_same_ngrams_in_the_same_order_as_py3langid() -> None:
    # _sparse_score sums in the order of the features: the same order gives the same floats.
    fast = identifier()
    for text in [t.encode("utf-8", errors="surrogatepass") for t in TEXTS] + _random_texts(50):
        expected = visit_counts(fast.tk_nextmove, fast._rowbase, fast.tk_output, text) or {}
        assert list(fast.visits(text).items()) == list(expected.items())


def test_the_automatons_state_depends_on_the_last_ngram_bytes_alone() -> None:
    """What the vectorized walk rests on, for every state and byte of the shipped model:
    from each state's shortest string w, reading byte b lands where the last NGRAM_BYTES
    bytes of w + b land from the start (for an Aho-Corasick automaton, as langid builds,
    that is the property for every text); and NGRAM_BYTES - 1 would not do."""
    fast = FastIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    moves = fast._moves.astype(numpy.int64)
    rows = fast._rows
    states = len(rows)
    width = NGRAM_BYTES + 1
    # Breadth-first: each state's shortest string, right-aligned in `width` bytes.
    strings = numpy.zeros((states, width), dtype=numpy.int64)
    lengths = numpy.full(states, -1, dtype=numpy.int64)
    lengths[0] = 0
    frontier = numpy.array([0])
    every_byte = numpy.arange(256)
    while len(frontier):
        targets = moves[rows[frontier][:, None] + every_byte[None, :]].ravel()
        new = lengths[targets] < 0
        found, first = numpy.unique(targets[new], return_index=True)
        sources = frontier[numpy.flatnonzero(new)[first] // 256]
        added = numpy.flatnonzero(new)[first] % 256
        assert (lengths[sources] < NGRAM_BYTES).all()  # no state deeper than the n-grams
        strings[found, :-1] = strings[sources, 1:]
        strings[found, -1] = added
        lengths[found] = lengths[sources] + 1
        frontier = found
    assert (lengths >= 0).all()

    def bad_transitions(keep: int) -> int:
        bad = 0
        for start in range(0, states, 4096):
            chunk = numpy.arange(start, min(states, start + 4096))
            expected = moves[rows[chunk][:, None] + every_byte[None, :]]
            text = numpy.repeat(strings[chunk], 256, axis=0)  # w right-aligned, then b
            text = numpy.concatenate([text[:, 1:], numpy.tile(every_byte, len(chunk))[:, None]], 1)
            used = numpy.minimum(numpy.repeat(lengths[chunk], 256) + 1, keep)
            state = numpy.zeros(len(text), dtype=numpy.int64)
            for column in range(width):
                step = column >= width - used
                state[step] = moves[rows[state[step]] + text[step, column]]
            bad += int((state != expected.ravel()).sum())
        return bad

    assert bad_transitions(NGRAM_BYTES) == 0
    assert bad_transitions(NGRAM_BYTES - 1) > 0
