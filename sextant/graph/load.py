"""Read the link graph out of the store into numpy arrays, streaming.

Rows arrive in chunks (``yield_per``: a server-side cursor on PostgreSQL), each chunk becomes
a small array at once, so the peak is the arrays themselves plus one chunk of rows: about 8
bytes per page and 8 per link instead of a Python object each.

Pages and capsules that robots.txt keeps from the ``researcher`` are not in the graph at all
(:mod:`sextant.graph.researcher`), and neither are the links from or to them; the graph
says how many it left out.

Node ``i`` is the page with the ``i``-th smallest id. Edges are the links whose target is a
known page (links to other schemes have none), without self-links: a page pointing at itself
says nothing about its standing, and PageRank would reward it. Duplicate links stay, so
"inbound links" counts what authors wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy
from sqlalchemy import select
from sqlalchemy.orm import Session

from sextant.graph.researcher import LeftOut, left_out
from sextant.graph.rows import chunks, int_column, int_pairs, join
from sextant.sorted_ids import index_in_sorted
from sextant.store.models import PAGE_STATES, Capsule, FrontierEntry, Link, Page, SeedRequest
from sextant.urls import DEFAULT_PORT

#: Page states as stored codes; a state this code does not know yet is "other", not an error.
STATE_LABELS = (*PAGE_STATES, "other")
_STATE_CODES = {state: code for code, state in enumerate(PAGE_STATES)}


@dataclass(frozen=True, slots=True, eq=False)
class LinkGraph:
    page_ids: numpy.ndarray  # int64, ascending; node i is page page_ids[i]
    page_capsule: numpy.ndarray  # int32, per node: its capsule's position in capsule_ids
    page_state: numpy.ndarray  # int8, per node: index into STATE_LABELS
    capsule_ids: numpy.ndarray  # int64, ascending
    sources: numpy.ndarray  # int32 node numbers
    targets: numpy.ndarray  # int32 node numbers
    left_out: LeftOut = field(default_factory=LeftOut.nothing)  # kept out by robots.txt

    @property
    def pages(self) -> int:
        return int(self.page_ids.size)

    @property
    def capsules(self) -> int:
        return int(self.capsule_ids.size)

    @property
    def links(self) -> int:
        return int(self.sources.size)

    def node_numbers(self, page_ids: numpy.ndarray) -> numpy.ndarray:
        """Node numbers of the given page ids; ids that are not in the graph are dropped."""
        where = index_in_sorted(self.page_ids, numpy.asarray(page_ids, dtype=numpy.int64))
        return where[where >= 0].astype(numpy.int32)

    def capsule_links(self) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """Links between different capsules, one edge per ordered pair, weighted by count."""
        src = self.page_capsule[self.sources].astype(numpy.int64)
        dst = self.page_capsule[self.targets].astype(numpy.int64)
        across = src != dst
        keys, counts = numpy.unique(src[across] * self.capsules + dst[across], return_counts=True)
        return (keys // max(self.capsules, 1)), (keys % max(self.capsules, 1)), counts


def load_graph(session: Session, left: LeftOut | None = None) -> LinkGraph:
    """The link graph a study may look at, read in one transaction of ``session``.

    ``left`` is what robots.txt keeps out, when the caller has judged it already (the
    census needs it too); otherwise it is judged here.
    """
    left = left if left is not None else left_out(session)
    capsule_ids = int_column(session, select(Capsule.id).order_by(Capsule.id))
    capsule_ids = capsule_ids[~numpy.isin(capsule_ids, left.capsule_ids)]
    page_ids, capsule_of, states = _pages(session)
    keep = ~numpy.isin(page_ids, left.page_ids)
    page_ids, capsule_of, states = page_ids[keep], capsule_of[keep], states[keep]
    page_capsule = numpy.searchsorted(capsule_ids, capsule_of).astype(numpy.int32)
    sources, targets = _links(session, page_ids)
    return LinkGraph(
        page_ids=page_ids,
        page_capsule=page_capsule,
        page_state=states,
        capsule_ids=capsule_ids,
        sources=sources,
        targets=targets,
        left_out=left,
    )


def capsule_labels(session: Session, graph: LinkGraph) -> list[str]:
    """A name people recognize per capsule node: the Unicode host, with the port if unusual."""
    labels = [""] * graph.capsules
    rows = session.execute(select(Capsule.id, Capsule.display_host, Capsule.host, Capsule.port))
    for capsule_id, display_host, host, port in rows:
        where = int(numpy.searchsorted(graph.capsule_ids, capsule_id))
        if where < graph.capsules and graph.capsule_ids[where] == capsule_id:
            name = display_host or host
            labels[where] = name if port == DEFAULT_PORT else f"{name}:{port}"
    return labels


def seed_nodes(session: Session, graph: LinkGraph) -> numpy.ndarray:
    """Node numbers of the seeds: depth-0 pages, seed frontier rows, and requested seed URLs.

    The crawler marks seeds in more than one way over a page's life (a frontier row is gone
    once fetched, a seed request may have been normalized), so the union is taken.
    """
    ids = numpy.concatenate(
        [
            int_column(session, select(Page.id).where(Page.depth == 0)),
            int_column(
                session, select(FrontierEntry.page_id).where(FrontierEntry.reason == "seed")
            ),
            int_column(session, select(Page.id).join(SeedRequest, SeedRequest.url == Page.url)),
        ]
    )
    return numpy.unique(graph.node_numbers(ids))


def _pages(session: Session) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    ids: list[numpy.ndarray] = []
    capsules: list[numpy.ndarray] = []
    states: list[numpy.ndarray] = []
    other = len(PAGE_STATES)
    statement = select(Page.id, Page.capsule_id, Page.state).order_by(Page.id)
    for rows in chunks(session, statement):
        ids.append(numpy.fromiter((row[0] for row in rows), numpy.int64, len(rows)))
        capsules.append(numpy.fromiter((row[1] for row in rows), numpy.int64, len(rows)))
        codes = (_STATE_CODES.get(row[2], other) for row in rows)
        states.append(numpy.fromiter(codes, numpy.int8, len(rows)))
    return join(ids, numpy.int64), join(capsules, numpy.int64), join(states, numpy.int8)


def _links(session: Session, page_ids: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
    statement = select(Link.source_id, Link.target_id).where(
        Link.target_id.is_not(None), Link.source_id != Link.target_id
    )
    sources: list[numpy.ndarray] = []
    targets: list[numpy.ndarray] = []
    for source_ids, target_ids in int_pairs(session, statement):
        src = index_in_sorted(page_ids, source_ids)
        dst = index_in_sorted(page_ids, target_ids)
        # A link to a page added after the pages were read would point nowhere: skip it.
        keep = (src >= 0) & (dst >= 0)
        sources.append(src[keep].astype(numpy.int32))
        targets.append(dst[keep].astype(numpy.int32))
    return join(sources, numpy.int32), join(targets, numpy.int32)
