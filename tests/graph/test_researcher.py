"""robots.txt and the statistical study: what ``researcher`` may not look at stays out.

The small space of ``conftest.py`` gets robots.txt files written into its real store the way
the crawler keeps them (``capsules.robots_*``, ``user_robots``). Expected graphs are the
networkx graphs of the spec with the forbidden pages removed by hand.
"""

from __future__ import annotations

import io

import networkx as nx
import pytest
from sqlalchemy import select

from sextant.graph import researcher
from sextant.graph.export import export_graph
from sextant.graph.load import load_graph
from sextant.graph.researcher import left_out
from sextant.graph.stats import graph_stats
from sextant.robots import RobotsPolicy
from sextant.store import Capsule, Page, UserRobots
from tests.graph.conftest import (
    LEFT_OUT,
    NOW,
    capsule_label,
    capsule_of,
    expected_page_graph,
    write_robots,
)


def allowed_page_graph() -> nx.DiGraph:
    graph = expected_page_graph()
    graph.remove_nodes_from(LEFT_OUT)
    return graph


def test_left_out_judges_every_group_for_researcher(graph_store):
    write_robots(graph_store)
    with graph_store.sessions() as session:
        left = left_out(session)
    urls = {page_id: url for url, page_id in graph_store.page_id.items()}
    assert {urls[int(i)] for i in left.page_ids} == LEFT_OUT
    assert left.capsule_ids.tolist() == [graph_store.capsule_id["gamma.test"]]
    assert (left.pages, left.capsules) == (3, 1)


def test_without_robots_nothing_is_left_out(graph_store):
    with graph_store.sessions() as session:
        left = left_out(session)
    assert (left.pages, left.capsules) == (0, 0)


def test_unreadable_or_unfetched_robots_forbid_nothing(graph_store):
    write_robots(
        graph_store,
        {
            "alpha.test": (44, None),  # the crawler could not read it: no rule known
            "beta.test": (20, None),  # a 2x body that was unreadable
            "gamma.test": (20, "User-agent: archiver\nDisallow: /\n"),  # not addressed to us
        },
    )
    with graph_store.sessions() as session:
        left = left_out(session)
    assert (left.pages, left.capsules) == (0, 0)


def test_a_pubnix_users_own_file_covers_their_directory(graph_store):
    beta = graph_store.capsule_id["beta.test"]
    with graph_store.sessions.begin() as session:
        for path in ("/~ann/drafts/1", "/~ann/notes", "/~bob/drafts/1", "/~ann"):
            session.add(
                Page(
                    url=f"gemini://beta.test{path}",
                    capsule_id=beta,
                    scope="beta.test/~ann",
                    discovered_at=NOW,
                    updated_at=NOW,
                )
            )
        session.add_all(
            [
                UserRobots(
                    capsule_id=beta,
                    user_name="ann",
                    status=20,
                    text="User-agent: researcher\nDisallow: /drafts/\nDisallow: /$\n",
                    fetched_at=NOW,
                ),
                UserRobots(capsule_id=beta, user_name="bob", status=51, fetched_at=NOW),
            ]
        )
    with graph_store.sessions() as session:
        left = left_out(session)
        urls = set(session.scalars(select(Page.url).where(Page.id.in_(left.page_ids.tolist()))))
    # /~ann is her directory's "/", which her "Disallow: /$" closes.
    assert urls == {"gemini://beta.test/~ann/drafts/1", "gemini://beta.test/~ann"}


def test_the_graph_leaves_out_forbidden_pages_and_their_links(graph_store):
    write_robots(graph_store)
    with graph_store.sessions() as session:
        graph = load_graph(session)
    by_id = {page_id: url for url, page_id in graph_store.page_id.items()}
    urls = [by_id[int(i)] for i in graph.page_ids]
    expected = allowed_page_graph()
    assert set(urls) == set(expected.nodes)
    loaded = nx.MultiDiGraph()
    loaded.add_edges_from(
        (urls[s], urls[t]) for s, t in zip(graph.sources, graph.targets, strict=True)
    )
    assert sorted(loaded.edges()) == sorted(
        e for s, t, w in expected.edges(data="weight") for e in [(s, t)] * w
    )
    assert graph_store.capsule_id["gamma.test"] not in graph.capsule_ids.tolist()
    assert graph.capsules == 3


def test_stats_count_what_they_left_out(graph_store):
    write_robots(graph_store)
    with graph_store.sessions() as session:
        stats = graph_stats(session)
    expected = allowed_page_graph()
    assert (stats.pages, stats.capsules) == (expected.number_of_nodes(), 3)
    assert stats.links == sum(w for _, _, w in expected.edges(data="weight"))
    assert (stats.pages_left_out, stats.capsules_left_out) == (3, 1)
    assert stats.as_dict()["pages_left_out"] == 3


@pytest.mark.parametrize("fmt", ["graphml", "gexf"])
def test_exports_leave_out_forbidden_pages_and_say_so(graph_store, fmt):
    write_robots(graph_store)
    out = io.StringIO()
    with graph_store.sessions() as session:
        export_graph(session, out, level="page", fmt=fmt)
    text = out.getvalue()
    read = nx.read_graphml if fmt == "graphml" else nx.read_gexf
    graph = read(io.BytesIO(text.encode()))
    labels = {data["label"] for _, data in graph.nodes(data=True)}
    assert labels == set(allowed_page_graph().nodes)
    assert "robots.txt disallows researcher: 3 pages (whole capsules: 1)" in text


def test_capsule_export_leaves_out_a_closed_capsule(graph_store):
    write_robots(graph_store)
    out = io.StringIO()
    with graph_store.sessions() as session:
        export_graph(session, out, level="capsule", fmt="graphml")
    graph = nx.read_graphml(io.BytesIO(out.getvalue().encode()))
    pages = {data["label"]: data["pages"] for _, data in graph.nodes(data=True)}
    expected = {}
    for url in allowed_page_graph().nodes:
        name = capsule_label(capsule_of(url))
        expected[name] = expected.get(name, 0) + 1
    assert pages == expected
    assert "gamma.test" not in pages


def test_each_robots_txt_is_parsed_once_however_many_pages(graph_store, monkeypatch):
    # More pages than one IN (...) batch holds, all in a capsule with rules for us.
    alpha = graph_store.capsule_id["alpha.test"]
    count = researcher.ID_BATCH * 2 + 7
    with graph_store.sessions.begin() as session:
        session.add_all(
            Page(
                url=f"gemini://alpha.test/{'2' if i % 2 else 'ok'}/{i}",
                capsule_id=alpha,
                scope="alpha.test",
                discovered_at=NOW,
                updated_at=NOW,
            )
            for i in range(count)
        )
    write_robots(graph_store)
    parsed: list[str] = []
    real_parse = RobotsPolicy.parse.__func__

    def counting_parse(cls: type[RobotsPolicy], text: str) -> RobotsPolicy:
        parsed.append(text)
        return real_parse(cls, text)

    monkeypatch.setattr(RobotsPolicy, "parse", classmethod(counting_parse))
    with graph_store.sessions() as session:
        left = left_out(session)
    assert len(parsed) == 3  # alpha, beta, gamma; delta's 51 needs no parsing
    assert left.pages == 3 + count // 2  # every "/2/..." page, across several batches


def test_more_robots_files_than_one_read_holds(graph_store):
    # Files are read a batch at a time to bound memory (each may be 512 KiB); none is lost.
    many = researcher.FILE_BATCH * 2 + 1
    with graph_store.sessions.begin() as session:
        for i in range(many):
            closed = Capsule(
                host=f"closed{i}.test",
                port=1965,
                display_host=f"closed{i}.test",
                first_seen_at=NOW,
                robots_status=20,
                robots_txt="User-agent: researcher\nDisallow: /\n",
            )
            session.add(closed)
            session.flush()
            session.add(
                Page(
                    url=f"gemini://closed{i}.test/",
                    capsule_id=closed.id,
                    scope=closed.host,
                    discovered_at=NOW,
                    updated_at=NOW,
                )
            )
    with graph_store.sessions() as session:
        left = left_out(session)
        graph = load_graph(session, left)
    assert (left.capsules, left.pages) == (many, many)
    assert (graph.capsules, graph.pages) == (4, 7)  # the spec's space, untouched
