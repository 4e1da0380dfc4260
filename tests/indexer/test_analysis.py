"""Analysis: folding, stemming per language, CJK bigrams, query expansion, detection."""

from __future__ import annotations

import pytest

from indexer.analysis import (
    CACHE_LIMIT,
    MAX_WORD_CHARS,
    TermMaker,
    detect_language,
    fold,
    primary_language,
    query_variants,
    spelling_word,
    term_maker,
    words,
)


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
    assert len(maker._cache) <= CACHE_LIMIT
    assert used == CACHE_LIMIT + 5_001
    assert found["run"] == [CACHE_LIMIT + 5_000]  # terms stay right across a clearing
    assert maker.term("zq7x") == "zq7x"
