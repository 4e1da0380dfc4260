"""`sextant graph` end to end on a real SQLite store: stats, census, export, plot."""

from __future__ import annotations

import importlib.util
import io
import json
import sys

import networkx as nx
import pytest
from click.testing import CliRunner

from sextant.cli import cli
from tests.graph.conftest import LEFT_OUT, PAGES, expected_page_graph, write_robots

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run(sqlite_graph_store, tmp_path):
    url = f"sqlite:///{tmp_path / 'graph.db'}"

    def invoke(*args):
        return CliRunner().invoke(cli, ["--db-url", url, "graph", *args])

    return invoke


def test_stats_text(run):
    result = run("stats", "--quiet")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Pages              7  ok 5, new 1, redirect 1" in out
    assert "Links             11  within capsules 5, across capsules 5, other schemes 1" in out
    assert "reachable from the seeds (1 pages): 6 pages (85.7%)" in out
    assert "the largest has 4 pages (57.1%)" in out
    assert "1. gemini://alpha.test/  inbound 3, PageRank 0.29" in out
    assert "Capsules no other capsule links to: 1\n  delta.test:1966" in out
    # A control character in a title never reaches the terminal.
    assert "\x01" not in out


def test_stats_json(run):
    result = run("stats", "--json", "--top", "2")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["census"]["pages"] == len(PAGES)
    assert data["census"]["links_by_scheme"] == {"gemini": 10, "https": 1}
    assert data["graph"]["links"] == 9
    assert data["graph"]["largest_component_pages"] == 4
    assert len(data["graph"]["top_pages_by_pagerank"]) == 2
    assert data["graph"]["capsules_without_inbound"] == ["delta.test:1966"]


def test_census_json_and_text(run):
    result = run("census", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["mime_types"] == {"text/gemini": 4, "text/plain": 1}
    text = run("census")
    assert text.exit_code == 0
    assert "text/gemini" in text.output
    assert "Certificates 0" in text.output


def test_export_graphml_to_file(run, tmp_path):
    target = tmp_path / "pages.graphml"
    result = run("export", "--format", "graphml", "--output", str(target))
    assert result.exit_code == 0, result.output
    graph = nx.read_graphml(target)
    labels = nx.get_node_attributes(graph, "label")
    edges = {(labels[s], labels[t]) for s, t in graph.edges}
    assert edges == set(expected_page_graph().edges)
    assert not (tmp_path / "pages.graphml.partial").exists()
    assert f"wrote {len(PAGES)} nodes" in result.output  # the summary goes to stderr


def test_export_capsule_jsonl_to_stdout(run):
    result = run("export", "--level", "capsule", "--format", "jsonl")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in io.StringIO(result.stdout)]
    assert {r["label"] for r in records if r["type"] == "node"} == {
        "alpha.test",
        "beta.test",
        "gamma.test",
        "delta.test:1966",
    }


def test_export_csv_needs_a_table(run):
    result = run("export", "--format", "csv")
    assert result.exit_code == 2
    assert "--table nodes or --table edges" in result.output
    assert run("export", "--format", "gexf", "--table", "edges").exit_code == 2


def test_export_to_a_missing_directory_is_a_clear_error(run, tmp_path):
    result = run("export", "--output", str(tmp_path / "no" / "such" / "file.graphml"))
    assert result.exit_code == 1
    assert result.output.startswith("Error: cannot write")


def test_failed_export_keeps_the_previous_file(run, tmp_path, monkeypatch):
    target = tmp_path / "pages.jsonl"
    target.write_text("previous\n")
    from sextant.graph import export as export_module

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(export_module, "write_graph", broken)
    result = run("export", "--format", "jsonl", "--output", str(target))
    assert result.exit_code != 0
    assert target.read_text() == "previous\n"
    assert not (tmp_path / "pages.jsonl.partial").exists()


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib (the plot extra) is not installed")
def test_plot_writes_png_charts(run, tmp_path):
    out_dir = tmp_path / "charts"
    result = run("plot", "--output", str(out_dir), "--quiet")
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out_dir.iterdir())
    assert names == sorted(
        [
            "degree-distribution.png",
            "top-capsules.png",
            "mime-types.png",
            "languages.png",
            "status-families.png",
            "page-sizes.png",
        ]
    )
    for path in out_dir.iterdir():
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        assert len(data) > 5000
    assert result.output.split() == [
        str(out_dir / name)
        for name in result.output.split() and [p.split("/")[-1] for p in result.output.split()]
    ]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib (the plot extra) is not installed")
def test_plot_on_an_empty_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = CliRunner().invoke(cli, ["--db-url", url, "graph", "plot", "-o", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "c").glob("*.png"))) == 6


def test_plot_into_a_file_is_refused(run, tmp_path):
    if not HAS_MATPLOTLIB:
        pytest.skip("matplotlib (the plot extra) is not installed")
    target = tmp_path / "file.png"
    target.write_bytes(b"x")
    result = run("plot", "--output", str(target))
    assert result.exit_code != 0
    assert target.read_bytes() == b"x"


def test_plot_without_matplotlib_says_how_to_install(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    result = run("plot", "--output", str(tmp_path / "charts"))
    assert result.exit_code == 1
    assert "pip install 'sextant-search[plot]'" in result.output
    assert not (tmp_path / "charts").exists()


def test_stats_census_and_export_say_what_robots_txt_left_out(run, sqlite_graph_store):
    write_robots(sqlite_graph_store)
    shown = len(PAGES) - len(LEFT_OUT)
    note = "left out because robots.txt disallows researcher: 3 pages; whole capsules: 1"
    stats = run("stats", "--quiet")
    assert stats.exit_code == 0, stats.output
    assert stats.output.count(note) == 2  # the census's and the link graph's
    assert f"Pages              {shown}" in stats.output
    data = json.loads(run("stats", "--json").stdout)
    assert (data["census"]["pages_left_out"], data["graph"]["pages_left_out"]) == (3, 3)
    assert (data["census"]["capsules_left_out"], data["graph"]["capsules_left_out"]) == (1, 1)
    census = json.loads(run("census", "--json").stdout)
    assert (census["pages"], census["pages_left_out"]) == (shown, 3)

    export = run("export", "--format", "jsonl")
    assert export.exit_code == 0, export.output
    records = [json.loads(line) for line in io.StringIO(export.stdout)]
    labels = {r["label"] for r in records if r["type"] == "node"}
    assert labels == set(PAGES) - LEFT_OUT
    assert "robots.txt disallows researcher: 3 pages (whole capsules: 1)" in export.stderr
    quiet = run("export", "--format", "jsonl", "--quiet")
    assert quiet.stderr == ""
