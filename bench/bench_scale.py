"""The whole Geminispace on one machine (issue 21): crawl to search-ready, stage by stage.

A generated space shaped like the real one (:mod:`bench.scale_space`: ~600,000 URIs on
~4,200 capsules at full size, a long tail of small capsules, archives of 10,000+ pages, two
pubnixes of 1,000+ ``~user`` directories, gemlogs with feeds, 5 % binaries, traps,
robots.txt, six languages) is served over TLS on loopback (:mod:`bench.scale_server`), and
the production path runs against it as separate processes:

1. ``sextant crawl`` with politeness on (one request at a time per capsule and per address,
   a delay between them; see ``crawl_delay``), 32 requests in flight, from a few seeds;
2. ``sextant index`` (a full build), then ``sextant graph stats``;
3. the naive Whoosh writer of ``bench_index`` on a sample of the same store: docs per CPU
   second against the full build's;
4. a few hundred mixed queries (``bench_capsule``'s mix) through the search API, with a
   fresh and with a warm searcher;
5. the search capsule (``sextant serve``'s supervisor and processes, per-client throttle off
   as all load comes from one address) at concurrency 16, ``bench_capsule``'s client;
6. 1 % of the stored pages changed, then ``sextant index`` again (incremental).

Each stage's wall time, CPU time and peak memory are its own (the largest process's own
high-water mark and the process tree's PSS, both sampled from /proc, so index files mapped
by every capsule process count once; :mod:`bench.peak_rss` says why not ``wait4``'s RSS).
Times of a smaller run are also projected linearly to 600,000
pages (the crawl by its floors instead, see ``crawl_at_full``); a per-page cost that grows
between two sizes is the finding to look for. Run:

    .venv/bin/python -m bench.bench_scale [--quick | --pages N] [--delay S] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_capsule import Server, _tree_cpu_seconds, drive, make_queries, percentile
from bench.bench_capsule import _measure as measure_capsule
from bench.bench_index import naive_build, touch_one_percent
from bench.scale_server import SpaceServer
from bench.scale_space import FULL_PAGES, ScaleSpace
from bench.stage_meter import StageRun, TreePeak, run_stage, tree_pids

ROOT = Path(__file__).resolve().parent.parent
QUICK_PAGES = 5_000
CONCURRENCY = 32
REAL_DELAY = 1.0  # the crawler's default between two requests to one capsule or address
CRAWL_BUDGET = 90 * 60  # of the 2 h to search-ready at full size; the index takes the rest
MAX_PAGES_PER_CAPSULE = 10_000  # the crawler's default
QUERIES = 300
CAPSULE_REQUESTS = 600
NAIVE_PAGES = 5_000
MB = 2**20


def crawl_delay() -> float:
    """The politeness delay: the real 1 s, lowered only as far as 600,000 pages need.

    The busiest address bounds the crawl: its pages one after another, a delay apart. At
    full size that is the biggest capsule (capped at the crawler's 10,000 pages) or a
    pubnix; the delay is what lets it finish within the crawl's share of the 2 h. The same
    delay is used at every size: the shape scales, so the floor is the same share of time.
    """
    busiest = min(ScaleSpace(FULL_PAGES).largest_address_pages(), MAX_PAGES_PER_CAPSULE)
    return min(REAL_DELAY, int(CRAWL_BUDGET / busiest * 20) / 20)  # 0.05 s steps, down


def sextant(data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "sextant", "--data-dir", str(data_dir), *args]


def store_figures(db_path: Path) -> dict[str, float]:
    """What the crawl left: pages by kind, the text the index reads, the store's size."""
    connection = sqlite3.connect(db_path)
    try:
        fetched, ok, text, text_bytes, binaries, max_id = connection.execute(
            "SELECT COUNT(fetched_at), SUM(state = 'ok'),"
            " SUM(state = 'ok' AND body IS NOT NULL),"
            " COALESCE(SUM(CASE WHEN state = 'ok' THEN LENGTH(CAST(body AS BLOB)) END), 0),"
            " SUM(state = 'ok' AND mime NOT LIKE 'text/%'), MAX(id) FROM pages"
        ).fetchone()
        links = connection.execute("SELECT COUNT(*) FROM links").fetchone()[0]
        # The traps' endless URLs and robots.txt's closed paths: what the defences let by.
        trapped, private = connection.execute(
            "SELECT SUM(url LIKE '%/cal/%' OR url LIKE '%/search?%'),"
            " SUM(url LIKE '%/private/%') FROM pages WHERE fetched_at IS NOT NULL"
        ).fetchone()
        capsules = connection.execute("SELECT COUNT(*) FROM capsules").fetchone()[0]
    finally:
        connection.close()
    store = sum(p.stat().st_size for p in db_path.parent.glob(db_path.name + "*"))
    return {
        "pages fetched": float(fetched or 0),
        "pages ok": float(ok or 0),
        "text pages": float(text or 0),
        "binaries": float(binaries or 0),
        "text MB": text_bytes / MB,
        "links": float(links),
        "capsules": float(capsules),
        "trap pages fetched": float(trapped or 0),
        "robots-closed pages fetched": float(private or 0),
        "store MB": store / MB,
        "max page id": float(max_id or 0),
    }


def directory_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / MB


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def query_latencies(index_dir: Path, db_url: str, words: list[str]) -> dict[str, float]:
    """p50/p99 of the mixed queries with a fresh searcher and with one that has served a
    different set drawn the same way (common words' postings decoded and cached)."""
    from indexer.query import Searcher

    rng = random.Random(21)
    queries = make_queries(words, 2 * QUERIES, rng)
    measured, warmup = queries[:QUERIES], queries[QUERIES:]
    figures: dict[str, float] = {}
    found = 0
    for name, before in (("cold", []), ("warm", warmup)):
        searcher = Searcher(index_dir, db_url)
        try:
            for text in before:
                searcher.search(text)
            latencies = []
            for text in measured:
                started = time.perf_counter()
                found += searcher.search(text).total > 0
                latencies.append(time.perf_counter() - started)
        finally:
            searcher.close()
        figures[f"query p50 ms ({name})"] = 1000 * percentile(latencies, 0.50)
        figures[f"query p99 ms ({name})"] = 1000 * percentile(latencies, 0.99)
    figures["queries with results (%)"] = 100 * found / (2 * len(measured))
    return figures


def capsule_load(data_dir: Path, words: list[str]) -> dict[str, float]:
    """The capsule at concurrency 16 after a warm-up and its start-up work, every request
    a new query."""
    from search_capsule.processes import default_process_count
    from sextant.config import Settings

    settings = Settings.load(data_dir=data_dir, db_url=f"sqlite:///{data_dir / 'sextant.db'}")
    queries = make_queries(words, 2 * CAPSULE_REQUESTS, random.Random(16))
    paths = [f"/search?{_quote(q)}" for q in queries]
    me = os.getpid()
    with Server(settings, default_process_count()) as server:
        roots = [pid for pid in tree_pids(me) if _parent(pid) == me]  # each tree once
        with TreePeak(lambda: roots) as peak:
            drive(server.port, paths[:CAPSULE_REQUESTS], 16)
            settled = server.settle()
            outcome = measure_capsule(server, paths[CAPSULE_REQUESTS:], 16)
    latencies = outcome["latencies"]
    return {
        "capsule start-up work s (after the warm-up load)": settled,
        "capsule c16 req/s": len(latencies) / outcome["wall"],
        "capsule c16 p50 ms": 1000 * percentile(latencies, 0.50),
        "capsule c16 p99 ms": 1000 * percentile(latencies, 0.99),
        "capsule c16 failed": float(sum(outcome["failures"].values())),
        "capsule server CPU ms/request": 1000 * outcome["server cpu"] / outcome["requests"],
        "capsule peak PSS MB (all processes)": peak.peak_mb,
        "capsule peak anonymous PSS MB (all processes)": peak.peak_anonymous_mb,
    }


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text)


def _check(stage: StageRun) -> StageRun:
    if stage.returncode != 0:
        raise RuntimeError(f"{stage.name} exited with {stage.returncode}")
    return stage


def run(
    *,
    quick: bool = False,
    pages: int | None = None,
    delay: float | None = None,
    keep: Path | None = None,
) -> dict[str, float | str]:
    pages = pages or (QUICK_PAGES if quick else FULL_PAGES)
    delay = crawl_delay() if delay is None else delay
    root = keep or Path(tempfile.mkdtemp(prefix="sextant-bench-scale-"))
    shutil.rmtree(root / "data", ignore_errors=True)
    data_dir = root / "data"
    data_dir.mkdir(parents=True)
    db_path = data_dir / "sextant.db"
    db_url = f"sqlite:///{db_path}"
    stages: list[StageRun] = []
    figures: dict[str, float | str] = {}
    try:
        started = time.perf_counter()
        server = SpaceServer(pages, processes=2)
        space = server.space
        print(
            f"generated space: {space.pages:,} pages on {len(space.capsules):,} capsules "
            f"(busiest address {space.largest_address_pages():,} pages), served on "
            f"{len(space.capsules):,} loopback addresses in "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
        print(
            f"politeness: --delay {delay} s per capsule and per address (the crawler's "
            f"default is {REAL_DELAY} s; {crawl_delay()} s is what lets the busiest address "
            f"of the 600,000-page space finish in {CRAWL_BUDGET // 60} min), concurrency "
            f"{CONCURRENCY}",
            flush=True,
        )
        seeds = root / "seeds.txt"
        picks = random.Random(5).sample(range(len(space.capsules) - 1), 10)
        seeds.write_text(
            "".join(server.origin(i) + "/\n" for i in [space.aggregator.index, *picks])
        )
        command = sextant(data_dir, "crawl", "--quiet", "--seeds", str(seeds))
        for pin in server.pins():
            command += ["--resolve", pin]
        command += ["--delay", str(delay), "--concurrency", str(CONCURRENCY)]
        command += ["--max-pages-per-capsule", str(MAX_PAGES_PER_CAPSULE)]
        try:
            served = sum(_tree_cpu_seconds(pid) for pid in server.pids())
            crawl = _check(run_stage("crawl", command, ROOT))
            served = sum(_tree_cpu_seconds(pid) for pid in server.pids()) - served
        finally:
            server.close()
        stages.append(crawl)
        store = store_figures(db_path)
        print(
            f"crawl: {store['pages fetched']:,.0f} fetched in {crawl.seconds:,.0f} s "
            f"({store['pages fetched'] / crawl.seconds:,.1f} pages/s), "
            f"peak RSS {crawl.peak_rss_mb:,.0f} MB; the space's server used {served:,.0f} "
            "CPU s of the same two cores",
            flush=True,
        )

        index = _check(run_stage("index (full)", sextant(data_dir, "index", "--json"), ROOT))
        stages.append(index)
        report = json.loads(index.stdout)
        print(f"index: {report['documents']:,} documents in {index.seconds:,.1f} s", flush=True)
        stages.append(
            _check(run_stage("graph stats", sextant(data_dir, "graph", "stats", "--json"), ROOT))
        )

        cpu = cpu_seconds()
        naive_docs, naive_seconds = naive_build(
            db_url, root / "naive", min(NAIVE_PAGES, int(store["pages ok"]))
        )
        naive_cpu = cpu_seconds() - cpu
        shutil.rmtree(root / "naive", ignore_errors=True)

        index_dir = data_dir / "index"
        words = list(space.vocabulary())
        queries = query_latencies(index_dir, db_url, words)
        print(f"queries: {queries}", flush=True)
        capsule = capsule_load(data_dir, words)
        print(f"capsule: {capsule}", flush=True)

        changed = touch_one_percent(db_path, int(store["max page id"]))
        incremental = _check(
            run_stage("index (1% changed)", sextant(data_dir, "index", "--json"), ROOT)
        )
        stages.append(incremental)
        incremental_report = json.loads(incremental.stdout)

        index_mb = directory_mb(index_dir)
        figures.update(
            {
                "pages generated": float(space.pages),
                "capsules generated": float(len(space.capsules)),
                "crawl delay s": delay,
                "busiest address pages": float(space.largest_address_pages()),
                "busiest address pages at 600k": float(
                    ScaleSpace(FULL_PAGES).largest_address_pages()
                ),
                "space server CPU s (during the crawl)": served,
                **store,
                "crawl pages/s": store["pages fetched"] / crawl.seconds,
                "index documents": float(report["documents"]),
                "index MB": index_mb,
                "index / text": index_mb / store["text MB"] if store["text MB"] else 0.0,
                "index docs/s": report["documents"] / index.seconds,
                "index docs per CPU s": report["documents"] / index.cpu,
                "naive docs per CPU s": naive_docs / naive_cpu,
                "naive docs/s": naive_docs / naive_seconds,
                "naive sample pages": float(naive_docs),
                "index vs naive (docs per CPU s, x)": (report["documents"] / index.cpu)
                / (naive_docs / naive_cpu),
                "incremental pages changed": float(changed),
                "incremental pages indexed": float(incremental_report["indexed"]),
                **queries,
                **capsule,
            }
        )
        for stage in stages:
            figures[f"{stage.name} s"] = stage.seconds
            figures[f"{stage.name} CPU s"] = stage.cpu
            figures[f"{stage.name} peak RSS MB"] = stage.peak_rss_mb
            figures[f"{stage.name} peak tree PSS MB"] = stage.peak_tree_mb
            figures[f"{stage.name} peak tree anonymous PSS MB"] = stage.peak_tree_anonymous_mb
        print_table(pages, stages, figures)
        if keep is not None:  # for comparing sizes later
            (root / "figures.json").write_text(json.dumps(figures, indent=1))
        return figures
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def crawl_at_full(figures: dict[str, Any]) -> float:
    """Seconds a 600,000-page crawl would take: the longer of its two floors.

    A linear projection misleads here: a small run's busiest address holds a larger share of
    its pages (its capsules are few), so its crawl is politeness-bound where a full one is
    not. The floors: the busiest address at full size (its pages, capped by the crawler's
    per-capsule limit, one after another at this run's observed interval: the delay plus a
    request), and the crawler's CPU (one process: its CPU per page times 600,000).
    """
    busiest_here = min(figures["busiest address pages"], MAX_PAGES_PER_CAPSULE)
    busiest_full = min(figures["busiest address pages at 600k"], MAX_PAGES_PER_CAPSULE)
    interval = figures["crawl s"] / busiest_here
    politeness = busiest_full * min(interval, figures["crawl delay s"] + 0.25)
    cpu = figures["crawl CPU s"] / max(figures["pages fetched"], 1) * FULL_PAGES
    figures["crawl politeness floor at 600k s"] = politeness
    figures["crawl CPU floor at 600k s"] = cpu
    return max(politeness, cpu)


def print_table(pages: int, stages: list[StageRun], figures: dict[str, Any]) -> None:
    """One table: each stage's costs, then the issue's targets beside the figures.

    Times are projected linearly to 600,000 pages (x600,000/pages fetched) so a small run
    can be read against the targets; superlinear stages make the projection optimistic.
    """
    scale = FULL_PAGES / max(figures["pages fetched"], 1)
    print(
        f"\n## Whole Geminispace ({pages:,} pages asked, {figures['pages fetched']:,.0f} "
        f"fetched; times also projected linearly to {FULL_PAGES:,})\n"
    )
    print(
        "| stage | wall s | CPU s | peak RSS MB (largest) / PSS MB (tree) / anonymous PSS MB "
        "(tree) | ms CPU per page | wall at 600k, min |"
    )
    print("|---|---|---|---|---|---|")
    for stage in stages:
        per_page = 1000 * stage.cpu / max(figures["pages fetched"], 1)
        print(
            f"| {stage.name} | {stage.seconds:,.1f} | {stage.cpu:,.1f} | "
            f"{stage.peak_rss_mb:,.0f} / {stage.peak_tree_mb:,.0f} / "
            f"{stage.peak_tree_anonymous_mb:,.0f} | {per_page:.2f} | "
            f"{stage.seconds * scale / 60:,.1f} |"
        )
    full, incremental = figures["index (full) s"], figures["index (1% changed) s"]
    crawl = crawl_at_full(figures) / scale  # in this run's units, scaled back below
    peak = max(figures[f"{s.name} peak tree PSS MB"] for s in stages)
    rows = [
        (
            "crawl to search-ready at 600k, min",
            (crawl + full) * scale / 60,
            "< 120",
            lambda v: v < 120,
        ),
        ("crawl at 600k (model below), min", crawl * scale / 60, "-", None),
        ("full index at 600k, min", full * scale / 60, "< 30", lambda v: v < 30),
        ("incremental 1 % at 600k, min", incremental * scale / 60, "< 3", lambda v: v < 3),
        ("index on disk / text indexed", figures["index / text"], "<= 1.5", lambda v: v <= 1.5),
        ("peak memory of any stage (tree PSS), MB", peak, "< 1024", lambda v: v < 1024),
        ("crawler peak RSS, MB", figures["crawl peak RSS MB"], "< 300", lambda v: v < 300),
        ("query p99 warm, ms", figures["query p99 ms (warm)"], "<= 50", lambda v: v <= 50),
        ("query p99 cold, ms", figures["query p99 ms (cold)"], "-", None),
        ("capsule p99 at c16, ms", figures["capsule c16 p99 ms"], "<= 100", lambda v: v <= 100),
        (
            "index docs per CPU s vs naive Whoosh",
            figures["index vs naive (docs per CPU s, x)"],
            ">= 3",
            lambda v: v >= 3,
        ),
    ]
    print("\n| figure | value | target | verdict |\n|---|---|---|---|")
    for name, value, target, meets in rows:
        verdict = "-" if meets is None else ("meets" if meets(value) else "MISSES")
        print(f"| {name} | {value:,.2f} | {target} | {verdict} |")
    print("\n| other figure | value |\n|---|---|")
    for key in (
        "pages generated",
        "capsules",
        "crawl delay s",
        "pages ok",
        "binaries",
        "text MB",
        "store MB",
        "index MB",
        "links",
        "crawl pages/s",
        "crawl politeness floor at 600k s",
        "crawl CPU floor at 600k s",
        "space server CPU s (during the crawl)",
        "trap pages fetched",
        "robots-closed pages fetched",
        "index docs/s",
        "index docs per CPU s",
        "naive docs per CPU s",
        "naive sample pages",
        "query p50 ms (warm)",
        "query p50 ms (cold)",
        "queries with results (%)",
        "capsule start-up work s (after the warm-up load)",
        "capsule c16 req/s",
        "capsule c16 p50 ms",
        "capsule c16 failed",
        "capsule server CPU ms/request",
        "capsule peak PSS MB (all processes)",
        "capsule peak anonymous PSS MB (all processes)",
        "incremental pages changed",
        "incremental pages indexed",
    ):
        value = figures[key]
        print(f"| {key} | {value:,.2f} |" if isinstance(value, float) else f"| {key} | {value} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PAGES:,} pages")
    parser.add_argument("--pages", type=int, default=None, help=f"[{FULL_PAGES:,}]")
    parser.add_argument("--delay", type=float, default=None, help="politeness delay, s")
    parser.add_argument("--keep", type=Path, default=None, help="keep the store and index here")
    args = parser.parse_args()
    run(quick=args.quick, pages=args.pages, delay=args.delay, keep=args.keep)


if __name__ == "__main__":
    main()
