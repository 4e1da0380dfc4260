"""PageRank: the hand-solved fixed point, networkx as the reference, and bad input refused."""

from __future__ import annotations

from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sextant.pagerank import pagerank


def test_hand_computed_three_node_graph():
    # A->B, A->C, B->C, C->A with d = 17/20. Solving
    #   a = 1/20 + 17/20 c,  b = 1/20 + 17/40 a,  c = 1/20 + 17/20 (a/2 + b)
    # by substitution gives a = 2058/5307, b = 1140/5307, c = 2109/5307.
    expected = [Fraction(2058, 5307), Fraction(1140, 5307), Fraction(2109, 5307)]
    d = Fraction(17, 20)
    a, b, c = expected
    assert (a, b, c) == (
        1 / Fraction(20) + d * c,
        1 / Fraction(20) + d * a / 2,
        1 / Fraction(20) + d * (a / 2 + b),
    )
    src, dst = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 0])
    np.testing.assert_allclose(
        pagerank(3, src, dst, tol=1e-15), [float(x) for x in expected], atol=1e-14
    )
    # The default tol bounds the remaining error by about tol * d / (1 - d).
    np.testing.assert_allclose(pagerank(3, src, dst), [float(x) for x in expected], atol=1e-9)


def test_hand_computed_dangling_node_spreads_uniformly():
    # 0 -> 1 and 1 has no out-links, so its mass goes half to each node:
    #   a = 3/40 + 17/40 b,  b = 3/40 + 17/20 a + 17/40 b  =>  a = 20/57, b = 37/57.
    ranks = pagerank(2, np.array([0]), np.array([1]), tol=1e-15)
    np.testing.assert_allclose(ranks, [20 / 57, 37 / 57], rtol=0, atol=1e-14)


def test_duplicate_edges_count_as_weight():
    # Two links 0->1 and one 0->2 is the same as weights 2 and 1.
    dup = pagerank(3, np.array([0, 0, 0, 1, 2]), np.array([1, 1, 2, 0, 0]))
    weighted = pagerank(3, np.array([0, 0, 1, 2]), np.array([1, 2, 0, 0]), np.array([2, 1, 1, 1]))
    np.testing.assert_allclose(dup, weighted, rtol=0, atol=1e-13)
    assert dup[1] > dup[2]


def test_empty_graph_and_isolated_nodes():
    assert pagerank(0, np.array([], dtype=np.int64), np.array([], dtype=np.int64)).shape == (0,)
    ranks = pagerank(4, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    np.testing.assert_allclose(ranks, [0.25] * 4)


def test_zero_weight_row_is_dangling():
    with_zero = pagerank(2, np.array([0]), np.array([1]), np.array([0.0]))
    np.testing.assert_allclose(with_zero, [0.5, 0.5], atol=1e-12)


def _reference(n, edges, weights):
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for (s, t), w in zip(edges, weights, strict=True):
        if graph.has_edge(s, t):
            graph[s][t]["weight"] += w
        else:
            graph.add_edge(s, t, weight=w)
    # networkx's default tol=1e-6 stops early enough to misorder close ranks.
    result = nx.pagerank(graph, alpha=0.85, tol=1e-13, max_iter=10_000, weight="weight")
    return np.array([result[i] for i in range(n)])


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 12))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40))
    weights = draw(st.lists(st.integers(1, 5), min_size=len(edges), max_size=len(edges)))
    return n, edges, weights


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_matches_networkx_on_random_graphs(graph):
    n, edges, weights = graph
    src = np.array([s for s, _ in edges], dtype=np.int64)
    dst = np.array([t for _, t in edges], dtype=np.int64)
    ranks = pagerank(n, src, dst, np.array(weights, dtype=float), tol=1e-14)
    np.testing.assert_allclose(ranks, _reference(n, edges, weights), rtol=0, atol=1e-10)
    assert ranks.sum() == pytest.approx(1.0, abs=1e-12)


def test_matches_networkx_on_seeded_larger_graph():
    rng = np.random.default_rng(42)
    n = 300
    src = rng.integers(0, n, 2000)
    dst = rng.integers(0, n, 2000)
    ranks = pagerank(n, src, dst, tol=1e-14)
    expected = _reference(n, list(zip(src.tolist(), dst.tolist(), strict=True)), [1] * 2000)
    np.testing.assert_allclose(ranks, expected, rtol=0, atol=1e-11)
    assert list(np.argsort(-ranks)[:20]) == list(np.argsort(-expected)[:20])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 2, "sources": [0, 2], "targets": [1, 0]}, "node numbers"),
        ({"n": 2, "sources": [-1], "targets": [1]}, "node numbers"),
        ({"n": 2, "sources": [0, 1], "targets": [1]}, "differ in length"),
        ({"n": 2, "sources": [0], "targets": [1], "weights": [-1.0]}, "non-negative"),
        ({"n": 2, "sources": [0], "targets": [1], "weights": [np.nan]}, "finite"),
        ({"n": 2, "sources": [0], "targets": [1], "weights": [1.0, 2.0]}, "entries"),
        ({"n": 2, "sources": [0.5], "targets": [1.0]}, "integer"),
        ({"n": -1, "sources": [], "targets": []}, "n must be"),
        ({"n": 2, "sources": [0], "targets": [1], "damping": 1.5}, "damping"),
        ({"n": 2, "sources": [0], "targets": [1], "max_iter": 0}, "max_iter"),
    ],
)
def test_bad_input_is_refused(kwargs, message):
    args = {k: np.asarray(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    with pytest.raises(ValueError, match=message):
        pagerank(**args)
