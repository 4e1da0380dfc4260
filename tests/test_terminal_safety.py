"""No command prints a capsule's terminal commands: search, show, graph, census, errors.

A real SQLite store holding the hostile capsule of ``tests/hostile_space.py``, a real index
built from it, and every command run through click as a user would run it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from indexer.build import run_index
from indexer.cli import _print_results
from indexer.query import Searcher
from sextant.cli import cli
from sextant.config import Settings
from sextant.store.migrate import open_store
from tests import hostile_space
from tests.hostile_space import EVIL, HOSTILE, WORD, unsafe_characters

# What must remain of HOSTILE: every word, in the order the author stored it.
SHOWN = "clear\ufffd[2J osc\ufffd]8;;http://x.example/\ufffd\\click\ufffd]8;;\ufffd\\ bell\ufffd"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    directory = tmp_path_factory.mktemp("hostile")
    settings = Settings.load(data_dir=directory, db_url=f"sqlite:///{directory / 'sextant.db'}")
    engine = open_store(settings.db_url)
    hostile_space.populate(engine)
    engine.dispose()
    run_index(settings.index_dir, settings.db_url, procs=1)
    return settings


def run(settings: Settings, *args: str) -> str:
    result = CliRunner().invoke(
        cli, ["--data-dir", str(settings.data_dir), "--db-url", settings.db_url, *args]
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_search_prints_the_words_of_a_hostile_title_and_snippet_but_no_commands(settings):
    out = run(settings, "search", WORD)
    assert unsafe_characters(out) == []
    assert f"1. Sourdough {SHOWN} csi\ufffd31m flipevilisolated tail" in out
    assert "flipevilisolated" in out.split("\n")[2]  # the snippet line


def test_search_in_colour_styles_only_clean_text(settings):
    searcher = Searcher(settings.index_dir, settings.db_url)
    try:
        results = searcher.search(WORD)
    finally:
        searcher.close()
    runner = CliRunner()
    with runner.isolation(color=True) as (out, _err, _both):
        _print_results(results, color=True)
    printed = out.getvalue().decode("utf-8")
    assert "\x1b[1m" in printed  # the bold we add ourselves...
    ours_removed = printed.replace("\x1b[1m", "").replace("\x1b[0m", "")
    assert unsafe_characters(ours_removed) == []  # ...is the only escape there is


def test_search_json_escapes_the_controls_and_keeps_the_data(settings):
    out = run(settings, "search", "--json", WORD)
    assert unsafe_characters(out.rstrip("\n")) == []
    hit = json.loads(out)["results"][0]
    assert hit["title"] == f"Sourdough {HOSTILE}"


def test_show_prints_a_hostile_page_and_its_links_safely(settings):
    out = run(settings, "show", EVIL)
    assert unsafe_characters(out) == []
    assert f"title           Sourdough {SHOWN}" in out
    assert f"=> gemini://friend.example/ {SHOWN}" in out
    as_json = run(settings, "show", "--json", EVIL)
    assert unsafe_characters(as_json.rstrip("\n")) == []
    assert json.loads(as_json)["links"][0]["label"] == HOSTILE


@pytest.mark.parametrize(
    "args",
    [("graph", "stats", "--quiet"), ("graph", "census"), ("graph", "stats", "--json")],
)
def test_graph_statistics_and_census_show_hostile_titles_and_labels_safely(settings, args):
    out = run(settings, *args)
    assert unsafe_characters(out) == []
    if "--json" in args:
        ranked = json.loads(out)["graph"]["top_pages_by_inbound"]
        assert f"Sourdough {HOSTILE}" in [entry["title"] for entry in ranked]
    else:
        assert "utf-8clear\ufffd[2J" in out  # the charset, in the census
    if args[1] == "stats":
        assert "Sourdough clear" in out


def test_a_json_lines_export_to_the_terminal_escapes_the_controls(settings):
    out = run(settings, "graph", "export", "--format", "jsonl", "--quiet")
    assert unsafe_characters(out) == []
    titles = [json.loads(line).get("title") for line in out.splitlines()]
    assert f"Sourdough {HOSTILE}" in titles


def test_an_error_message_prints_no_control_character(tmp_path: Path, monkeypatch):
    # Error messages quote file names and what capsules sent; a downloaded exclude file
    # can be named anything at all.
    monkeypatch.chdir(tmp_path)  # no seeds.txt: nothing would be crawled anyway
    rules = tmp_path / "rules\x1b[2J\u202e\x9b.txt"
    rules.write_bytes(b"\xff\xfe not UTF-8")
    result = CliRunner().invoke(
        cli, ["--data-dir", str(tmp_path), "crawl", "--quiet", "--exclude", str(rules)]
    )
    assert result.exit_code == 1
    assert "rules\ufffd[2J\ufffd.txt is not UTF-8 text" in result.output
    assert unsafe_characters(result.output) == []
