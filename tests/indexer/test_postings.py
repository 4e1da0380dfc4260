"""Posting blocks read in place give what Whoosh's own matcher reads, whole or in part."""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy
import pytest
from whoosh import index as whoosh_index
from whoosh import query as wq
from whoosh.fields import ID, TEXT, Schema

from indexer import postings
from indexer.query import WEIGHTING
from indexer.require import Require
from indexer.vector import SPARSE_RATIO, VectorIndex, _intersect
from indexer.writer import BLOCK_POSTINGS, TunedSegmentWriter

PAGES = 4_500
#: "common" is in every page (5 blocks of 1,024), "often" in every third with changing
#: frequencies, "even" in every page with frequency 2 (blocks of one equal weight), "w77" in
#: one page, "solo" in one page three times.
WORDS = ("common", "often", "even", "w77", "solo")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    directory = tmp_path_factory.mktemp("postings")
    ix = whoosh_index.create_in(str(directory), Schema(pid=ID(stored=True), body=TEXT))
    writer = TunedSegmentWriter(ix, limitmb=16)
    for i in range(PAGES):
        often = " often" * (1 + i % 5) if i % 3 == 0 else ""
        solo = " solo solo solo" if i == 1000 else ""
        writer.add_document(pid=str(i), body=f"common even even w{i}{often}{solo}")
    writer.commit()
    with ix.searcher() as searcher:
        yield searcher


def _leaf(searcher: Any) -> Any:
    (leaf, _), *_ = searcher.reader().leaf_readers()
    return leaf


def _whooshs(leaf: Any, word: str) -> list[tuple[int, float]]:
    matcher = leaf.postings("body", word)
    found: list[tuple[int, float]] = []
    while matcher.is_active():
        found.append((matcher.id(), matcher.weight()))
        matcher.next()
    return found


@pytest.mark.parametrize("word", WORDS)
def test_postings_decode_as_whooshs_matcher_reads_them(index: Any, word: str) -> None:
    leaf = _leaf(index)
    info = leaf.term_info("body", word.encode())
    decoded, blocks = postings.decode(leaf, "body", word.encode(), info)
    expected = _whooshs(leaf, word)
    assert list(zip(decoded.ids.tolist(), decoded.weights.tolist(), strict=True)) == expected
    assert decoded.ids.dtype == numpy.int64
    assert decoded.weights.dtype == numpy.float64
    if info.is_inlined():  # one posting, kept in the term table (with its weight: 3 for solo)
        assert blocks is None
        return
    assert blocks is not None
    assert len(blocks) == -(-len(expected) // BLOCK_POSTINGS)
    assert blocks.last_ids.tolist()[-1] == expected[-1][0]
    headers_only = postings.directory(leaf, info)
    assert headers_only is not None
    assert headers_only.starts.tolist() == blocks.starts.tolist()
    assert headers_only.last_ids.tolist() == blocks.last_ids.tolist()


@pytest.mark.parametrize("word", ["common", "often", "even"])
@pytest.mark.parametrize("asked", [0, 1, 7, 300, PAGES])
def test_postings_read_in_part_are_those_of_the_documents_asked(
    index: Any, word: str, asked: int
) -> None:
    leaf = _leaf(index)
    info = leaf.term_info("body", word.encode())
    blocks = postings.directory(leaf, info)
    assert blocks is not None
    rng = numpy.random.default_rng(asked)
    wanted = numpy.sort(rng.choice(PAGES + 50, size=asked, replace=False)).astype(numpy.int64)
    read = postings.read_at(leaf, blocks, wanted)
    expected = [
        (docnum, weight)
        for docnum, weight in _whooshs(leaf, word)
        if docnum in set(wanted.tolist())
    ]
    assert list(zip(read.ids.tolist(), read.weights.tolist(), strict=True)) == expected


def test_a_block_info_pickled_another_way_is_still_found(tmp_path: Path) -> None:
    """The data of a block starts where its info's pickle stops: found by pickling the info
    again, and when that pickle would differ (another protocol), by reading it again."""
    header = (3, 9, 2.0, 0, 1, 1)
    data = pickle.dumps((bytes([2, 3, 4]), None, None), pickle.HIGHEST_PROTOCOL)
    for protocol in (2, 4):
        info = pickle.dumps(header, protocol)
        block = len(info + data).to_bytes(4, "big", signed=True) + info + data
        start = postings._data_start(block, 0, header, len(block))
        assert block[start:] == data
        stream = io.BytesIO(block[4:])
        pickle.load(stream)
        assert start == 4 + stream.tell()


def test_scores_at_a_few_documents_are_those_of_the_whole_term(index: Any) -> None:
    """A common term scored at a few documents in one of its blocks is read in part, and
    scores the same, to the bit, as when its postings were loaded whole."""
    asked = numpy.asarray([5, 7, 300, 1000, 1010, 1020], dtype=numpy.int64)  # block 0
    pairs = [("body", word, 1.5) for word in WORDS]
    sparse = VectorIndex(index, WEIGHTING)
    whole = VectorIndex(index, WEIGHTING)
    for word in WORDS:
        whole._term("body", word, 1.0)  # cached: read from the cache, not in part
    assert PAGES >= SPARSE_RATIO * len(asked)
    got = sparse.scores_at(asked, pairs)
    assert got.tolist() == whole.scores_at(asked, pairs).tolist()
    assert min(got[3], got[2]) > got[1] > 0  # 1000 has "solo", 300 "often", 7 neither
    # The common words were read in part: their postings are not cached, their directories are.
    assert ("body", b"common", True) not in sparse._cache
    assert any(key[2] == b"common" for key in sparse._sparse_directories)
    assert sparse._directory_blocks == sum(len(d) for d in sparse._sparse_directories.values())


def test_terms_whose_blocks_are_mostly_asked_for_are_read_whole(index: Any) -> None:
    """Documents spread over most of a term's blocks: reading it whole costs as much and is
    cached for the next query, so it is read whole."""
    asked = numpy.asarray([5, 1100, 2200, 3300, 4400], dtype=numpy.int64)  # 5 of 5 blocks
    sparse = VectorIndex(index, WEIGHTING)
    got = sparse.scores_at(asked, [("body", "common", 1.0)])
    assert ("body", b"common", True) in sparse._cache
    whole = VectorIndex(index, WEIGHTING)
    whole._term("body", "common", 1.0)
    assert got.tolist() == whole.scores_at(asked, [("body", "common", 1.0)]).tolist()


@pytest.mark.parametrize(
    "text",
    ["common w1000", "w1000 common even", "even often", "often solo common", "nothing common"],
)
def test_ands_read_common_words_in_part_and_find_what_whole_reads_find(
    index: Any, text: str
) -> None:
    """An AND evaluates its parts smallest first, each where the ones before matched: the
    same documents and scores as every part read whole and intersected."""
    words = text.split()
    query = wq.And([wq.Term("body", word) for word in words])
    got = VectorIndex(index, WEIGHTING).evaluate(query)
    whole = VectorIndex(index, WEIGHTING)
    expected = whole._term("body", words[0], 1.0)
    for word in words[1:]:
        expected = _intersect(expected, whole._term("body", word, 1.0), PAGES)
    assert got.ids.tolist() == expected.ids.tolist()
    assert got.scores.tolist() == pytest.approx(expected.scores.tolist(), rel=1e-12)


def test_a_filter_much_smaller_than_its_scored_part_is_evaluated_first(index: Any) -> None:
    """ "site:host the": the filter's few pages first, the common word read in their block."""
    index_ = VectorIndex(index, WEIGHTING)
    query = Require(wq.Term("body", "common"), wq.Term("body", "w1000"))
    got = index_.evaluate(query)
    assert got.ids.tolist() == [1000]
    assert got.scores.tolist() == index_.scores_at(got.ids, [("body", "common", 1.0)]).tolist()
    assert ("body", b"common", True) not in index_._cache  # read in part, not whole


def test_block_directories_kept_are_bounded(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capsule meets endless distinct words: the directories kept for reading terms in
    part stay within their bound, least recently used dropped first."""
    monkeypatch.setattr("indexer.vector.DIRECTORY_BLOCKS", 6)
    sparse = VectorIndex(index, WEIGHTING)
    asked = numpy.asarray([5, 6, 300], dtype=numpy.int64)
    expected = VectorIndex(index, WEIGHTING).scores_at(asked, [("body", "even", 1.0)])
    for word in ("common", "even", "often", "common"):
        sparse.scores_at(asked, [("body", word, 1.0)])
        assert sparse._directory_blocks <= 6 or len(sparse._sparse_directories) == 1
        assert sparse._directory_blocks == sum(len(d) for d in sparse._sparse_directories.values())
    assert [key[2] for key in sparse._sparse_directories] == [b"common"]
    assert sparse.scores_at(asked, [("body", "even", 1.0)]).tolist() == expected.tolist()


def test_term_table_entries_kept_are_bounded(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Term-table entries are kept for the next lookup, never more than the bound."""
    monkeypatch.setattr("indexer.vector.TERM_INFOS", 3)
    kept = VectorIndex(index, WEIGHTING)
    fresh = VectorIndex(index, WEIGHTING)
    for word in ("common", "often", "even", "w77", "solo", "common", "nothing"):
        query = wq.Term("body", word)
        assert kept.evaluate(query).ids.tolist() == fresh.evaluate(query).ids.tolist()
        assert len(kept._infos) <= 3
    (segments, frequency), (expected, expected_frequency) = (
        index_._term_infos("body", b"often") for index_ in (kept, fresh)
    )
    assert frequency == expected_frequency == PAGES // 3
    assert [info.extent() for *_, info in segments] == [info.extent() for *_, info in expected]


def test_terms_read_in_part_leave_out_deleted_pages(tmp_path: Path) -> None:
    """A page deleted from the index is not found by reading a term in part, even when the
    documents asked about include it (as they do not, coming from other terms' postings)."""
    ix = whoosh_index.create_in(str(tmp_path), Schema(pid=ID(stored=True, unique=True), body=TEXT))
    writer = TunedSegmentWriter(ix, limitmb=16)
    for i in range(PAGES):
        writer.add_document(pid=str(i), body=f"common w{i}")
    writer.commit()
    deleting = ix.writer()
    deleting.delete_by_term("pid", "10")
    deleting.commit(optimize=False)
    with ix.searcher() as searcher:
        index_ = VectorIndex(searcher, WEIGHTING)
        asked = numpy.asarray([9, 10, 11], dtype=numpy.int64)
        found = index_._partial("body", "common", asked)
        assert found is not None  # read in part: 3 pages in one of 5 blocks
        assert found.ids.tolist() == [9, 11]
        assert index_._term("body", "common", 1.0).ids[:3].tolist() == [0, 1, 2]
        assert 10 not in index_._term("body", "common", 1.0).ids.tolist()
