"""Link-graph statistics and PageRank on a generated Geminispace: seconds and peak memory.

Issue 6's target: stats and PageRank on 100,000 pages and 1,000,000 links in under 30 s
and 1 GB. Run:

    .venv/bin/python -m bench.bench_graph [--quick] [--pages N] [--links N] [--keep DIR]

The store is generated (seeded) straight into SQLite through the schema's migrations:
capsules of very uneven size, 75% of links inside their capsule, cross-capsule links
drawn with a heavy tail (a few capsules attract most links, as in any web), 5% links to
other schemes. The measuring runs in a fresh subprocess, so its peak RSS is the cost of
``sextant graph stats`` alone and not of generating the data.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy

FULL = (100_000, 1_000_000)
QUICK = (10_000, 100_000)
NOW = datetime(2025, 1, 1).isoformat(sep=" ")
STATES = [("ok", 20), ("new", None), ("redirect", 31), ("error", 44), ("gone", 51)]
STATE_SHARE = [0.86, 0.05, 0.03, 0.03, 0.03]
MIMES = ["text/gemini", "text/plain", "image/png", "application/pdf", "text/x-markdown"]
MIME_SHARE = [0.88, 0.05, 0.04, 0.02, 0.01]
LANGS = ["en", "de", "fr", "es", "ja", "ru", None]
LANG_SHARE = [0.62, 0.08, 0.07, 0.06, 0.04, 0.03, 0.10]


def generate(path: Path, pages: int, links: int, seed: int = 6) -> None:
    """Fill a migrated SQLite store at ``path`` with a seeded synthetic link graph."""
    from sextant.store.migrate import open_store

    open_store(f"sqlite:///{path}").dispose()  # the real schema, through Alembic
    rng = numpy.random.default_rng(seed)
    capsules = max(pages // 50, 1)
    weights = rng.pareto(1.2, capsules) + 1  # a few huge capsules, many tiny ones
    capsule_of = numpy.sort(rng.choice(capsules, size=pages, p=weights / weights.sum()))
    starts = numpy.searchsorted(capsule_of, numpy.arange(capsules))
    sizes = numpy.bincount(capsule_of, minlength=capsules)

    connection = sqlite3.connect(path)
    connection.execute("PRAGMA synchronous=OFF")
    with connection:
        connection.executemany(
            "INSERT INTO capsules (id, host, port, display_host, first_seen_at,"
            " consecutive_failures, last_success_at, tls_fingerprint, tls_version,"
            " tls_key_type, tls_self_signed, tls_not_after) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            _capsule_rows(rng, capsules),
        )
        connection.executemany(
            "INSERT INTO pages (id, url, capsule_id, scope, depth, state, status, mime, lang,"
            " charset, size, title, discovered_at, updated_at, fetched_at, charset_detected,"
            " truncated, possibly_truncated, change_count, consecutive_failures)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,0,0,0,0)",
            _page_rows(rng, capsule_of, starts),
        )
        connection.executemany(
            "INSERT INTO links (source_id, target_url, target_id, target_scheme, label,"
            " position, cross_capsule, first_seen_at) VALUES (?,?,?,?,'',?,?,?)",
            _link_rows(rng, links, capsule_of, starts, sizes),
        )
    connection.close()


def _capsule_rows(rng: numpy.random.Generator, capsules: int) -> Iterator[tuple[object, ...]]:
    versions = rng.choice(["TLSv1.3", "TLSv1.2"], size=capsules, p=[0.8, 0.2])
    keys = rng.choice(
        ["EC P-256", "RSA 2048", "RSA 4096", "Ed25519"], capsules, p=[0.5, 0.3, 0.15, 0.05]
    )
    self_signed = rng.random(capsules) < 0.85
    days = rng.integers(-200, 3000, capsules)
    for c in range(capsules):
        not_after = datetime.fromordinal(datetime(2025, 1, 1).toordinal() + int(days[c]))
        yield (
            c + 1,
            f"c{c}.example",
            1965,
            f"c{c}.example",
            NOW,
            0,
            NOW,
            f"{c:064x}",
            str(versions[c]),
            str(keys[c]),
            bool(self_signed[c]),
            not_after.isoformat(sep=" "),
        )


def _page_rows(
    rng: numpy.random.Generator, capsule_of: numpy.ndarray, starts: numpy.ndarray
) -> Iterator[tuple[object, ...]]:
    n = capsule_of.size
    state = rng.choice(len(STATES), size=n, p=STATE_SHARE)
    mime = rng.choice(len(MIMES), size=n, p=MIME_SHARE)
    lang = rng.choice(len(LANGS), size=n, p=LANG_SHARE)
    size = rng.lognormal(8, 1.5, n).astype(numpy.int64)
    for i in range(n):
        c = int(capsule_of[i])
        name, status = STATES[state[i]]
        ok = name == "ok"
        is_text = ok and MIMES[mime[i]].startswith("text/")
        yield (
            i + 1,
            f"gemini://c{c}.example/p{i}.gmi",
            c + 1,
            f"c{c}.example",
            0 if i == starts[c] else 1,
            name,
            status,
            MIMES[mime[i]] if ok else None,
            LANGS[lang[i]] if is_text else None,
            "utf-8" if is_text else None,
            int(size[i]) if ok else None,
            f"Page {i} of c{c}" if is_text else None,
            NOW,
            NOW,
            NOW if name != "new" else None,
        )


def _link_rows(
    rng: numpy.random.Generator,
    links: int,
    capsule_of: numpy.ndarray,
    starts: numpy.ndarray,
    sizes: numpy.ndarray,
) -> Iterator[tuple[object, ...]]:
    n = capsule_of.size
    sources = numpy.sort(rng.integers(0, n, links))
    kind = rng.random(links)
    within = starts[capsule_of[sources]] + (rng.random(links) * sizes[capsule_of[sources]]).astype(
        numpy.int64
    )
    popular = rng.permutation(n)  # heavy tail: a Zipf draw picks a page by popularity rank
    across = popular[numpy.minimum(rng.zipf(1.6, links) - 1, n - 1)]
    targets = numpy.where(kind < 0.75, within, across)
    for k in range(links):
        source = int(sources[k]) + 1
        if kind[k] >= 0.95:
            scheme = "https" if kind[k] < 0.985 else "gopher"
            yield (source, f"{scheme}://elsewhere.example/{k}", None, scheme, k % 50, False, NOW)
            continue
        t = int(targets[k])
        cross = bool(capsule_of[t] != capsule_of[source - 1])
        url = f"gemini://c{capsule_of[t]}.example/p{t}.gmi"
        yield (source, url, t + 1, "gemini", k % 50, cross, NOW)


def measure(path: Path) -> dict[str, float | str]:
    """Run in a fresh process: time census, graph stats and PageRank, then an export."""
    from sextant.census import census
    from sextant.graph.export import export_graph
    from sextant.graph.load import load_graph
    from sextant.graph.stats import graph_stats
    from sextant.pagerank import pagerank
    from sextant.store import session_factory
    from sextant.store.migrate import open_store

    sessions = session_factory(open_store(f"sqlite:///{path}"))
    figures: dict[str, float | str] = {}
    with sessions() as session:
        start = time.perf_counter()
        census(session)
        census_seconds = time.perf_counter() - start
        start = time.perf_counter()
        graph = load_graph(session)
        load_seconds = time.perf_counter() - start
        start = time.perf_counter()
        pagerank(graph.pages, graph.sources, graph.targets)
        figures["PageRank alone (s)"] = time.perf_counter() - start
        start = time.perf_counter()
        graph_stats(session, graph)  # PageRank again, components, reach, top lists
        stats_seconds = time.perf_counter() - start
        figures["census (s)"] = census_seconds
        figures["load graph (s)"] = load_seconds
        figures["graph stats on loaded graph (s)"] = stats_seconds
        figures["stats + PageRank total (s)"] = census_seconds + load_seconds + stats_seconds
        figures["peak RSS stats (MB)"] = _peak_rss_mb()
        start = time.perf_counter()
        with open(path.with_suffix(".graphml"), "w", encoding="utf-8") as out:
            written = export_graph(session, out, level="page", fmt="graphml", graph=graph)
        figures["export page GraphML (s)"] = time.perf_counter() - start
        figures["exported edges (distinct pairs)"] = f"{written.edges:,}"
        figures["peak RSS after export (MB)"] = _peak_rss_mb()
    return figures


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run(
    *,
    quick: bool = False,
    pages: int | None = None,
    links: int | None = None,
    keep: Path | None = None,
) -> dict[str, float | str]:
    default_pages, default_links = QUICK if quick else FULL
    pages, links = pages or default_pages, links or default_links
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as scratch:
        directory = keep or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "graph.db"
        path.unlink(missing_ok=True)
        start = time.perf_counter()
        generate(path, pages, links)
        generated = time.perf_counter() - start
        child = subprocess.run(
            [sys.executable, "-m", "bench.bench_graph", "--measure", str(path)],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        figures: dict[str, float | str] = {
            "pages": f"{pages:,}",
            "links": f"{links:,}",
            "generate store (s)": generated,
        }
        figures.update(json.loads(child.stdout.strip().splitlines()[-1]))
    total = figures["stats + PageRank total (s)"]
    peak = figures["peak RSS stats (MB)"]
    met = isinstance(total, float) and isinstance(peak, float) and total < 30 and peak < 1024
    figures["target met (<30 s, <1 GB)"] = "yes" if met else "NO"
    report = io.StringIO()
    for key, value in figures.items():
        shown = f"{value:,.3f}" if isinstance(value, float) else value
        print(f"{key:<36} {shown}", file=report)
    print(report.getvalue(), end="")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pages", type=int)
    parser.add_argument("--links", type=int)
    parser.add_argument("--keep", type=Path, help="generate the store in DIR and keep it")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    run(quick=args.quick, pages=args.pages, links=args.links, keep=args.keep)


if __name__ == "__main__":
    main()
