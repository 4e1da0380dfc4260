"""`sextant index` and `sextant search` from the command line."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from indexer.budget import STOPPED_EARLY
from indexer.cli import _as_json, _print_results
from indexer.query import Hit, SearchResults
from sextant.cli import cli
from sextant.store.migrate import open_store
from tests.indexer.spaces import P, Space


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    engine = open_store(f"sqlite:///{tmp_path / 'sextant.db'}")
    Space(engine).add(
        {
            "gemini://a.example/": P("# Gardening\nTomatoes and beans on the balcony."),
            "gemini://a.example/beans.gmi": P("# Beans\nRunner beans climb.", size=20_000),
            "gemini://b.example/": P("# Bread\nSourdough bread every week."),
        }
    )
    engine.dispose()
    return tmp_path


def run(data_dir: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--data-dir", str(data_dir), *args])
    return result.exit_code, result.output


def test_index_then_search_as_text(data_dir: Path) -> None:
    code, output = run(data_dir, "index")
    assert code == 0, output
    assert "full index: 3 pages indexed" in output
    code, output = run(data_dir, "index")
    # Pages stamped within the watermark's slack (seconds) are looked at again; harmless.
    assert output.startswith("incremental index:")
    assert "3 in the index" in output
    code, output = run(data_dir, "search", "tomatoes")
    assert code == 0, output
    assert "1. Gardening" in output
    assert "gemini://a.example/" in output
    assert "**Tomatoes**" in output
    assert re.search(r"a\.example · \d+ B · en · \d{4}-\d{2}-\d{2}\n", output), output  # dated
    assert "1 result · page 1 of 1" in output


def test_search_json_output(data_dir: Path) -> None:
    run(data_dir, "index")
    code, output = run(data_dir, "search", "--json", "--limit", "1", "beans")
    assert code == 0, output
    data = json.loads(output)
    assert set(data) == {
        "total",
        "exact",
        "partial",
        "page",
        "results",
        "suggestion",
        "corrected_from",
        "seconds",
    }
    assert data["total"] == 2
    assert data["exact"] is True
    assert data["partial"] is False
    assert data["page"] == 1
    assert len(data["results"]) == 1
    first = data["results"][0]
    assert set(first) == {
        "url",
        "title",
        "snippet",
        "host",
        "mime",
        "lang",
        "size",
        "date",
        "score",
    }
    assert first["url"] == "gemini://a.example/beans.gmi"
    assert first["size"] == 20_000
    code, output = run(data_dir, "search", "--json", "--page", "2", "--limit", "1", "beans")
    assert json.loads(output)["results"][0]["url"] == "gemini://a.example/"


def test_search_words_join_and_corrections_answer(data_dir: Path) -> None:
    run(data_dir, "index")
    code, output = run(data_dir, "search", "sourdugh", "bread")
    assert code == 0
    assert output.startswith(
        "Showing results for sourdough bread — search instead for !sourdugh bread\n"
    )
    assert "1. Bread" in output
    code, output = run(data_dir, "search", "--json", "sourdugh")
    data = json.loads(output)
    assert data["corrected_from"] == "sourdugh"
    assert data["total"] == 1
    assert data["suggestion"] is None
    code, output = run(data_dir, "search", "!sourdugh", "bread")
    assert code == 0
    assert "no results" in output
    assert "did you mean: sourdough bread" in output
    code, output = run(data_dir, "search", "--json", "!sourdugh")
    data = json.loads(output)
    assert (data["total"], data["suggestion"], data["corrected_from"]) == (0, "sourdough", None)


def test_excluded_words_need_no_quotes_and_options_work_around_them(data_dir: Path) -> None:
    run(data_dir, "index")
    code, output = run(data_dir, "search", "beans", "-runner")
    assert code == 0, output
    assert "1. Gardening" in output
    assert "1 result · " in output
    code, output = run(data_dir, "search", "--limit", "1", "beans", "-runner", "--json")
    assert code == 0, output
    assert [hit["url"] for hit in json.loads(output)["results"]] == ["gemini://a.example/"]
    code, output = run(data_dir, "search", "--json", "-runner", "beans")
    assert code == 0, output
    assert json.loads(output)["total"] == 1
    code, output = run(data_dir, "search", "--json", "--", "beans", "--limit")
    assert code == 0, output  # after --, even an option's name is a word (here a NOT)
    assert json.loads(output)["total"] == 2


def test_index_json_report(data_dir: Path) -> None:
    code, output = run(data_dir, "index", "--json", "--rebuild")
    assert code == 0, output
    report = json.loads(output)
    assert report["mode"] == "full"
    assert report["documents"] == 3


def test_errors_are_one_line(data_dir: Path, tmp_path: Path) -> None:
    code, output = run(data_dir, "search", "anything")
    assert code == 1
    assert output.strip() == (
        f"Error: no index yet at {data_dir / 'index'}: run `sextant index` "
        "(after `sextant crawl`) to build one"
    )
    run(data_dir, "index")
    code, output = run(data_dir, "search", '"unclosed')
    assert code == 1
    assert output.startswith("Error: unclosed quote")
    assert "Traceback" not in output
    code, output = run(data_dir, "search", "size:>lots")
    assert code == 1
    assert "size: expects" in output


def test_search_budget_too_small_for_anything_is_refused_in_one_line(data_dir: Path) -> None:
    run(data_dir, "index")
    code, output = run(data_dir, "search", "--budget", "0.000000001", "beans OR bread")
    assert code == 1
    assert output.strip() == f"Error: {STOPPED_EARLY}"
    code, output = run(data_dir, "search", "--budget", "0", "beans")
    assert code == 2  # a budget must be positive: click's usage error
    code, output = run(data_dir, "search", "--help")
    assert "--budget SECONDS" in output


def test_partial_results_are_reported_in_text_and_json(capsys: pytest.CaptureFixture) -> None:
    hit = Hit(
        url="gemini://a.example/",
        title="Gardening",
        snippet="Tomatoes and beans",
        host="a.example",
        mime="text/gemini",
        lang="en",
        charset="utf-8",
        size=100,
        score=1.0,
        fetched_at=None,
        inbound=0,
        rank=1.0,
    )
    results = SearchResults(
        query="beans",
        total=1,
        page=1,
        page_size=10,
        hits=(hit,),
        suggestion=None,
        seconds=0.3,
        exact=False,
        partial=True,
        cost=0.26,
    )
    data = _as_json(results)
    assert data["partial"] is True
    assert data["exact"] is False
    _print_results(results, color=False)
    assert capsys.readouterr().out.rstrip().endswith(STOPPED_EARLY)
    _print_results(dataclasses.replace(results, partial=False, exact=True), color=False)
    assert STOPPED_EARLY not in capsys.readouterr().out
