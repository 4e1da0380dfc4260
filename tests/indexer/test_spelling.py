"""The spelling vocabulary: document counts of folded words, and corrections from it."""

from __future__ import annotations

from pathlib import Path

from indexer.spelling import Vocabulary


def test_counts_documents_by_folded_word() -> None:
    vocabulary = Vocabulary()
    vocabulary.add({"Gemini", "capsule", "2024", "ab", "東京"})
    vocabulary.add({"gemini", "Capsule", "Gemma"})
    vocabulary.add({"GEMINI"})
    assert vocabulary.counts == {"gemini": 3, "capsule": 2, "gemma": 1}


def test_suggests_the_nearest_then_the_most_common_word() -> None:
    vocabulary = Vocabulary()
    for _ in range(3):
        vocabulary.add({"gemini"})
    vocabulary.add({"gemina"})
    vocabulary.add({"capsule"})
    assert vocabulary.suggest("gemni") == "gemini"  # one edit from both: the commoner wins
    assert vocabulary.suggest("capsle") == "capsule"
    assert vocabulary.suggest("kapsule") is None  # the first letter is never corrected
    assert vocabulary.suggest("zzzzz") is None
    assert vocabulary.suggest("gemini") == "gemina"  # known words are the caller's check
    assert vocabulary.suggest("x" * 40) is None


def test_short_words_allow_one_edit_long_words_two() -> None:
    vocabulary = Vocabulary()
    vocabulary.add({"cats", "recipes"})
    assert vocabulary.suggest("cts") == "cats"
    assert vocabulary.suggest("czts") == "cats"
    assert vocabulary.suggest("cxzs") is None
    assert vocabulary.suggest("recpies") == "recipes"  # a transposition and more


def test_round_trip_and_merge(tmp_path: Path) -> None:
    vocabulary = Vocabulary()
    vocabulary.add({"alpha", "beta"})
    vocabulary.save(tmp_path)
    loaded = Vocabulary.load(tmp_path)
    assert loaded.counts == vocabulary.counts
    loaded.merge(vocabulary.counts)
    assert loaded.counts["alpha"] == 2
    assert len(Vocabulary.load(tmp_path / "missing")) == 0
    assert Vocabulary().suggest("anything") is None
