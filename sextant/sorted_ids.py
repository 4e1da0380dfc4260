"""Where ids sit in a sorted array of ids: the lookup link analysis, graph loading and the
search evaluator all make, over millions of ids at a time."""

from __future__ import annotations

import numpy


def index_in_sorted(sorted_ids: numpy.ndarray, ids: numpy.ndarray) -> numpy.ndarray:
    """The place of each of ``ids`` in ``sorted_ids`` (ascending, unique), -1 for ids not
    among them.

    One vectorised binary search for a whole chunk of ids: a graph's nodes are its page ids
    in ascending order, and a dictionary of page ids would cost more than the graph itself."""
    if len(sorted_ids) == 0:
        return numpy.full(len(ids), -1, dtype=numpy.int64)
    at = numpy.minimum(numpy.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return numpy.where(sorted_ids[at] == ids, at, -1)
