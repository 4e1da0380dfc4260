"""The link graph's weights and the prior: farms, capsules and hubs, on hand-made graphs."""

from __future__ import annotations

import numpy
import pytest

from indexer.rank import (
    HUB_WEIGHT,
    INTRA_CAPSULE_WEIGHT,
    RANK_CEILING,
    RANK_FLOOR,
    LinkScores,
    link_scores,
    prior,
    weigh_edges,
)


def graph(scopes: list[int], edges: list[tuple[int, int]], **options: object):
    page_ids = numpy.arange(100, 100 + len(scopes), dtype=numpy.int64)
    return weigh_edges(
        page_ids,
        numpy.asarray(scopes, dtype=numpy.int64),
        numpy.asarray(edges, dtype=numpy.int64).reshape(-1, 2),
        **options,  # type: ignore[arg-type]
    )


def edge_weight(g, source: int, target: int) -> float:
    mask = (g.sources == source) & (g.targets == target)
    return float(g.weights[mask].sum())


def test_rows_sum_to_one_with_the_withheld_share_going_to_the_sink() -> None:
    g = graph([0, 0, 1, 2], [(0, 1), (0, 2), (2, 3), (3, 2)])
    sink = 4
    for source in (0, 2, 3):
        total = g.weights[g.sources == source].sum()
        assert total == pytest.approx(1.0)
    # Node 0 links within its capsule (weight 0.3 of its half) and out (a full half).
    assert edge_weight(g, 0, 1) == pytest.approx(0.5 * INTRA_CAPSULE_WEIGHT)
    assert edge_weight(g, 0, 2) == pytest.approx(0.5)
    assert edge_weight(g, 0, sink) == pytest.approx(0.5 * (1 - INTRA_CAPSULE_WEIGHT))


def test_a_farm_in_one_capsule_counts_as_one_link() -> None:
    # Target 0 in capsule 0; a farm of ten pages (capsule 1) links to it; so does one page of
    # capsule 2. The farm's pages share one link's worth.
    scopes = [0, *[1] * 10, 2]
    edges = [(i, 0) for i in range(1, 11)] + [(11, 0)]
    g = graph(scopes, edges)
    farm_total = sum(edge_weight(g, i, 0) for i in range(1, 11))
    assert farm_total == pytest.approx(edge_weight(g, 11, 0))


def test_the_farm_target_ranks_like_a_page_linked_by_one_capsule() -> None:
    # Page 0 is a farm's target (ten pages of capsule 1 link to it). Page 11 is linked by one
    # page of capsule 3, page 13 by single pages of two capsules (4 and 5).
    scopes = [0, *[1] * 10, 2, 3, 6, 4, 5]
    edges = [(i, 0) for i in range(1, 11)] + [(12, 11), (14, 13), (15, 13)]
    scores = link_scores(graph(scopes, edges))
    assert scores[0] == pytest.approx(scores[11], rel=0.01)
    assert scores[13] > scores[0] * 1.2
    assert scores.mean() == pytest.approx(1.0)


def test_hub_links_count_little() -> None:
    scopes = [0, 1, 2]
    edges = [(0, 2), (1, 2)]
    hubs = numpy.asarray([True, False, False])
    g = graph(scopes, edges, hubs=hubs)
    assert edge_weight(g, 0, 2) == pytest.approx(HUB_WEIGHT)
    assert edge_weight(g, 1, 2) == pytest.approx(1.0)


def test_hubs_are_detected_from_the_capsules_a_page_reaches() -> None:
    scopes = list(range(25))
    edges = [(0, i) for i in range(1, 25)]
    assert edge_weight(graph(scopes, edges, hub_min_capsules=20), 0, 1) == pytest.approx(
        HUB_WEIGHT / 24
    )
    assert edge_weight(graph(scopes, edges, hub_min_capsules=30), 0, 1) == pytest.approx(1 / 24)


def test_links_to_pages_outside_the_graph_take_their_share() -> None:
    g = graph([0, 1], [(0, 1)], out_links=numpy.asarray([4.0, 0.0]))
    assert edge_weight(g, 0, 1) == pytest.approx(0.25)


def test_empty_graphs() -> None:
    assert len(link_scores(graph([], []))) == 0
    lonely = link_scores(graph([0, 1, 2], []))
    assert lonely == pytest.approx(numpy.ones(3))


def test_prior_is_monotonic_and_bounded() -> None:
    values = [prior(r) for r in (0.0, RANK_FLOOR, 0.5, 1.0, 4.0, 16.0, RANK_CEILING, 1e9)]
    assert values == sorted(values)
    assert prior(1.0) == 1.0
    assert prior(16.0) == pytest.approx(2.0)
    assert prior(0.0) == prior(RANK_FLOOR)
    assert prior(1e9) == prior(RANK_CEILING)


def test_link_scores_survive_a_round_trip_and_unknown_ids_default(tmp_path) -> None:
    scores = LinkScores(numpy.asarray([3, 7, 9]), numpy.asarray([0.5, 2.0, 1.5]))
    scores.save(tmp_path)
    loaded = LinkScores.load(tmp_path)
    assert loaded.get(7) == 2.0
    assert loaded.get(8) == 1.0
    assert loaded.get(100, default=0.3) == 0.3
    assert LinkScores.load(tmp_path / "nowhere").get(3) == 1.0
