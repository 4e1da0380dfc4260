"""Snippets: the window with the most query terms, cut at word boundaries, words marked."""

from __future__ import annotations

import itertools

import hypothesis
from hypothesis import strategies as st

from indexer.analysis import STEMMED_LANGUAGES, fold, term_maker, word_list, word_matches
from indexer.snippets import (
    MARK_END,
    MARK_START,
    MAX_MATCHES,
    MAX_SCAN_CHARS,
    SNIPPET_CHARS,
    _matches,
    _matches_by_word,
    heads,
    make_snippet,
)


def marked(word: str) -> str:
    return f"{MARK_START}{word}{MARK_END}"


def test_the_window_with_most_distinct_terms_wins() -> None:
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 6
    text = f"Tomatoes once. {filler} Tomatoes grow on my balcony in pots. {filler}"
    snippet = make_snippet(text, {"tomato", "balconi"}, "en")
    assert marked("balcony") in snippet
    assert marked("Tomatoes") in snippet
    assert snippet.startswith("…")
    assert snippet.endswith("…")
    assert len(snippet) <= SNIPPET_CHARS + 60


def test_cuts_fall_between_words_and_whitespace_collapses() -> None:
    text = "alpha beta\n\ngamma   delta " + "word " * 100
    snippet = make_snippet(text, {"gamma"}, None)
    assert snippet.startswith(f"alpha beta {marked('gamma')} delta word")
    assert "  " not in snippet
    assert "\n" not in snippet
    assert snippet.endswith("word…")


def test_no_match_gives_the_opening() -> None:
    text = "An opening line.\nThen more text follows here. " * 20
    snippet = make_snippet(text, {"absent"}, "en")
    assert snippet.startswith("An opening line.")
    assert MARK_START not in snippet


def test_accents_and_stems_are_marked_in_the_page_language() -> None:
    assert marked("Häuser") in make_snippet("Die Häuser sind alt.", {"haus"}, "de")
    assert marked("crêpes") in make_snippet("Les crêpes sont bonnes.", {"crep"}, "fr")


def test_cjk_marks_the_matched_substring() -> None:
    snippet = make_snippet("今日の東京は晴れです。", {"東京"}, "ja")
    assert marked("東京") in snippet
    assert make_snippet("京都のお寺", {"お寺"}, None) == f"京都の{marked('お寺')}"


def test_empty_text() -> None:
    assert make_snippet("", {"x"}, None) == ""


# The fast matchers (heads found with str.find; distinct words) must mark exactly the words
# whose term is a query term, on any text: boundaries, repeats, accents, stems, digits,
# underscores, the stemmer's special forms.
_WORDS = [
    "garden",
    "Gardens",
    "gardening",
    "gar",
    "the",
    "The",
    "théâtre",
    "THEATRE",
    "x_garden",
    "garden2",
    "2garden",
    "runs",
    "running",
    "ran",
    "Häuser",
    "haus",
    "über",
    "naïve",
    "dying",
    "die",
    "cry",
    "cries",
    "skies",
    "sky",
    "go",
    "going",
    "a",
    "Ärger",
    "ärgern",
    "x2",
]
_GAPS = [" ", "\n", ", ", "-", "_", "", ". ", "'", "…"]


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    pieces=st.one_of(
        st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_GAPS)), max_size=80),
        st.lists(  # ASCII only: the path that finds word beginnings in spaced bytes
            st.tuples(st.sampled_from([w for w in _WORDS if w.isascii()]), st.sampled_from(_GAPS)),
            max_size=80,
        ),
    ),
    lang=st.sampled_from([None, "en", "de", "fr"]),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3),
)
def test_fast_matching_marks_every_word_whose_term_was_asked_for(pieces, lang, query) -> None:
    text = "".join(word + gap for word, gap in pieces)
    maker = term_maker(lang)
    terms = {maker.term(word) for text in query for word in word_list(text)}
    every_word = [
        (match.start(), match.end(), maker.term(match.group()))
        for match in word_matches(text[:MAX_SCAN_CHARS])
    ]
    expected = [found for found in every_word if found[2] in terms][:MAX_MATCHES]
    assert _matches(text, terms, lang) == expected
    assert _matches_by_word(text, terms, lang) == expected


def test_only_the_first_matches_are_kept() -> None:
    text = "garden " * (MAX_MATCHES + 10)
    found = _matches(text, {"garden"}, "en")
    assert len(found) == MAX_MATCHES
    assert found[0] == (0, 6, "garden")


def test_a_words_term_keeps_its_head() -> None:
    """What the snippet matchers rely on (see heads): a term keeps its word's beginning."""
    letters = "aeiouybcdfghlmnrst"
    words = ["".join(t) for n in (1, 2, 3) for t in itertools.product(letters, repeat=n)]
    words += ["".join(t) for t in itertools.product("aeiysdnr", repeat=4)]  # endings stemmed
    words += ["skies", "dying", "lying", "tying", "generously", "Häuser", "crêpes", "über"]
    stems = ["ar", "gener", "nation", "happy", "cry", "tidy", "ie", "y", "ing", "sky", "fly"]
    endings = ["", "s", "es", "ies", "ied", "ing", "ingly", "ed", "edly", "ly", "ness", "ation"]
    endings += ["ational", "fulness", "ement", "ements", "ungen", "heit", "ement", "issement"]
    endings += ["aciones", "amente", "ándose", "euse", "eux", "ité", "eaux", "e", "é", "y"]
    words += [stem + ending for stem in stems for ending in endings]
    for lang in (*STEMMED_LANGUAGES, None):
        maker = term_maker(lang)
        for word in words:
            term = maker.term(word)
            assert not term or fold(word).startswith(tuple(heads({term}))), (lang, word, term)
