"""Link analysis: the PageRank prior and how it is blended with BM25F.

The graph
---------
Nodes are the indexed pages (states ``ok`` and ``input``). A link to a page that redirects is
credited to the redirect's target, through a whole chain of permanent (``31``) redirects
(:mod:`sextant.store.redirects`). Duplicate links between two pages count once, self-links
not at all. Then three rules resist link farming:

* **Once per linking capsule.** A page's inbound links are grouped by the capsule (scope: the
  host, or ``host/~user`` on a pubnix) of the linking page; each group counts as one link,
  shared among the group's pages. A capsule that links to a page from all of its thousand
  pages gives what one page gives.
* **Links inside one capsule count little**: the page's own capsule is a group weighing
  :data:`INTRA_CAPSULE_WEIGHT` (navigation menus say nothing about importance elsewhere).
* **Directories and search engines count little**: a page linking to at least
  :data:`HUB_MIN_CAPSULES` other capsules (a directory, an aggregator, a search result page)
  passes on only :data:`HUB_WEIGHT` of a normal link.

Concretely, a page ``p`` with ``d`` distinct out-links gives target ``t`` the transition weight
``w_group / (d · k)``, where ``k`` is the number of pages of ``p``'s capsule that link to ``t``.
Whatever a page does not pass on this way flows to a virtual dangling node, which PageRank
spreads uniformly: it becomes teleportation, so discounting a link takes rank away from its
target instead of giving it to the page's other links. The PageRank itself is the shared
implementation in :mod:`sextant.pagerank` (damping 0.85).

The blend
---------
Scores are normalized so that the average page has rank 1.0 (orphan pages land near 0.2-0.5,
pages linked from many capsules far above 1). At query time the top
:data:`RERANK_WINDOW` hits by BM25F are re-scored as::

    score = bm25f × clip(rank, RANK_FLOOR, RANK_CEILING) ** RANK_EXPONENT

a log-linear combination (``log score = log bm25f + 0.25 · log rank``): text relevance decides
and links break near-ties. A page with 16× the average rank gains a factor of 2, an orphan
loses at most a factor of 1.8. Filter-only queries (``site:example.org``) have no text score
and are ordered by rank alone.

The scores live in a small file beside the Whoosh index (``linkrank.npz``: page ids and
scores), rewritten atomically by every ``sextant index`` run, and read by searchers when it
changes. Recomputing PageRank therefore never touches the documents.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy
from sqlalchemy import Connection, distinct, func, select
from sqlalchemy.orm import aliased

from sextant.graph.rows import chunks, int_column, int_pairs, join
from sextant.pagerank import pagerank
from sextant.sorted_ids import index_in_sorted
from sextant.store.models import Link, Page
from sextant.store.redirects import permanent_redirects

INDEXED_STATES = ("ok", "input")

INTRA_CAPSULE_WEIGHT = 0.3
HUB_MIN_CAPSULES = 20
HUB_WEIGHT = 0.1
DAMPING = 0.85

RERANK_WINDOW = 100
RANK_EXPONENT = 0.25
RANK_FLOOR = 0.05
RANK_CEILING = 1000.0

RANK_FILE = "linkrank.npz"


@dataclass(frozen=True, slots=True)
class LinkGraph:
    """The weighted graph fed to PageRank; node ``i`` is page ``page_ids[i]``."""

    page_ids: numpy.ndarray  # int64, sorted
    sources: numpy.ndarray  # node numbers
    targets: numpy.ndarray
    weights: numpy.ndarray


def load_graph(
    connection: Connection,
    *,
    intra_weight: float = INTRA_CAPSULE_WEIGHT,
    hub_min_capsules: int = HUB_MIN_CAPSULES,
    hub_weight: float = HUB_WEIGHT,
) -> LinkGraph:
    """Read pages and links from the store and weigh the links by the rules above.

    Everything is read in chunks into arrays (:mod:`sextant.graph.rows`): at 553,014 pages
    and 2.9 million links the pages as rows, URLs and all, and a URL → id dictionary made
    this the largest process of a full index (891 MB).
    """
    page_ids, scopes = _indexed_pages(connection)
    # A link to a redirect counts for the page the redirect leads to (one hop, or to the
    # end of a chain of permanent ones).
    redirect_to = _redirects(connection)
    redirect_to.update(permanent_redirects(connection).target_of)
    sources, targets = _links(connection)
    if redirect_to:
        redirected = numpy.fromiter(redirect_to, numpy.int64, len(redirect_to))
        destinations = numpy.fromiter(redirect_to.values(), numpy.int64, len(redirect_to))
        order = numpy.argsort(redirected)
        at = index_in_sorted(redirected[order], targets)
        targets = numpy.where(at >= 0, destinations[order][at], targets)
    src = index_in_sorted(page_ids, sources)
    dst = index_in_sorted(page_ids, targets)
    del sources, targets
    keep = (src >= 0) & (dst >= 0) & (src != dst)
    # Distinct pairs as one number each: a 1-D unique sorts one array, where unique over
    # the rows of an (m, 2) array made several copies of it.
    n = max(len(page_ids), 1)
    pairs = numpy.unique(src[keep] * n + dst[keep])
    del src, dst, keep
    edges = numpy.stack([pairs // n, pairs % n], axis=1)
    del pairs
    hubs = numpy.zeros(len(page_ids), dtype=bool)
    hub_nodes = index_in_sorted(page_ids, hub_pages(connection, hub_min_capsules))
    hubs[hub_nodes[hub_nodes >= 0]] = True
    # A page's vote is split over all of its links, also those to pages that are not indexed
    # (not crawled yet, gone, other schemes): their share is lost, like a real surfer's click.
    by_source = select(Link.source_id).group_by(Link.source_id).order_by(Link.source_id)
    degree_sources = int_column(connection, by_source)
    degrees = int_column(
        connection, by_source.with_only_columns(func.count(distinct(Link.target_url)))
    )
    degree_nodes = index_in_sorted(page_ids, degree_sources)
    out_links = numpy.zeros(len(page_ids))
    found = degree_nodes >= 0
    out_links[degree_nodes[found]] = degrees[found]
    return weigh_edges(
        page_ids,
        scopes,
        edges,
        hubs=hubs,
        out_links=out_links,
        intra_weight=intra_weight,
        hub_weight=hub_weight,
    )


def _indexed_pages(connection: Connection) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Ids (ascending) of the indexed pages and a capsule number for each."""
    numbers: dict[str, int] = {}
    ids: list[numpy.ndarray] = []
    scopes: list[numpy.ndarray] = []
    statement = select(Page.id, Page.scope).where(Page.state.in_(INDEXED_STATES)).order_by(Page.id)
    for rows in chunks(connection, statement):
        ids.append(numpy.fromiter((row[0] for row in rows), numpy.int64, len(rows)))
        scope_numbers = (numbers.setdefault(row[1], len(numbers)) for row in rows)
        scopes.append(numpy.fromiter(scope_numbers, numpy.int64, len(rows)))
    return join(ids, numpy.int64), join(scopes, numpy.int64)


def _redirects(connection: Connection) -> dict[int, int]:
    """Redirecting page id → the indexed page its target URL names, matched in the store
    (by the unique index on URLs) rather than through every URL in memory."""
    source = aliased(Page)
    target = aliased(Page)
    query = (
        select(source.id, target.id)
        .join(target, target.url == source.redirect_target)
        .where(source.state == "redirect", target.state.in_(INDEXED_STATES))
    )
    return {int(page_id): int(to) for page_id, to in connection.execute(query)}


def _links(connection: Connection) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Source and target page ids of every link to a known page, read in chunks."""
    statement = select(Link.source_id, Link.target_id).where(Link.target_id.is_not(None))
    sources: list[numpy.ndarray] = []
    targets: list[numpy.ndarray] = []
    for source_ids, target_ids in int_pairs(connection, statement):
        sources.append(source_ids)
        targets.append(target_ids)
    return join(sources, numpy.int64), join(targets, numpy.int64)


def hub_pages(connection: Connection, min_capsules: int = HUB_MIN_CAPSULES) -> numpy.ndarray:
    """Pages linking to at least ``min_capsules`` other capsules, counted over every known
    target (fetched or not): a directory is a directory before its entries are crawled."""
    source = aliased(Page)
    target = aliased(Page)
    reached = func.count(distinct(target.scope))
    query = (
        select(Link.source_id)
        .join(source, source.id == Link.source_id)
        .join(target, target.id == Link.target_id)
        .where(target.scope != source.scope)
        .group_by(Link.source_id)
        .having(reached >= min_capsules)
    )
    return numpy.asarray(connection.scalars(query).all(), dtype=numpy.int64)


def weigh_edges(
    page_ids: numpy.ndarray,
    scopes: numpy.ndarray,
    edges: numpy.ndarray,
    *,
    hubs: numpy.ndarray | None = None,
    out_links: numpy.ndarray | None = None,
    intra_weight: float = INTRA_CAPSULE_WEIGHT,
    hub_min_capsules: int = HUB_MIN_CAPSULES,
    hub_weight: float = HUB_WEIGHT,
) -> LinkGraph:
    """Apply the once-per-capsule, intra-capsule and hub rules to distinct node edges.

    ``edges`` is an (m, 2) array of distinct (source, target) node pairs without self-links;
    ``scopes[i]`` is the capsule number of node ``i``; ``hubs[i]`` says whether node ``i`` is
    a directory (when None, it is decided from ``edges`` alone with ``hub_min_capsules``);
    ``out_links[i]`` is how many distinct links node ``i`` has in all (default: its edges).
    The returned graph has one extra node, ``len(page_ids)``, the sink that turns withheld
    weight into teleportation.
    """
    n = len(page_ids)
    if len(edges) == 0:
        empty = numpy.empty(0, dtype=numpy.int64)
        return LinkGraph(page_ids, empty, empty, numpy.empty(0))
    src, dst = edges[:, 0], edges[:, 1]
    src_scope, dst_scope = scopes[src], scopes[dst]
    out_degree = numpy.bincount(src, minlength=n).astype(numpy.float64)
    if out_links is not None:
        out_degree = numpy.maximum(out_degree, out_links)

    cross = src_scope != dst_scope
    if hubs is None:
        reached = numpy.unique(numpy.stack([src[cross], dst_scope[cross]], axis=1), axis=0)
        hubs = numpy.bincount(reached[:, 0], minlength=n) >= hub_min_capsules

    # k: how many pages of the linking capsule link to the same target.
    _, inverse, counts = numpy.unique(src_scope * n + dst, return_inverse=True, return_counts=True)
    k = counts[inverse].astype(numpy.float64)

    group_weight = numpy.where(cross, 1.0, intra_weight)
    group_weight = numpy.where(cross & hubs[src], hub_weight, group_weight)
    weights = group_weight / (out_degree[src] * k)

    passed = numpy.bincount(src, weights=weights, minlength=n)
    withheld = numpy.clip(1.0 - passed, 0.0, None)
    has_edges = numpy.bincount(src, minlength=n) > 0
    sink_sources = numpy.nonzero(has_edges & (withheld > 1e-12))[0]
    sources = numpy.concatenate([src, sink_sources])
    targets = numpy.concatenate([dst, numpy.full(len(sink_sources), n, dtype=numpy.int64)])
    all_weights = numpy.concatenate([weights, withheld[sink_sources]])
    return LinkGraph(page_ids, sources, targets, all_weights)


def link_scores(graph: LinkGraph, *, damping: float = DAMPING) -> numpy.ndarray:
    """PageRank of the graph's pages, scaled so that the average page scores 1.0."""
    n = len(graph.page_ids)
    if n == 0:
        return numpy.empty(0, dtype=numpy.float64)
    ranks = pagerank(n + 1, graph.sources, graph.targets, graph.weights, damping=damping)[:n]
    total = ranks.sum()
    return ranks * (n / total) if total > 0 else numpy.ones(n)


@dataclass(frozen=True, slots=True)
class LinkScores:
    """Page id → link score, as searchers read it."""

    page_ids: numpy.ndarray
    scores: numpy.ndarray

    @classmethod
    def empty(cls) -> LinkScores:
        return cls(numpy.empty(0, dtype=numpy.int64), numpy.empty(0, dtype=numpy.float64))

    def get(self, page_id: int, default: float = 1.0) -> float:
        i = int(numpy.searchsorted(self.page_ids, page_id))
        if i < len(self.page_ids) and self.page_ids[i] == page_id:
            return float(self.scores[i])
        return default

    def save(self, directory: Path) -> None:
        """Write atomically: a searcher reading the old file never sees half a new one."""
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".linkrank-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as handle:
                numpy.savez(handle, page_ids=self.page_ids, scores=self.scores)
            os.replace(temp, directory / RANK_FILE)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, directory: Path) -> LinkScores:
        path = directory / RANK_FILE
        if not path.exists():
            return cls.empty()
        with numpy.load(path) as data:
            return cls(data["page_ids"].astype(numpy.int64), data["scores"].astype(numpy.float64))


def compute(connection: Connection) -> LinkScores:
    """Link scores for every indexed page, from the store as it is now."""
    graph = load_graph(connection)
    return LinkScores(graph.page_ids, link_scores(graph))


def prior(rank: float) -> float:
    """The multiplicative factor a link score contributes to a hit's score."""
    return float(min(max(rank, RANK_FLOOR), RANK_CEILING) ** RANK_EXPONENT)
