"""Loading the graph and its statistics, checked against networkx on the same small space."""

from __future__ import annotations

import json
from statistics import median

import networkx as nx
import numpy as np
import pytest

from sextant.graph import load
from sextant.graph.load import load_graph, seed_nodes
from sextant.graph.stats import graph_stats, reachable
from sextant.store import Link, Page, SeedRequest
from tests.graph.conftest import (
    CAPSULES,
    NOW,
    PAGES,
    SEEDS,
    capsule_label,
    expected_capsule_graph,
    expected_page_graph,
)


def _urls(store, graph):
    by_id = {page_id: url for url, page_id in store.page_id.items()}
    return [by_id[int(i)] for i in graph.page_ids]


def test_load_reads_pages_capsules_and_links(graph_store):
    with graph_store.sessions() as session:
        graph = load_graph(session)
    urls = _urls(graph_store, graph)
    assert graph.pages == len(PAGES)
    assert graph.capsules == len(CAPSULES)
    expected = expected_page_graph()
    loaded = nx.MultiDiGraph()
    loaded.add_edges_from(
        (urls[s], urls[t]) for s, t in zip(graph.sources, graph.targets, strict=True)
    )
    # Duplicates stay as separate links; the self-link and the https link are gone.
    assert graph.links == sum(w for _, _, w in expected.edges(data="weight")) == 9
    assert sorted(loaded.edges()) == sorted(
        e for s, t, w in expected.edges(data="weight") for e in [(s, t)] * w
    )
    capsule_host = {cid: host for host, cid in graph_store.capsule_id.items()}
    for node, url in enumerate(urls):
        assert capsule_host[int(graph.capsule_ids[graph.page_capsule[node]])] in url


def test_capsule_links_are_weighted_pairs(graph_store):
    with graph_store.sessions() as session:
        graph = load_graph(session)
    src, dst, weight = graph.capsule_links()
    host = {cid: h for h, cid in graph_store.capsule_id.items()}
    got = {
        (host[int(graph.capsule_ids[s])], host[int(graph.capsule_ids[t])]): int(w)
        for s, t, w in zip(src, dst, weight, strict=True)
    }
    assert got == {(a, b): w for a, b, w in expected_capsule_graph().edges(data="weight")}


def test_seeds_come_from_depth_frontier_and_seed_requests(graph_store):
    with graph_store.sessions.begin() as session:
        session.add(SeedRequest(url="gemini://gamma.test/", source="cli", requested_at=NOW))
        session.add(SeedRequest(url="gemini://unknown.test/", source="cli", requested_at=NOW))
    with graph_store.sessions() as session:
        graph = load_graph(session)
        seeds = seed_nodes(session, graph)
    urls = _urls(graph_store, graph)
    assert sorted(urls[s] for s in seeds) == sorted([*SEEDS, "gemini://gamma.test/"])


def test_stats_agree_with_networkx(graph_store):
    with graph_store.sessions() as session:
        stats = graph_stats(session, top=3)
    pages = expected_page_graph()
    capsules = expected_capsule_graph()
    multi_in = {n: sum(w for _, _, w in pages.in_edges(n, data="weight")) for n in pages}
    multi_out = {n: sum(w for _, _, w in pages.out_edges(n, data="weight")) for n in pages}

    assert (stats.pages, stats.capsules, stats.links) == (7, 4, 9)
    assert stats.capsule_links == capsules.number_of_edges()
    in_counts = sorted(multi_in.values())
    assert stats.page_in_degree.distribution == tuple(
        sorted((d, in_counts.count(d)) for d in set(in_counts))
    )
    assert stats.page_in_degree.maximum == max(in_counts) == 3
    assert stats.page_in_degree.median == median(in_counts)
    assert stats.page_in_degree.mean == pytest.approx(9 / 7)
    assert stats.page_out_degree.zero == sum(1 for v in multi_out.values() if v == 0)
    assert stats.capsule_in_degree.distribution == tuple(
        sorted(
            (d, list(dict(capsules.in_degree()).values()).count(d))
            for d in set(dict(capsules.in_degree()).values())
        )
    )

    ranks = nx.pagerank(pages, weight="weight", tol=1e-13, max_iter=1000)
    best = max(ranks, key=ranks.get)
    assert stats.top_pages_by_pagerank[0].name == best
    assert stats.top_pages_by_pagerank[0].pagerank == pytest.approx(ranks[best], abs=1e-9)
    assert (
        [r.name for r in stats.top_pages_by_inbound]
        == [
            "gemini://alpha.test/",
            "gemini://beta.test/",  # 2 inbound
            *[r.name for r in stats.top_pages_by_inbound[2:]],
        ]
    )
    assert stats.top_pages_by_inbound[0].inbound == 3
    assert stats.top_pages_by_inbound[0].title == "Alpha home"
    assert len(stats.top_pages_by_inbound) == 3
    # Among pages with one inbound link, the higher PageRank comes first.
    third = stats.top_pages_by_inbound[2].name
    assert ranks[third] == max(r for n, r in ranks.items() if multi_in[n] == 1)

    capsule_ranks = nx.pagerank(capsules, weight="weight", tol=1e-13, max_iter=1000)
    top_capsule = max(capsule_ranks, key=capsule_ranks.get)
    assert stats.top_capsules_by_pagerank[0].name == capsule_label(top_capsule)
    capsule_inbound = {capsule_label(c): capsules.in_degree(c, weight="weight") for c in capsules}
    assert [r.inbound for r in stats.top_capsules_by_inbound] == sorted(
        capsule_inbound.values(), reverse=True
    )[:3]
    for ranked in stats.top_capsules_by_inbound:
        assert ranked.inbound == capsule_inbound[ranked.name]
    first, second = stats.top_capsules_by_inbound[:2]  # alpha and beta both receive 2
    assert first.inbound == second.inbound == 2
    assert first.pagerank > second.pagerank  # ties go to the higher PageRank
    assert stats.capsules_without_inbound == tuple(
        sorted(capsule_label(c) for c in capsules if capsules.in_degree(c) == 0)
    )
    assert stats.capsules_without_inbound == ("delta.test:1966",)

    sccs = list(nx.strongly_connected_components(pages))
    assert stats.strongly_connected_components == len(sccs)
    assert stats.largest_component_pages == max(map(len, sccs)) == 4
    assert stats.largest_component_capsules == max(
        map(len, nx.strongly_connected_components(capsules))
    )

    reach = set(SEEDS).union(*(nx.descendants(pages, s) for s in SEEDS))
    assert stats.seeds == len(SEEDS)
    assert stats.reachable_from_seeds == len(reach) == 6
    assert stats.reachable_share == pytest.approx(6 / 7)

    dangling = [n for n in pages if multi_out[n] == 0]
    assert stats.dangling_pages == len(dangling) == 2
    assert dict(stats.dangling_by_state) == {"ok": 1, "new": 1}


def test_stats_serialize_to_json(graph_store):
    with graph_store.sessions() as session:
        stats = graph_stats(session)
    data = json.loads(json.dumps(stats.as_dict()))
    assert data["pages"] == 7
    assert data["top_pages_by_inbound"][0]["name"] == "gemini://alpha.test/"
    assert data["page_in_degree"]["distribution"][0] == [0, 1]
    assert data["dangling_by_state"] == {"new": 1, "ok": 1}
    assert data["reachable_share"] == pytest.approx(6 / 7)


def test_empty_store_has_empty_stats(tmp_path):
    from sextant.store import session_factory
    from sextant.store.migrate import open_store

    sessions = session_factory(open_store(f"sqlite:///{tmp_path / 'empty.db'}"))
    with sessions() as session:
        stats = graph_stats(session)
    assert (stats.pages, stats.links, stats.capsules) == (0, 0, 0)
    assert stats.top_pages_by_pagerank == ()
    assert stats.page_in_degree.distribution == ()
    assert (stats.largest_component_pages, stats.reachable_from_seeds) == (0, 0)
    assert stats.reachable_share == 0.0


def test_links_added_while_loading_do_not_break_the_graph(graph_store):
    # A page and a link written between reading pages and reading links (the crawler runs
    # concurrently) must be skipped, not point past the arrays.
    with graph_store.sessions.begin() as session:
        alpha = session.get(Page, graph_store.page_id["gemini://alpha.test/"])
        late = Page(
            url="gemini://alpha.test/late",
            capsule_id=alpha.capsule_id,
            scope="alpha.test",
            discovered_at=NOW,
            updated_at=NOW,
        )
        session.add(late)
        session.flush()
        late_id = late.id
    with graph_store.sessions() as session:
        page_ids = np.array(sorted(set(graph_store.page_id.values())), dtype=np.int64)
        with graph_store.sessions.begin() as writer:
            writer.add(
                Link(
                    source_id=graph_store.page_id["gemini://alpha.test/"],
                    target_url="gemini://alpha.test/late",
                    target_id=late_id,
                    target_scheme="gemini",
                    first_seen_at=NOW,
                )
            )
        sources, targets = load._links(session, page_ids)
    assert sources.size == targets.size == 9
    assert targets.max() < page_ids.size


def test_reachable_follows_direction():
    src, dst = np.array([0, 1, 3]), np.array([1, 2, 0])
    assert reachable(5, src, dst, np.array([0])) == 3
    assert reachable(5, src, dst, np.array([3])) == 4
    assert reachable(5, src, dst, np.array([4])) == 1
    assert reachable(5, src, dst, np.array([], dtype=np.int64)) == 0
