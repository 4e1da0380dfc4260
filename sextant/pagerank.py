"""PageRank by sparse power iteration: the one implementation the indexer and `sextant graph` share.

The model is the classic random surfer (Page & Brin 1998, as networkx computes it): with
probability ``damping`` follow an out-link, chosen in proportion to its weight; otherwise jump
to a page chosen uniformly. A page without out-links (a dangling page: a binary file, an
unfetched URL) would swallow the surfer, so its mass is spread uniformly over every page, which
keeps the result a probability distribution.

Scale: the transition matrix is CSR, so one iteration is one sparse matrix-vector product;
100,000 pages and 1,000,000 links take well under a second (bench/bench_graph.py).
"""

from __future__ import annotations

import numpy
from scipy import sparse


def pagerank(
    n: int,
    sources: numpy.ndarray,
    targets: numpy.ndarray,
    weights: numpy.ndarray | None = None,
    *,
    damping: float = 0.85,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> numpy.ndarray:
    """PageRank of nodes ``0..n-1`` given edges ``sources[i] -> targets[i]``.

    Duplicate edges add their weights (two links from one page to another count twice);
    each node's out-weights are normalized to sum to one; a node whose out-weights sum to
    zero is dangling. Iteration stops when the L1 change falls below ``tol`` (or after
    ``max_iter`` rounds; with ``damping`` < 1 the error shrinks by at least that factor per
    round, so the default 200 rounds reach ~1e-14 at 0.85). The result sums to 1.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 <= damping <= 1.0:
        raise ValueError(f"damping must be within [0, 1], got {damping}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    src = numpy.asarray(sources).ravel()
    dst = numpy.asarray(targets).ravel()
    if src.shape != dst.shape:
        raise ValueError(f"sources and targets differ in length ({src.size} != {dst.size})")
    if weights is None:
        w = numpy.ones(src.size, dtype=numpy.float64)
    else:
        w = numpy.asarray(weights, dtype=numpy.float64).ravel()
        if w.shape != src.shape:
            raise ValueError(f"weights has {w.size} entries for {src.size} edges")
        if not numpy.all(numpy.isfinite(w)) or numpy.any(w < 0):
            raise ValueError("weights must be finite and non-negative")
    if src.size and not (
        numpy.issubdtype(src.dtype, numpy.integer) and numpy.issubdtype(dst.dtype, numpy.integer)
    ):
        raise ValueError("sources and targets must be integer node numbers")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ValueError(f"edge endpoints must be node numbers in [0, {n})")
    if n == 0:
        return numpy.empty(0, dtype=numpy.float64)

    # COO -> CSR sums duplicate (source, target) pairs, which is the multigraph semantics wanted.
    matrix = sparse.coo_matrix((w, (src, dst)), shape=(n, n)).tocsr()
    out_weight = numpy.asarray(matrix.sum(axis=1)).ravel()
    dangling = out_weight == 0
    inverse = numpy.zeros(n)
    inverse[~dangling] = 1.0 / out_weight[~dangling]
    # Row-stochastic P, transposed once so each round is a single CSR product P^T x.
    transition_t = (sparse.diags(inverse) @ matrix).T.tocsr()

    x = numpy.full(n, 1.0 / n)
    teleport = (1.0 - damping) / n
    for _ in range(max_iter):
        spread = damping * x[dangling].sum() / n
        new = damping * (transition_t @ x) + (spread + teleport)
        new /= new.sum()  # rounding drift only; the update preserves mass exactly in theory
        error = numpy.abs(new - x).sum()
        x = new
        if error < tol:
            break
    return x
