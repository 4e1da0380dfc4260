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


def junk(document: int, count: int) -> set[str]:
    """Distinct made-up words, as a page of random tokens writes them."""
    return {f"zq{document}x{n}" for n in range(count)}


def test_a_flood_of_junk_words_is_bounded_and_the_common_words_survive() -> None:
    vocabulary = Vocabulary(max_words=100)
    for document in range(60):
        vocabulary.add({"gemini", "capsule", *junk(document, 40)})
        held = len(vocabulary._counts) + len(vocabulary._raw)
        assert held <= 3 * 100, f"{held} words held after {document + 1} documents"
    counts = vocabulary.counts
    assert len(counts) <= 2 * 100  # 2,400 distinct junk words were written
    assert counts["gemini"] == counts["capsule"] == 60  # exact: never among the rarest
    assert vocabulary.suggest("gemni") == "gemini"


def test_saving_keeps_the_commonest_words_and_loading_an_unbounded_file_trims_it(
    tmp_path: Path,
) -> None:
    vocabulary = Vocabulary(max_words=50)
    for document in range(30):
        vocabulary.add({"gemini", *junk(document, 3)})
    vocabulary.add({"capsule"})
    vocabulary.add({"capsule"})
    vocabulary.save(tmp_path)
    lines = (tmp_path / "vocabulary.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 50
    assert lines == sorted(lines)  # alphabetical, as before
    saved = dict(line.split("\t") for line in lines)
    assert saved["gemini"] == "30"
    assert saved["capsule"] == "2"  # the rest are words of one document each

    # A file written before the bound: 5,000 words, the common ones last.
    big = [f"zz{n:05d}\t1" for n in range(5000)] + ["zzzcommon\t900", "zzzusual\t40"]
    (tmp_path / "vocabulary.tsv").write_text("\n".join(big) + "\n", encoding="utf-8")
    loaded = Vocabulary.load(tmp_path, max_words=50)
    assert len(loaded) == 50
    assert loaded.counts["zzzcommon"] == 900
    assert loaded.counts["zzzusual"] == 40
