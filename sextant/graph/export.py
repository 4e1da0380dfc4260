"""The link graph from the store as a :class:`~sextant.graph.formats.GraphStream`.

Page level: a node per page (label = URL) with its title, capsule, state, status, MIME type,
inbound link count and PageRank; an edge per linked pair of pages, weighted by how many
links join them. Capsule level: a node per capsule with its page count, inbound links from
other capsules and capsule PageRank; an edge per linked pair of capsules, weighted by the
number of page links between them.

Pages and capsules whose robots.txt disallows ``researcher`` are not exported (see
:mod:`sextant.graph.researcher`); the file's description says how many, where the format
has one.

Node rows are read from the database as they are written out; edges come from the numpy
arrays already loaded for PageRank. Node ids are the store's ids, as text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TextIO, TypeVar

import numpy
from sqlalchemy import select
from sqlalchemy.orm import Session

from sextant.graph.formats import Edge, GraphStream, Node, Written, write_graph
from sextant.graph.load import LinkGraph, capsule_labels, load_graph
from sextant.graph.stats import Centrality, centrality
from sextant.store.models import Page

LEVELS = ("page", "capsule")
EDGE_CHUNK = 10_000

Progress = Callable[[int], None]
T = TypeVar("T")


def export_graph(
    session: Session,
    out: TextIO,
    *,
    level: str,
    fmt: str,
    table: str = "all",
    graph: LinkGraph | None = None,
    progress: Progress | None = None,
) -> Written:
    """Write the store's link graph (or ``graph``, read from it before) at ``level`` to ``out``.

    ``progress`` is called now and then with the number of nodes and edges written since.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of {', '.join(LEVELS)}")
    graph = graph if graph is not None else load_graph(session)
    central = centrality(graph)
    stream = (page_stream if level == "page" else capsule_stream)(session, graph, central)
    if progress is not None:
        stream = GraphStream(
            name=stream.name,
            node_attributes=stream.node_attributes,
            nodes=_counted(stream.nodes, progress),
            edges=_counted(stream.edges, progress),
            description=stream.description,
        )
    return write_graph(stream, out, fmt, table=table)


def export_size(graph: LinkGraph, level: str, table: str = "all") -> int:
    """Nodes plus edges an export will write: the length of its progress bar."""
    if level == "page":
        nodes, edges = graph.pages, _unique_pairs(graph.sources, graph.targets, graph.pages)[0].size
    else:
        nodes, edges = graph.capsules, graph.capsule_links()[0].size
    return (nodes if table != "edges" else 0) + (edges if table != "nodes" else 0)


def page_stream(session: Session, graph: LinkGraph, central: Centrality) -> GraphStream:
    names = capsule_labels(session, graph)

    def nodes() -> Iterator[Node]:
        statement = select(
            Page.id, Page.url, Page.title, Page.state, Page.status, Page.mime
        ).order_by(Page.id)
        position = 0
        rows = session.connection().execute(statement.execution_options(yield_per=EDGE_CHUNK))
        for row in rows:
            # Rows and graph.page_ids are both in id order; a page added since the graph
            # was read has no node number and no edges, so it is left out.
            while position < graph.pages and graph.page_ids[position] < row.id:
                position += 1
            if position == graph.pages or graph.page_ids[position] != row.id:
                continue
            yield (
                str(row.id),
                row.url,
                {
                    "title": row.title,
                    "capsule": names[graph.page_capsule[position]],
                    "state": row.state,
                    "status": row.status,
                    "mime": row.mime,
                    "inbound": int(central.page_inbound[position]),
                    "pagerank": float(central.page_rank[position]),
                },
            )

    def edges() -> Iterator[Edge]:
        src, dst, weight = _unique_pairs(graph.sources, graph.targets, graph.pages)
        ids = graph.page_ids
        yield from _id_edges(ids[src], ids[dst], weight)

    return GraphStream(
        name="sextant-pages",
        node_attributes=(
            ("title", "string"),
            ("capsule", "string"),
            ("state", "string"),
            ("status", "int"),
            ("mime", "string"),
            ("inbound", "int"),
            ("pagerank", "float"),
        ),
        nodes=nodes(),
        edges=edges(),
        description=left_out_note(graph),
    )


def capsule_stream(session: Session, graph: LinkGraph, central: Centrality) -> GraphStream:
    names = capsule_labels(session, graph)
    pages = numpy.bincount(graph.page_capsule, minlength=graph.capsules)

    def nodes() -> Iterator[Node]:
        for position, capsule_id in enumerate(graph.capsule_ids.tolist()):
            yield (
                str(capsule_id),
                names[position],
                {
                    "pages": int(pages[position]),
                    "inbound": int(central.capsule_inbound[position]),
                    "pagerank": float(central.capsule_rank[position]),
                },
            )

    def edges() -> Iterator[Edge]:
        src, dst, weight = central.capsule_edges
        yield from _id_edges(graph.capsule_ids[src], graph.capsule_ids[dst], weight)

    return GraphStream(
        name="sextant-capsules",
        node_attributes=(("pages", "int"), ("inbound", "int"), ("pagerank", "float")),
        nodes=nodes(),
        edges=edges(),
        description=left_out_note(graph),
    )


def left_out_note(graph: LinkGraph) -> str:
    """What the export leaves out at its authors' request, for the file and the user."""
    left = graph.left_out
    return (
        f"Left out because robots.txt disallows researcher: {left.pages} pages "
        f"(whole capsules: {left.capsules}), with their links."
    )


def _unique_pairs(
    sources: numpy.ndarray, targets: numpy.ndarray, n: int
) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    keys, counts = numpy.unique(
        sources.astype(numpy.int64) * max(n, 1) + targets, return_counts=True
    )
    return keys // max(n, 1), keys % max(n, 1), counts


def _id_edges(
    sources: numpy.ndarray, targets: numpy.ndarray, weights: numpy.ndarray
) -> Iterator[Edge]:
    # Converted a chunk at a time: tolist() of a million entries at once would be ~100 MB.
    for start in range(0, sources.size, EDGE_CHUNK):
        end = start + EDGE_CHUNK
        for source, target, weight in zip(
            sources[start:end].tolist(),
            targets[start:end].tolist(),
            weights[start:end].tolist(),
            strict=True,
        ):
            yield str(source), str(target), int(weight)


def _counted(items: Iterable[T], progress: Progress, every: int = 1000) -> Iterator[T]:
    pending = 0
    for item in items:
        yield item
        pending += 1
        if pending == every:
            progress(pending)
            pending = 0
    if pending:
        progress(pending)
