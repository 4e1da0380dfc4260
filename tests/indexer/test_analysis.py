"""Analysis: folding, stemming per language, CJK bigrams, query expansion, detection."""

from __future__ import annotations

import random

import pytest

from indexer.analysis import (
    _WORD_RE,
    CACHE_LIMIT,
    MAX_WORD_CHARS,
    Analyzed,
    TermMaker,
    TermSequence,
    analyze_parts,
    detect_language,
    fold,
    primary_language,
    query_variants,
    spelling_word,
    term_maker,
    word_list,
    words,
)
from indexer.schema import LangText, text_columns


@pytest.mark.parametrize(
    ("word", "folded"),
    [
        ("Émile", "emile"),
        ("Häuser", "hauser"),
        ("Straße", "strasse"),
        ("crêpes", "crepes"),
        ("Ørsted", "orsted"),
        ("Łódź", "lodz"),
        ("ﬁle", "file"),  # compatibility ligature
        ("plain", "plain"),
    ],
)
def test_fold(word: str, folded: str) -> None:
    assert fold(word) == folded


@pytest.mark.parametrize(
    ("tag", "primary"),
    [("en", "en"), ("en-GB", "en"), ("DE_at", "de"), ("fr,en", "fr"), ("", None), (None, None)],
)
def test_primary_language(tag: str | None, primary: str | None) -> None:
    assert primary_language(tag) == primary


def test_primary_language_refuses_garbage() -> None:
    assert primary_language("x") is None
    assert primary_language("12-34") is None
    assert primary_language("english-please") is None


def test_english_is_stemmed_and_other_languages_by_their_own_rules() -> None:
    assert term_maker("en").term("running") == "run"
    assert term_maker("en").term("Capsules") == "capsul"
    assert term_maker("de").term("Häuser") == "haus"
    assert term_maker("fr").term("maisons") == "maison"
    assert term_maker("es").term("canciones") == "cancion"
    # A language without a stemmer here is folded only.
    assert term_maker("ja").term("Running") == "running"
    assert term_maker(None).term("Running") == "running"


def test_folding_happens_before_stemming_so_accents_never_matter() -> None:
    german = term_maker("de")
    assert german.term("Häuser") == german.term("hauser") == german.term("HAUSER")


@pytest.mark.parametrize(
    ("plural", "singular"),
    [
        ("Kartoffeln", "Kartoffel"),  # -n after -el: Snowball leaves it
        ("Zwiebeln", "Zwiebel"),
        ("Nudeln", "Nudel"),
        ("Autos", "Auto"),  # -s after a vowel: Snowball leaves it
        ("Fotos", "Foto"),
        ("Tomaten", "Tomate"),  # -en, -er, -e: Snowball's own
        ("Häuser", "Haus"),
        ("Kinder", "Kind"),
        ("Äpfel", "Apfel"),
    ],
)
def test_german_plurals_meet_their_singulars(plural: str, singular: str) -> None:
    german = term_maker("de")
    assert german.term(plural) == german.term(singular)


def test_german_plural_rules_spare_short_words_and_singulars_in_us() -> None:
    german = term_maker("de")
    assert german.term("Kaktus") == "kaktus"  # a singular, not a plural of "Kaktu"
    assert german.term("Status") == "status"
    assert german.term("eln") == "eln"  # too short to be a noun in -el
    assert german.term("Gas") == "gas"


def test_positions_split_on_punctuation_and_drop_junk() -> None:
    found, used = term_maker(None).positions("example.org: e-mail " + "x" * (MAX_WORD_CHARS + 1))
    assert found == {"example": [0], "org": [1], "e": [2], "mail": [3]}
    assert used == 5  # the junk word still occupies a position, so phrases cannot skip it


def test_cjk_runs_become_characters_and_bigrams_at_shared_positions() -> None:
    found, used = term_maker(None).positions("東京都 tower")
    assert found["東京"] == [0]
    assert found["京都"] == [1]
    assert found["東"] == [0]
    assert found["都"] == [2]
    assert found["tower"] == [3]
    assert used == 4


def test_words_report_offsets_and_cjk() -> None:
    found = list(words("Hi 東京!"))
    assert [(w.text, w.start, w.end, w.cjk) for w in found] == [
        ("Hi", 0, 2, False),
        ("東京", 3, 5, True),
    ]


def test_query_variants_cover_every_stemmed_language() -> None:
    assert query_variants("running") == {("running",), ("run",)}
    assert query_variants("Häuser") == {("hauser",), ("haus",)}
    assert query_variants("running", (None,)) == {("running",)}
    assert query_variants("!!!") == set()


def test_query_variants_of_a_compound_word_and_of_cjk() -> None:
    assert ("example", "org") in query_variants("example.org")
    assert query_variants("東京") == {("東京",)}
    assert query_variants("京") == {("京",)}
    assert query_variants("東京都") == {("東京", "京都")}
    # Followed by a word, the run's last character keeps the positions aligned.
    assert ("東京", "京", "tower") in query_variants("東京 tower", (None,))


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Die Häuser in der Stadt sind sehr schön und alt, wir besuchen sie oft.", "de"),
        ("Les crêpes de la Chandeleur sont une tradition française très ancienne.", "fr"),
        ("La tortilla de patatas es el plato más famoso de la cocina española.", "es"),
        ("The quick brown fox jumps over the lazy dog near the river bank.", "en"),
    ],
)
def test_detect_language(text: str, lang: str) -> None:
    assert detect_language(text) == lang


def test_detect_language_abstains_on_too_little_text() -> None:
    assert detect_language("gemini") is None
    assert detect_language("") is None


def test_spelling_words_are_folded_and_reasonable() -> None:
    seen: set[str] = set()
    term_maker("en").positions("Crêpes and 2024 and a Tomatoes x y 東京 " + "z" * 30, seen)
    assert {spelling_word(word) for word in seen} - {None} == {"crepes", "and", "tomatoes"}


def test_the_word_cache_stays_bounded_on_endless_distinct_words() -> None:
    # A hostile page (or a huge corpus) brings more distinct words than any cache should hold.
    maker = TermMaker("en")
    junk = " ".join(f"zq{i}x" for i in range(CACHE_LIMIT + 5_000))
    found, used = maker.positions(junk + " running")
    assert len(maker._cache) + len(maker._old) <= 2 * CACHE_LIMIT
    assert used == CACHE_LIMIT + 5_001
    assert found["run"] == [CACHE_LIMIT + 5_000]  # terms stay right across a turn
    assert maker.term("zq7x") == "zq7x"
    more = " ".join(f"zr{i}x" for i in range(3 * CACHE_LIMIT))
    maker.positions(more)
    assert len(maker._cache) + len(maker._old) <= 2 * CACHE_LIMIT


def test_words_in_use_survive_the_caches_turns() -> None:
    # The cache drops its old generation when the new one fills: a word seen in every
    # generation moves along and is stemmed once, however many rare words pass through.
    maker = TermMaker("en")
    stem = maker._stem
    assert stem is not None
    stemmed: list[str] = []

    def counting(word: str) -> str:
        stemmed.append(word)
        return stem(word)

    maker._stem = counting
    rare = iter(range(10**9))
    for _ in range(4 * CACHE_LIMIT // 1000):
        maker.positions("running " + " ".join(f"zq{next(rare)}x" for _ in range(1000)))
    assert stemmed.count("running") == 1
    assert len(stemmed) == 4 * CACHE_LIMIT + 1  # every rare word once: none came back
    assert maker.term("running") == "run"


def test_parts_are_numbered_on_with_a_gap_between_them() -> None:
    # The parts of one field (title, body, anchors...) share the field's positions: each
    # part starts `gap` positions after the one before ends, so no phrase spans two parts.
    parts = [("The cat sat", True), ("", True), ("cat 東京 cat", False), ("sat down", True)]
    seen: set[str] = set()
    merged = analyze_parts("en", parts, 100, seen).positions
    maker = term_maker("en")
    expected: dict[str, list[int]] = {}
    base = 0
    for text, _ in parts:
        if not text:
            continue
        found, used = maker.positions(text)
        for term, positions in found.items():
            expected.setdefault(term, []).extend(base + p for p in positions)
        base += used + 100
    assert merged == expected
    assert merged["cat"] == [1, 103, 106]
    assert merged["sat"] == [2, 207]
    assert seen == {"The", "cat", "sat", "down"}


def test_ascii_text_splits_into_the_words_the_pattern_finds() -> None:
    # ASCII text takes a faster path than the word pattern: it must find the same words.
    every = "".join(chr(code) for code in range(128))
    rng = random.Random(7)
    samples = [every, every[::-1], "snake_case x-ray e.g. 3.14 tab\there\r\nend"]
    samples += ["".join(rng.choice(every) for _ in range(200)) for _ in range(200)]
    for text in samples:
        assert word_list(text) == _WORD_RE.findall(text)
    assert word_list("snake_case x-ray") == ["snake", "case", "x", "ray"]
    assert word_list("naïve café") == ["naïve", "café"]  # not ASCII: the pattern's path


def _by_positions(lang: str, parts: list[tuple[str, bool]], gap: int) -> dict[str, list[int]]:
    """A field's positions the word-by-word way (the path CJK text takes)."""
    maker = term_maker(lang)
    merged: dict[str, list[int]] = {}
    base = 0
    for text, _ in parts:
        if text:
            _, used = maker.positions(text, start=base, found=merged)
            base += used + gap
    return merged


def test_text_without_cjk_analyzes_to_what_the_word_by_word_path_gives() -> None:
    # Text without CJK goes through TermMaker.sequence (numpy over interned terms): its
    # terms, positions, postings and columns must be those of the word-by-word path.
    rng = random.Random(11)
    vocabulary = ["Cat", "cats", "cat", "running", "Runs", "ran", "naïve", "Naive", "x" * 41]
    vocabulary += ["café", "Ünïcode", "42", "the", "a_b", "e.g.", "—", "’s"]
    field = LangText(positions=False)
    for _ in range(200):
        parts = [
            (
                " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 30))),
                rng.random() < 0.5,
            )
            for _ in range(rng.randint(1, 4))
        ]
        seen: set[str] = set()
        analyzed = analyze_parts("en", parts, 100, seen)
        assert isinstance(analyzed, TermSequence)
        expected = _by_positions("en", parts, 100)
        assert analyzed.positions == expected
        assert list(analyzed.positions) == list(expected)  # numbered in order of appearance
        assert text_columns(analyzed) == text_columns(expected)
        assert field.index(analyzed) == field.index(Analyzed(expected))
        assert seen == {w for text, collect in parts if collect for w in word_list(text)}
    same = analyze_parts("en", [("Running runs RUN running", True)], 100)
    assert isinstance(same, TermSequence)
    assert (same.terms, same.counts) == (["run"], [4])  # four words, one (interned) term


def test_a_field_with_cjk_keeps_the_word_by_word_path() -> None:
    analyzed = analyze_parts("en", [("cat 東京 cat", True)], 100)
    assert isinstance(analyzed, Analyzed)
    assert analyzed.positions == {"cat": [0, 3], "東": [1], "東京": [1], "京": [2]}


def test_one_sequence_longer_than_the_cache_stays_right_and_bounded() -> None:
    maker = TermMaker("en")
    junk = " ".join(f"zq{i}x" for i in range(3 * CACHE_LIMIT))
    analyzed = maker.sequence([("running " + junk + " running", True)], 100)
    assert len(maker._cache) + len(maker._old) <= 2 * CACHE_LIMIT
    assert analyzed.terms[0] == "run"
    assert analyzed.terms[-1] == f"zq{3 * CACHE_LIMIT - 1}x"
    assert analyzed.counts[0] == 2
    assert len(analyzed.terms) == 3 * CACHE_LIMIT + 1
    assert analyzed.at[[0, -1]].tolist() == [0, 0]
