"""Page ids to node numbers: a graph's nodes are its page ids in ascending order."""

from __future__ import annotations

import numpy


def node_numbers(page_ids: numpy.ndarray, ids: numpy.ndarray) -> numpy.ndarray:
    """The place of each of ``ids`` in the sorted ``page_ids``, -1 for ids not among them.

    One vectorised search for a whole chunk of ids: the link graph at full size has millions
    of them, and a dictionary of page ids would cost more than the graph itself."""
    if len(page_ids) == 0:
        return numpy.full(len(ids), -1, dtype=numpy.int64)
    at = numpy.searchsorted(page_ids, ids)
    at_clipped = numpy.minimum(at, len(page_ids) - 1)
    return numpy.where(page_ids[at_clipped] == ids, at_clipped, -1)
