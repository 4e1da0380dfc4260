"""The shape of the link graph: degrees, central pages and capsules, components, reach.

Everything is computed on the arrays of :class:`~sextant.graph.load.LinkGraph` with
scipy.sparse; only the handful of pages and capsules that make a top list are looked up
again for their names.

At capsule level a capsule is a node and an edge says "some page here links to some page
there", weighted by how many such links exist. A capsule's *inbound* is the number of links
it receives from other capsules; its in-degree is how many other capsules link to it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy
from scipy import sparse
from scipy.sparse import csgraph
from sqlalchemy import select
from sqlalchemy.orm import Session

from sextant.census import Breakdown, ranked_breakdown
from sextant.graph.load import STATE_LABELS, LinkGraph, capsule_labels, load_graph, seed_nodes
from sextant.pagerank import pagerank
from sextant.store.models import Page


@dataclass(frozen=True, slots=True)
class Degrees:
    """A degree distribution: ``(degree, nodes with that degree)`` by ascending degree."""

    distribution: tuple[tuple[int, int], ...]
    mean: float
    median: float
    maximum: int
    zero: int  # nodes with degree 0


@dataclass(frozen=True, slots=True)
class Ranked:
    """One entry of a top list: a page (by URL) or a capsule (by name)."""

    name: str
    title: str | None
    inbound: int
    pagerank: float


@dataclass(frozen=True, slots=True)
class GraphStats:
    pages: int
    capsules: int
    links: int  # links between known pages, self-links left out
    capsule_links: int  # ordered capsule pairs with at least one link
    page_in_degree: Degrees
    page_out_degree: Degrees
    capsule_in_degree: Degrees
    capsule_out_degree: Degrees
    top_pages_by_inbound: tuple[Ranked, ...]
    top_pages_by_pagerank: tuple[Ranked, ...]
    top_capsules_by_inbound: tuple[Ranked, ...]
    top_capsules_by_pagerank: tuple[Ranked, ...]
    capsules_without_inbound: tuple[str, ...]  # no other capsule links to them; by name
    strongly_connected_components: int
    largest_component_pages: int
    largest_component_capsules: int
    seeds: int
    reachable_from_seeds: int  # seeds included
    dangling_pages: int  # no links out to known pages
    dangling_by_state: Breakdown
    pages_left_out: int  # robots.txt keeps them from the researcher; in no figure above
    capsules_left_out: int  # closed to the researcher as a whole

    @property
    def reachable_share(self) -> float:
        return self.reachable_from_seeds / self.pages if self.pages else 0.0

    def as_dict(self) -> dict[str, Any]:
        result = dataclasses.asdict(self)
        result["dangling_by_state"] = dict(self.dangling_by_state)
        result["reachable_share"] = self.reachable_share
        return result


@dataclass(frozen=True, slots=True, eq=False)
class Centrality:
    """Inbound counts and PageRank per node, at page and at capsule level."""

    page_inbound: numpy.ndarray
    page_rank: numpy.ndarray
    capsule_inbound: numpy.ndarray
    capsule_rank: numpy.ndarray
    capsule_edges: tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]  # source, target, links


def centrality(graph: LinkGraph) -> Centrality:
    """What stats and exports both show, computed once."""
    csrc, cdst, weight = graph.capsule_links()
    return Centrality(
        page_inbound=numpy.bincount(graph.targets, minlength=graph.pages),
        page_rank=pagerank(graph.pages, graph.sources, graph.targets),
        capsule_inbound=numpy.bincount(cdst, weights=weight, minlength=graph.capsules).astype(
            numpy.int64
        ),
        capsule_rank=pagerank(graph.capsules, csrc, cdst, weight),
        capsule_edges=(csrc, cdst, weight),
    )


def graph_stats(session: Session, graph: LinkGraph | None = None, *, top: int = 10) -> GraphStats:
    """Statistics of the link graph in the store (or of ``graph``, read from it before)."""
    graph = graph if graph is not None else load_graph(session)
    central = centrality(graph)
    csrc, cdst, _ = central.capsule_edges
    names = capsule_labels(session, graph)
    out_degree = numpy.bincount(graph.sources, minlength=graph.pages)
    capsule_in = numpy.bincount(cdst, minlength=graph.capsules)
    seeds = seed_nodes(session, graph)
    components, largest_pages = _strong_components(graph.pages, graph.sources, graph.targets)
    _, largest_capsules = _strong_components(graph.capsules, csrc, cdst)
    dangling = out_degree == 0
    dangling_states = numpy.bincount(graph.page_state[dangling], minlength=len(STATE_LABELS))
    return GraphStats(
        pages=graph.pages,
        capsules=graph.capsules,
        links=graph.links,
        capsule_links=int(csrc.size),
        page_in_degree=degrees(central.page_inbound),
        page_out_degree=degrees(out_degree),
        capsule_in_degree=degrees(capsule_in),
        capsule_out_degree=degrees(numpy.bincount(csrc, minlength=graph.capsules)),
        top_pages_by_inbound=_top_pages(
            session, graph, central, _order(central.page_inbound, central.page_rank, top)
        ),
        top_pages_by_pagerank=_top_pages(
            session, graph, central, _order(central.page_rank, central.page_inbound, top)
        ),
        top_capsules_by_inbound=_top_capsules(
            names, central, _order(central.capsule_inbound, central.capsule_rank, top)
        ),
        top_capsules_by_pagerank=_top_capsules(
            names, central, _order(central.capsule_rank, central.capsule_inbound, top)
        ),
        capsules_without_inbound=tuple(
            sorted(names[i] for i in numpy.flatnonzero(capsule_in == 0))
        ),
        strongly_connected_components=components,
        largest_component_pages=largest_pages,
        largest_component_capsules=largest_capsules,
        seeds=int(seeds.size),
        reachable_from_seeds=reachable(graph.pages, graph.sources, graph.targets, seeds),
        dangling_pages=int(dangling.sum()),
        dangling_by_state=ranked_breakdown(
            Counter(dict(zip(STATE_LABELS, dangling_states.tolist(), strict=True)))
        ),
        pages_left_out=graph.left_out.pages,
        capsules_left_out=graph.left_out.capsules,
    )


def degrees(values: numpy.ndarray) -> Degrees:
    if values.size == 0:
        return Degrees(distribution=(), mean=0.0, median=0.0, maximum=0, zero=0)
    counts = numpy.bincount(values)
    present = numpy.flatnonzero(counts)
    return Degrees(
        distribution=tuple(zip(present.tolist(), counts[present].tolist(), strict=True)),
        mean=float(values.mean()),
        median=float(numpy.median(values)),
        maximum=int(values.max()),
        zero=int(counts[0]),
    )


def reachable(n: int, sources: numpy.ndarray, targets: numpy.ndarray, seeds: numpy.ndarray) -> int:
    """How many nodes a walk along the edges reaches from any seed (the seeds included).

    One breadth-first search from an extra node that links to every seed, instead of one
    search per seed.
    """
    if n == 0 or seeds.size == 0:
        return 0
    start = numpy.full(seeds.size, n, dtype=numpy.int64)
    src = numpy.concatenate([sources.astype(numpy.int64), start])
    dst = numpy.concatenate([targets.astype(numpy.int64), seeds.astype(numpy.int64)])
    matrix = sparse.csr_matrix(
        (numpy.ones(src.size, dtype=numpy.int8), (src, dst)), shape=(n + 1, n + 1)
    )
    order = csgraph.breadth_first_order(matrix, n, directed=True, return_predecessors=False)
    return int(order.size - 1)


def _strong_components(n: int, sources: numpy.ndarray, targets: numpy.ndarray) -> tuple[int, int]:
    """Number of strongly connected components and the size of the largest."""
    if n == 0:
        return 0, 0
    matrix = sparse.csr_matrix(
        (numpy.ones(sources.size, dtype=numpy.int8), (sources, targets)), shape=(n, n)
    )
    count, labels = csgraph.connected_components(matrix, directed=True, connection="strong")
    return int(count), int(numpy.bincount(labels).max())


def _order(primary: numpy.ndarray, secondary: numpy.ndarray, top: int) -> list[int]:
    """The ``top`` nodes by ``primary`` then ``secondary``, both descending; ties by node."""
    order = numpy.lexsort((numpy.arange(primary.size), -secondary, -primary))
    return order[:top].tolist()


def _top_pages(
    session: Session, graph: LinkGraph, central: Centrality, nodes: list[int]
) -> tuple[Ranked, ...]:
    ids = [int(graph.page_ids[node]) for node in nodes]
    found = {
        row.id: row
        for row in session.execute(select(Page.id, Page.url, Page.title).where(Page.id.in_(ids)))
    }
    return tuple(
        Ranked(
            name=found[page_id].url,
            title=found[page_id].title,
            inbound=int(central.page_inbound[node]),
            pagerank=float(central.page_rank[node]),
        )
        for node, page_id in zip(nodes, ids, strict=True)
        if page_id in found
    )


def _top_capsules(names: list[str], central: Centrality, nodes: list[int]) -> tuple[Ranked, ...]:
    return tuple(
        Ranked(
            name=names[node],
            title=None,
            inbound=int(central.capsule_inbound[node]),
            pagerank=float(central.capsule_rank[node]),
        )
        for node in nodes
    )
