"""Exports read back by networkx (GraphML, GEXF), csv, json and a DOT reader into the same graph."""

from __future__ import annotations

import csv
import io
import json
import re

import networkx as nx
import pytest

from sextant.graph.export import export_graph, export_size
from sextant.graph.formats import FORMATS, GraphStream, write_graph
from sextant.graph.load import load_graph
from tests.graph.conftest import (
    CAPSULES,
    PAGES,
    capsule_label,
    capsule_of,
    expected_capsule_graph,
    expected_page_graph,
)

XML_FORMATS = ("graphml", "gexf")


def _export(store, level, fmt, table="all"):
    out = io.StringIO()
    with store.sessions() as session:
        written = export_graph(session, out, level=level, fmt=fmt, table=table)
    return out.getvalue(), written


def _xml_safe(text):
    return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f]", "\ufffd", text)


def _relabel(graph):
    """Node ids are store ids; compare graphs by label (URL or capsule name) instead."""
    return nx.relabel_nodes(graph, {n: d["label"] for n, d in graph.nodes(data=True)})


def _read(fmt, text):
    if fmt == "graphml":
        return nx.read_graphml(io.BytesIO(text.encode()))
    return nx.read_gexf(io.BytesIO(text.encode()))


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_page_graph_reads_back_into_networkx(graph_store, fmt):
    text, written = _export(graph_store, "page", fmt)
    graph = _relabel(_read(fmt, text))
    expected = expected_page_graph()
    assert isinstance(graph, nx.DiGraph)
    assert not graph.is_multigraph()
    assert set(graph.nodes) == set(expected.nodes)
    assert set(graph.edges) == set(expected.edges)
    for s, t, w in expected.edges(data="weight"):
        assert graph[s][t]["weight"] == w
    assert (written.nodes, written.edges) == (len(PAGES), expected.number_of_edges())

    ranks = nx.pagerank(expected, weight="weight", tol=1e-13, max_iter=1000)
    for url, data in graph.nodes(data=True):
        state, status, mime, title, _ = PAGES[url]
        assert data.get("title") == (_xml_safe(title) if title is not None else None)
        assert data["capsule"] == capsule_label(capsule_of(url))
        assert data["state"] == state
        assert data.get("status") == status
        assert data.get("mime") == mime
        assert data["inbound"] == expected.in_degree(url, weight="weight")
        assert data["pagerank"] == pytest.approx(ranks[url], abs=1e-9)
        assert isinstance(data["inbound"], int)


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_capsule_graph_reads_back_into_networkx(sqlite_graph_store, fmt):
    text, written = _export(sqlite_graph_store, "capsule", fmt)
    graph = _relabel(_read(fmt, text))
    expected = nx.relabel_nodes(expected_capsule_graph(), capsule_label)
    assert set(graph.nodes) == set(expected.nodes)
    assert {(s, t): w for s, t, w in graph.edges(data="weight")} == {
        (s, t): w for s, t, w in expected.edges(data="weight")
    }
    ranks = nx.pagerank(expected, weight="weight", tol=1e-13, max_iter=1000)
    pages_per_capsule = {capsule_label(c): 0 for c in CAPSULES}
    for url in PAGES:
        pages_per_capsule[capsule_label(capsule_of(url))] += 1
    for name, data in graph.nodes(data=True):
        assert data["pages"] == pages_per_capsule[name]
        assert data["inbound"] == expected.in_degree(name, weight="weight")
        assert data["pagerank"] == pytest.approx(ranks[name], abs=1e-9)
    assert written.nodes == len(CAPSULES)


def test_jsonl_keeps_every_character(sqlite_graph_store):
    text, _ = _export(sqlite_graph_store, "page", "jsonl")
    records = [json.loads(line) for line in text.splitlines()]
    nodes = [r for r in records if r["type"] == "node"]
    edges = [r for r in records if r["type"] == "edge"]
    assert records.index(edges[0]) == len(nodes)  # nodes first
    by_id = {n["id"]: n for n in nodes}
    assert {n["label"]: n["title"] for n in nodes} == {url: p[3] for url, p in PAGES.items()}
    got = {(by_id[e["source"]]["label"], by_id[e["target"]]["label"]): e["weight"] for e in edges}
    assert got == {(s, t): w for s, t, w in expected_page_graph().edges(data="weight")}

    only_edges, written = _export(sqlite_graph_store, "page", "jsonl", table="edges")
    assert written.nodes == 0
    assert all(json.loads(line)["type"] == "edge" for line in only_edges.splitlines())


def test_csv_tables(sqlite_graph_store):
    nodes_text, _ = _export(sqlite_graph_store, "page", "csv", table="nodes")
    edges_text, _ = _export(sqlite_graph_store, "page", "csv", table="edges")
    nodes = list(csv.DictReader(io.StringIO(nodes_text)))
    edges = list(csv.DictReader(io.StringIO(edges_text)))
    assert list(nodes[0]) == [
        "id",
        "label",
        "title",
        "capsule",
        "state",
        "status",
        "mime",
        "inbound",
        "pagerank",
    ]
    label = {n["id"]: n["label"] for n in nodes}
    assert {n["label"]: n["title"] or None for n in nodes} == {u: p[3] for u, p in PAGES.items()}
    got = {(label[e["source"]], label[e["target"]]): int(e["weight"]) for e in edges}
    assert got == {(s, t): w for s, t, w in expected_page_graph().edges(data="weight")}
    assert sum(float(n["pagerank"]) for n in nodes) == pytest.approx(1.0)


def _parse_dot(text):
    """A reader for the DOT subset the exporter writes: quoted ids, attribute lists, edges,
    and graph attributes (``comment="..."``), which land in ``graph.graph``."""
    token = re.compile(r'"((?:[^"\\]|\\.)*)"|(->)|([\[\]=,;{}])|(\w+)|(\s+)', re.S)
    tokens = []
    for match in token.finditer(text):
        quoted, arrow, punct, word, _space = match.groups()
        if quoted is not None:
            tokens.append(
                ("str", re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], quoted))
            )
        elif arrow or punct or word:
            tokens.append(("sym", arrow or punct or word))
    assert "".join(m.group(0) for m in token.finditer(text)) == text  # nothing unparsed
    graph = nx.DiGraph()
    i = 3  # digraph "name" {
    assert tokens[:3] == [("sym", "digraph"), tokens[1], ("sym", "{")]
    while tokens[i] != ("sym", "}"):
        first = tokens[i][1]
        i += 1
        if tokens[i] == ("sym", "="):
            graph.graph[first] = tokens[i + 1][1]
            assert tokens[i + 2] == ("sym", ";")
            i += 3
            continue
        target = None
        if tokens[i] == ("sym", "->"):
            target = tokens[i + 1][1]
            i += 2
        attributes = {}
        assert tokens[i] == ("sym", "[")
        i += 1
        while tokens[i] != ("sym", "]"):
            key, eq, value = tokens[i], tokens[i + 1], tokens[i + 2]
            assert eq == ("sym", "=")
            attributes[key[1]] = value[1]
            i += 3
            if tokens[i] == ("sym", ","):
                i += 1
        assert tokens[i + 1] == ("sym", ";")
        i += 2
        if target is None:
            graph.add_node(first, **attributes)
        else:
            graph.add_edge(first, target, weight=int(attributes["weight"]))
    return graph


def test_dot_quotes_hostile_titles(sqlite_graph_store):
    text, _ = _export(sqlite_graph_store, "page", "dot")
    graph = _relabel(_parse_dot(text))
    expected = expected_page_graph()
    assert {(s, t): w for s, t, w in graph.edges(data="weight")} == {
        (s, t): w for s, t, w in expected.edges(data="weight")
    }
    for url, data in graph.nodes(data=True):
        title = PAGES[url][3]
        assert data.get("title") == title
    # One statement per line: a newline in a title must not break a line.
    assert len(text.splitlines()) == 3 + len(PAGES) + expected.number_of_edges()
    assert graph.graph["comment"].startswith("Left out because robots.txt disallows researcher")


def test_trailing_backslash_cannot_escape_the_quote():
    stream = GraphStream(
        name="g",
        node_attributes=(("title", "string"),),
        nodes=iter([("1", "ends in \\", {"title": '\\"'}), ("2", "two", {})]),
        edges=iter([("1", "2", 1)]),
    )
    out = io.StringIO()
    write_graph(stream, out, "dot")
    graph = _parse_dot(out.getvalue())
    assert graph.nodes["1"] == {"label": "ends in \\", "title": '\\"'}
    assert list(graph.edges) == [("1", "2")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_writers_stream(fmt):
    # The output must grow while nodes and edges are still coming, not only at the end.
    out = io.StringIO()
    seen_sizes = []

    def nodes():
        for i in range(3000):
            if i % 1000 == 999:
                seen_sizes.append(len(out.getvalue()))
            yield str(i), f"n{i}", {"x": i}

    def edges():
        for i in range(2999):
            yield str(i), str(i + 1), 1

    stream = GraphStream(name="g", node_attributes=(("x", "int"),), nodes=nodes(), edges=edges())
    written = write_graph(stream, out, fmt, table="nodes" if fmt == "csv" else "all")
    assert seen_sizes[0] > 0
    assert seen_sizes == sorted(seen_sizes)
    assert seen_sizes[-1] > seen_sizes[0]
    assert written.nodes == 3000


@pytest.mark.parametrize(
    ("fmt", "table", "message"),
    [
        ("csv", "all", "one table"),
        ("graphml", "nodes", "whole graph"),
        ("xlsx", "all", "unknown format"),
        ("jsonl", "rows", "unknown table"),
    ],
)
def test_impossible_requests_are_refused(fmt, table, message):
    stream = GraphStream(name="g", node_attributes=(), nodes=iter([]), edges=iter([]))
    with pytest.raises(ValueError, match=message):
        write_graph(stream, io.StringIO(), fmt, table=table)


def test_unknown_level_is_refused(sqlite_graph_store):
    with sqlite_graph_store.sessions() as session, pytest.raises(ValueError, match="level"):
        export_graph(session, io.StringIO(), level="site", fmt="jsonl")


def test_export_size_counts_what_is_written(sqlite_graph_store):
    with sqlite_graph_store.sessions() as session:
        graph = load_graph(session)
    for level in ("page", "capsule"):
        text, written = _export(sqlite_graph_store, level, "jsonl")
        assert export_size(graph, level) == written.nodes + written.edges == len(text.splitlines())
        assert export_size(graph, level, "nodes") == written.nodes


def test_progress_reports_every_item(sqlite_graph_store):
    reported = []
    with sqlite_graph_store.sessions() as session:
        written = export_graph(
            session, io.StringIO(), level="page", fmt="graphml", progress=reported.append
        )
    assert sum(reported) == written.nodes + written.edges
