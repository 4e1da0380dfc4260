"""Navigational queries rank a capsule's start page first; a start page's copies fold into
its shortest address."""

from __future__ import annotations

from pathlib import Path

from indexer.navigation import capsule_names, is_start_page
from indexer.querylang import capsule_names_in, parse
from tests.indexer.conftest import indexed
from tests.indexer.spaces import P

HOME = "# Notes from the garden\nWelcome. My posts are below.\n=> /posts/seeds.gmi Seeds\n"
PAGES = {
    "gemini://gemlog.example/": P(HOME),
    "gemini://gemlog.example/index.gmi": P(HOME),
    "gemini://gemlog.example/posts/seeds.gmi": P("# Seeds\nSeeds for the gemlog garden."),
    "gemini://other.example/": P(
        "# Other\nA gemlog about gemlogs: gemlog gemlog gemlog, every gemlog I read.\n"
        "=> gemini://gemlog.example/index.gmi My favourite\n"
        "=> gemini://gemlog.example/index.gmi The garden notes\n"
    ),
    "gemini://third.example/": P("# Third\n=> gemini://gemlog.example/index.gmi garden\n"),
}


def test_start_pages_answer_to_their_names() -> None:
    assert all(is_start_page(path) for path in ("/", "", "/index.gmi"))
    assert not is_start_page("/posts/index.gmi")
    assert capsule_names("gemlog.example", "Notes from the garden") == [
        "gemlog",
        "gemlog.example",
        "notes from the garden",
    ]
    assert capsule_names("a.b.example", None) == ["a", "a.b", "a.b.example"]


def test_queries_name_capsules_only_as_a_whole_or_by_host() -> None:
    named = capsule_names_in(parse("gemlog"))
    assert (named.names, named.standalone) == (("gemlog",), ("gemlog",))
    named = capsule_names_in(parse("gemini://Files.example/ lighthouse"))
    assert named.names == ("files.example", "gemini files example lighthouse")
    assert named.standalone == ("gemini files example lighthouse",)
    named = capsule_names_in(parse("files.example site:files.example"))
    assert (named.names, named.standalone) == (("files.example",), ())
    assert capsule_names_in(parse("gemini://x.example/deep/page.gmi")).names == (
        "gemini x example deep page gmi",
    )
    assert capsule_names_in(parse("(a OR b)")).names == ()


def test_a_capsule_name_ranks_its_start_page_first_and_copies_fold(tmp_path: Path) -> None:
    with indexed(tmp_path, PAGES) as searcher:
        for query in ("gemlog", "gemlog.example", "notes from the garden", "Notes from the garden"):
            hits = searcher.search(query).hits
            assert hits[0].url == "gemini://gemlog.example/", (query, hits)
            assert "gemini://gemlog.example/index.gmi" not in [hit.url for hit in hits]
        # The URL itself finds the start page, though no page holds those words.
        results = searcher.search("gemini://gemlog.example/")
        assert [hit.url for hit in results.hits] == ["gemini://gemlog.example/"]
        assert results.total == 1
        # A filter-only listing folds the copies the same way.
        listed = [hit.url for hit in searcher.search("site:gemlog.example").hits]
        assert "gemini://gemlog.example/" in listed
        assert "gemini://gemlog.example/index.gmi" not in listed
        # Part of a longer query, a capsule's first label is a word like any other.
        assert searcher.search("gemlog gemlogs").hits[0].url == "gemini://other.example/"
        # A name the index does not know changes nothing.
        assert searcher.search("nowhere.example").total == 0
