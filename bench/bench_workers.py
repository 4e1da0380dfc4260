"""How much faster do 2 and 4 ``sextant crawl --worker`` processes crawl than one?

One PostgreSQL store, one generated Geminispace served from a separate process on loopback
(every capsule on its own 127.2.x.y address, TLS with a fresh connection per request; the
space of :mod:`bench.bench_crawl`, whose pages also link to the next capsule, so workers
discover each other's pages). For 1, 2 and 4 workers: a fresh database, then N workers
started at once with the same seeds file (one root per capsule), ``--delay 0.1`` so that
politeness holds as it would for real capsules, until every worker has stopped by itself.

Figures per N: pages fetched, pages/s over the crawl (from the first worker's start to the
last one's end, as the ``runs`` table records them; interpreter start-up excluded), wall
seconds, the pages each worker fetched (how evenly the frontier was shared), and pages
fetched more than once (must be 0: one fetch attempt per page).

PostgreSQL: ``SEXTANT_TEST_PG_URL`` if set, else the throwaway server of ``.ci/postgres.sh``.
Run: ``.venv/bin/python -m bench.bench_workers [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

from bench.bench_crawl import SpaceProcess
from sextant.store import FetchAttempt, Page, Run, make_engine
from sextant.store.migrate import upgrade
from tests.databases import PG_URL_ENV, create_postgres_database, drop_postgres_database

ROOT = Path(__file__).resolve().parent.parent
WORKER_COUNTS = (1, 2, 4)
START_KINDS = ("frontier", "seeds")
DELAY = 0.1
CONCURRENCY = 32


def ensure_postgres() -> None:
    """Point ``SEXTANT_TEST_PG_URL`` at a server, starting the throwaway one if needed."""
    if os.environ.get(PG_URL_ENV):
        return
    script = subprocess.run(
        [str(ROOT / ".ci" / "postgres.sh")], capture_output=True, text=True, check=True
    )
    name, _, value = script.stdout.strip().removeprefix("export ").partition("=")
    os.environ[name] = value


def worker_command(store_url: str, data_dir: Path, seeds: Path, pins: list[str]) -> list[str]:
    command = [sys.executable, "-m", "sextant", "--db-url", store_url, "--data-dir", str(data_dir)]
    command += ["crawl", "--worker", "--quiet", "--seeds", str(seeds)]
    for pin in pins:
        command += ["--resolve", pin]
    return [*command, "--delay", str(DELAY), "--concurrency", str(CONCURRENCY)]


def crawl_with(
    workers: int, server: SpaceProcess, work: Path, *, every_page: bool
) -> dict[str, float | str]:
    """N workers over a fresh store; what they fetched and how fast. ``every_page``: all
    pages are seeds (a frontier in full swing), else one root per capsule (a first crawl)."""
    store_url = create_postgres_database()
    try:
        engine = make_engine(store_url)
        upgrade(engine)
        space = server.space
        seeds = work / "seeds.txt"
        paths = ["/", *(f"/p/{n}" for n in range(space.pages))] if every_page else ["/"]
        seeds.write_text(
            "".join(space.url(i, path) + "\n" for i in range(space.capsules) for path in paths)
        )
        command = worker_command(store_url, work / f"data-{workers}", seeds, server.pins())
        started = time.perf_counter()
        processes = [
            subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for _ in range(workers)
        ]
        for process in processes:
            _, err = process.communicate()
            if process.returncode != 0:
                raise RuntimeError(f"a worker exited with {process.returncode}: {err.decode()}")
        wall = time.perf_counter() - started
        with engine.connect() as conn:
            fetched = conn.execute(
                select(func.count()).select_from(Page).where(Page.fetched_at.is_not(None))
            ).scalar_one()
            attempts = conn.execute(
                select(FetchAttempt.page_id, func.count())
                .group_by(FetchAttempt.page_id)
                .having(func.count() > 1)
            ).all()
            runs = conn.execute(
                select(Run.started_at, Run.finished_at, Run.stats).where(Run.kind == "crawl")
            ).all()
        engine.dispose()
    finally:
        drop_postgres_database(store_url)
    span = (max(r.finished_at for r in runs) - min(r.started_at for r in runs)).total_seconds()
    shares = sorted((int(json.loads(r.stats)["pages"]) for r in runs), reverse=True)
    return {
        "pages": float(fetched),
        "crawl_seconds": span,
        "pages_per_second": fetched / span,
        "wall_seconds": wall,
        "pages_per_worker": " / ".join(str(share) for share in shares),
        "fetched_twice": float(len(attempts)),
    }


def run(*, quick: bool = False) -> dict[str, float | str]:
    ensure_postgres()
    capsules, pages = (150, 12) if quick else (500, 24)
    figures: dict[str, float | str] = {
        "space": f"{capsules} capsules x {pages} pages, delay {DELAY:g} s"
    }
    server = SpaceProcess(capsules, pages)
    results: dict[tuple[str, int], dict[str, float | str]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="sextant-bench-workers-") as tmp:
            for start in START_KINDS:
                for workers in WORKER_COUNTS:
                    every_page = start == "frontier"
                    outcome = crawl_with(workers, server, Path(tmp), every_page=every_page)
                    results[(start, workers)] = outcome
    finally:
        server.close()
    print(f"generated space: {figures['space']}, one PostgreSQL, on {os.cpu_count()} cores")
    print(
        f"{'start':>8}  {'workers':>7}  {'pages':>6}  {'pages/s':>7}  {'speed-up':>8}  "
        f"{'wall s':>6}  pages per worker"
    )
    for (start, workers), result in results.items():
        rate = float(result["pages_per_second"])
        base = float(results[(start, 1)]["pages_per_second"])
        twice = result["fetched_twice"]
        print(
            f"{start:>8}  {workers:>7}  {result['pages']:>6.0f}  {rate:>7.0f}  "
            f"{rate / base:>7.2f}x  {result['wall_seconds']:>6.1f}  {result['pages_per_worker']}"
            + (f"  ({twice:.0f} fetched twice!)" if twice else "")
        )
        key = f"{start}_{workers}_workers"
        figures[f"{key}_pages_per_second"] = rate
        figures[f"{key}_speedup"] = rate / base
        figures[f"{key}_pages_per_worker"] = result["pages_per_worker"]
        figures[f"{key}_fetched_twice"] = twice
    print(
        "start: 'frontier' = every page queued up front (a crawl in full swing, or a recrawl); "
        "'seeds' = one root per capsule, links found as the crawl goes"
    )
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    run(quick=parser.parse_args().quick)
