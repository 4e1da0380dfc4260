"""The tuned segment writer's own ``add_document`` writes what Whoosh's would."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

from whoosh import index as whoosh_index
from whoosh.filedb.filestore import FileStorage
from whoosh.writing import SegmentWriter

from indexer.analysis import TermSequence, analyze_parts
from indexer.pool import _flatten
from indexer.schema import build_schema
from indexer.writer import TunedSegmentWriter, _CountingFile
from tests.indexer.conftest import every_posting

DOCUMENTS: list[dict[str, Any]] = [
    {
        "pid": f"{n}",
        "url": f"gemini://host{n % 3}.example/page{n}",
        "text": ("en", f"the quick brown fox {n} jumps over the lazy dog the end " * (n % 4 + 1)),
        "title": ("en", f"Fox page {n} fox"),
        "headings": ("de", "Die Hunde laufen schnell"),
        "host": f"host{n % 3}.example",
        "domain": [f"host{n % 3}.example", "example"],
        "key": n,
        "_title_boost": 2.0 if n % 2 else 1.0,
    }
    for n in range(40)
] + [
    # Analyzed as term sequences, as the document builder hands the text fields over: the
    # pool takes these as columns (LangText.columns), Whoosh's path as tuples.
    {
        "pid": f"s{n}",
        "url": f"gemini://seq{n % 2}.example/{n}",
        "text": analyze_parts("en", [(f"running dogs {n} ran over the running dog", True)], 100),
        "anchors": analyze_parts(None, [(f"link {n % 3} link", False)], 100),
        "_text_boost": 1.5 if n % 3 == 0 else 1.0,
    }
    for n in range(12)
]


def _build(directory: Path, whoosh_path: bool) -> dict[str, Any]:
    directory.mkdir()
    ix = whoosh_index.create_in(str(directory), build_schema())
    writer = TunedSegmentWriter(ix, limitmb=1)
    for document in DOCUMENTS:
        if whoosh_path:
            SegmentWriter.add_document(writer, **document)  # one pool.add per posting
        else:
            writer.add_document(**document)
    writer.commit()
    postings = every_posting(ix)
    with ix.reader() as reader:
        lengths = {
            (field, docnum): reader.doc_field_length(docnum, field)
            for field in ("text", "title", "headings")
            for docnum in range(reader.doc_count_all())
        }
        stored = list(reader.all_stored_fields())
        keys = list(reader.column_reader("key"))
    return {"postings": postings, "lengths": lengths, "stored": stored, "keys": keys}


def test_bulk_add_document_writes_the_same_index_as_whooshs(tmp_path: Path) -> None:
    ours = _build(tmp_path / "ours", whoosh_path=False)
    theirs = _build(tmp_path / "whoosh", whoosh_path=True)
    assert len(ours["postings"]) > 50
    assert any(weight == 4.0 for _, _, listed in ours["postings"] for _, weight, _ in listed)
    assert ours == theirs
    assert any(isinstance(document.get("text"), TermSequence) for document in DOCUMENTS)
    boosted = [
        weight
        for field, _, listed in ours["postings"]
        if field == "text"
        for _, weight, _ in listed
        if weight % 1
    ]
    assert boosted  # a boosted term sequence went through the columns path


def test_text_postings_keep_frequencies_as_weights_without_values(tmp_path: Path) -> None:
    # Whoosh's Frequency format wrote each frequency again as a 4-byte value: 15% of the
    # index on 20,000 pages. The weights alone must still say how often a word occurs.
    directory = tmp_path / "index"
    directory.mkdir()
    ix = whoosh_index.create_in(str(directory), build_schema())
    writer = TunedSegmentWriter(ix, limitmb=1)
    writer.add_document(pid="1", url="gemini://a.example/", text=("en", "fox fox fox dog"))
    writer.commit()
    with ix.reader() as reader:
        for field, term, frequency in (("text", b"fox", 3.0), ("text", b"dog", 1.0)):
            matcher = reader.postings(field, term)
            assert (matcher.weight(), matcher.value()) == (frequency, None)
        assert reader.frequency("text", b"fox") == 3.0


def test_term_length_bounds_match_whooshs_own_writer(tmp_path: Path) -> None:
    """The length table the tuned writer reads once per field (``_Lengths``) gives each term
    the same shortest and longest document lengths as Whoosh's per-posting lookups, which
    the block-max scoring of searches relies on."""
    from indexer.writer import codec

    def bounds(directory: Path, tuned: bool) -> dict[tuple[str, bytes], tuple[int, int]]:
        directory.mkdir()
        ix = whoosh_index.create_in(str(directory), build_schema())
        writer = TunedSegmentWriter(ix, limitmb=1) if tuned else SegmentWriter(ix, codec=codec())
        for document in DOCUMENTS:
            writer.add_document(**document)
        writer.commit()
        with ix.reader() as reader:
            return {
                (field, term): (
                    reader.term_info(field, term).min_length(),
                    reader.term_info(field, term).max_length(),
                )
                for field, term in reader.all_terms()
                if field in ("text", "title", "headings")
            }

    ours = bounds(tmp_path / "ours", tuned=True)
    theirs = bounds(tmp_path / "whoosh", tuned=False)
    assert len(ours) > 20
    assert any(longest > 20 for _, longest in ours.values())
    assert ours == theirs


def _segment_files(directory: Path, per_posting: bool, monkeypatch: Any) -> dict[str, bytes]:
    """The postings and term-table files of one segment of :data:`DOCUMENTS` (plus a term
    in more than two blocks), flushed a term at a time (blocks of 8 or more postings taken
    with numpy) or through Whoosh's field writer and postings writer a posting at a time (no
    numpy)."""
    from indexer import writer as writer_module

    monkeypatch.setattr(writer_module, "NUMPY_POSTINGS", 10**9 if per_posting else 8)
    if per_posting:

        def whooshs(fieldwriter: Any, schema: Any, lengths: Any, terms: Any) -> None:
            fieldwriter.add_postings(schema, lengths, _flatten(terms))

        monkeypatch.setattr(writer_module, "_write_terms", whooshs)
    monkeypatch.setattr(writer_module, "BLOCK_POSTINGS", 16)
    directory.mkdir()
    ix = whoosh_index.create_in(str(directory), build_schema())
    writer = TunedSegmentWriter(ix, limitmb=1)
    writer.compound = False  # the segment's files on their own, to compare
    for document in [*DOCUMENTS, *DOCUMENTS]:
        writer.add_document(**document)
    writer.commit()
    return {
        path.suffix: path.read_bytes()
        for path in directory.iterdir()
        if path.suffix in (".pst", ".trm")
    }


def test_term_at_a_time_flush_writes_the_bytes_whoosh_writes(
    tmp_path: Path, monkeypatch: Any
) -> None:
    ours = _segment_files(tmp_path / "ours", per_posting=False, monkeypatch=monkeypatch)
    with monkeypatch.context() as patched:
        theirs = _segment_files(tmp_path / "whoosh", per_posting=True, monkeypatch=patched)
    assert set(ours) == {".pst", ".trm"}
    assert len(ours[".pst"]) > 10_000
    assert ours == theirs


def test_counting_file_keeps_the_position_the_file_itself_reports(tmp_path: Path) -> None:
    made = FileStorage(str(tmp_path)).create_file("positions")
    counted = _CountingFile(made)
    counted.write(b"header")
    seen = [(counted.tell(), counted.file.tell())]
    counted.write_int(7)
    counted.write_varint(300)
    counted.write_array(array("I", range(10)))  # written by the array itself, not write()
    seen.append((counted.tell(), counted.file.tell()))
    counted.seek(3)
    counted.write(b"xy")
    seen.append((counted.tell(), counted.file.tell()))
    counted.seek(0, 2)
    seen.append((counted.tell(), counted.file.tell()))
    assert seen == [(6, 6), (52, 52), (5, 5), (52, 52)]
    counted.close()
    assert (tmp_path / "positions").read_bytes()[:6] == b"heaxyr"
