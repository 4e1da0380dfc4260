"""How fast does the crawler go where politeness allows, and how little memory does it need?

Three measurements against one generated Geminispace served from a separate process on
loopback (every capsule on its own 127.2.x.y address, TLS with a fresh connection per request
as Gemini requires):

1. ``sextant crawl`` (a real subprocess, delay 0, concurrency 32) over 200 capsules × 100
   pages from one seed per capsule: pages/s, CPU seconds per page and peak RSS (the
   crawler's own: :mod:`bench.peak_rss` says why not ``wait4``'s);
2. a bare loop that only does TLS request/response against the same server with the same
   concurrency, run just before and just after the crawl: the ceiling the server and TLS
   allow, and the ratio crawler/bare against their mean (target >= 0.5 on two cores);
3. peak RSS of ``sextant crawl`` working on a generated frontier of 1,000,000 URLs
   (target < 300 MB): the frontier lives in the database, RAM holds a bounded window;
   and the time of one 50-row claim on it against one on 1,000 URLs (a bounded prefix of
   the due index: about the same; the unit test counts SQLite's steps instead of time).

Run: ``.venv/bin/python -m bench.bench_crawl [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import trio
from sqlalchemy import func, insert, select

from bench.peak_rss import run_measured
from crawler.frontier import Frontier
from gemserve.server import Request, Response, ServerLimits, serve
from sextant.store import Capsule, FrontierEntry, Page, utcnow
from sextant.store.migrate import open_store
from sextant.tls import client_context, make_self_signed, server_context_from_pem

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 32
LINKS_PER_PAGE = 5
_SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "ve", "zu", "an", "or", "el")


# --- the generated space (server process) --------------------------------------------------


def address_of(index: int) -> str:
    return f"127.2.{index // 250}.{index % 250 + 1}"


def host_of(index: int) -> str:
    return f"c{index}.bench.test"


@dataclass(frozen=True)
class Space:
    capsules: int
    pages: int
    ports: dict[str, int]  # host -> port

    def url(self, index: int, path: str) -> str:
        return f"gemini://{host_of(index)}:{self.ports[host_of(index)]}{path}"


def _bodies(pages: int) -> list[str]:
    rng = random.Random(1965)
    return [
        " ".join(
            "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(80)
        )
        for _ in range(pages)
    ]


def make_app(space: Space) -> Any:
    bodies = _bodies(space.pages)
    rng = random.Random(7)
    targets = [
        sorted({(n + 1) % space.pages} | {rng.randrange(space.pages) for _ in range(4)})
        for n in range(space.pages)
    ]
    index_of = {host_of(i): i for i in range(space.capsules)}

    async def app(request: Request) -> Response:
        capsule = index_of.get(request.url.host)
        path = request.url.path
        if capsule is None:
            return Response.not_found()
        if path == "/":
            number = 0
        elif path.startswith("/p/") and path[3:].isdigit() and int(path[3:]) < space.pages:
            number = int(path[3:])
        else:
            return Response.not_found()  # robots.txt too: 51 means "allow all"
        neighbour = space.url((capsule + 1) % space.capsules, f"/p/{number}")
        links = "".join(f"=> /p/{target} Page {target}\n" for target in targets[number])
        text = (
            f"# Capsule {capsule}, page {number}\n\n{bodies[number]}\n\n{links}"
            f"=> {neighbour} A neighbour\n"
        )
        return Response.gemtext(text, lang="en")

    return app


async def _serve_space(capsules: int, pages: int, pipe: Connection) -> None:
    context = server_context_from_pem(*make_self_signed(["bench.test"]))
    limits = ServerLimits(max_connections=1024)
    ports: dict[str, int] = {}
    app_holder: list[Any] = []

    async def dispatch(request: Request) -> Response:
        return await app_holder[0](request)

    async with trio.open_nursery() as nursery:
        for index in range(capsules):
            ports[host_of(index)] = await nursery.start(
                partial(
                    serve,
                    dispatch,
                    host=address_of(index),
                    port=0,
                    ssl_context=context,
                    limits=limits,
                )
            )
        space = Space(capsules, pages, ports)
        app_holder.append(make_app(space))
        pipe.send(ports)


def serve_space(capsules: int, pages: int, pipe: Connection) -> None:
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_serve_space, capsules, pages, pipe)


class SpaceProcess:
    def __init__(self, capsules: int, pages: int) -> None:
        parent, child = multiprocessing.Pipe()
        self.process = multiprocessing.Process(
            target=serve_space, args=(capsules, pages, child), daemon=True
        )
        self.process.start()
        if not parent.poll(60):
            raise RuntimeError("the generated space did not start")
        self.space = Space(capsules, pages, parent.recv())

    def pins(self) -> list[str]:
        return [
            f"{host_of(i)}:{self.space.ports[host_of(i)]}:{address_of(i)}"
            for i in range(self.space.capsules)
        ]

    def close(self) -> None:
        self.process.terminate()
        self.process.join(10)


# --- measuring a crawl subprocess ------------------------------------------------------------


@dataclass(frozen=True)
class ChildRun:
    seconds: float
    cpu: float
    peak_rss_mb: float
    returncode: int


def run_child(command: list[str]) -> ChildRun:
    measured = run_measured(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    return ChildRun(
        seconds=measured.seconds,
        cpu=measured.cpu_seconds,
        peak_rss_mb=measured.peak_rss_mb,
        returncode=measured.returncode,
    )


def crawl_command(data_dir: Path, pins: list[str], *args: str) -> list[str]:
    command = [sys.executable, "-m", "sextant", "--data-dir", str(data_dir), "crawl", "--quiet"]
    for pin in pins:
        command += ["--resolve", pin]
    return [*command, "--delay", "0", "--concurrency", str(CONCURRENCY), *args]


def crawl_space(server: SpaceProcess, work: Path) -> dict[str, float]:
    space = server.space
    seeds = work / "seeds.txt"
    seeds.write_text("".join(space.url(i, "/") + "\n" for i in range(space.capsules)))
    data_dir = work / "crawl"
    child = run_child(crawl_command(data_dir, server.pins(), "--seeds", str(seeds)))
    if child.returncode != 0:
        raise RuntimeError(f"sextant crawl exited with {child.returncode}")
    engine = open_store(f"sqlite:///{data_dir / 'sextant.db'}")
    with engine.connect() as conn:
        fetched = conn.execute(
            select(func.count()).select_from(Page).where(Page.fetched_at.is_not(None))
        ).scalar_one()
    engine.dispose()
    return {
        "pages": float(fetched),
        "seconds": child.seconds,
        "pages_per_second": fetched / child.seconds,
        "cpu_per_page_ms": 1000 * child.cpu / fetched,
        "peak_rss_mb": child.peak_rss_mb,
    }


# --- the bare loop ---------------------------------------------------------------------------


async def _bare_loop(server: SpaceProcess, requests: int) -> float:
    space = server.space
    context = client_context()
    rng = random.Random(3)
    targets = [(rng.randrange(space.capsules), rng.randrange(space.pages)) for _ in range(requests)]
    send, receive = trio.open_memory_channel[tuple[int, int]](len(targets))
    for target in targets:
        send.send_nowait(target)
    send.close()

    async def worker() -> None:
        async for capsule, number in receive:
            host = host_of(capsule)
            tcp = await trio.open_tcp_stream(address_of(capsule), space.ports[host])
            stream = trio.SSLStream(tcp, context, server_hostname=host)
            try:
                await stream.send_all(f"{space.url(capsule, f'/p/{number}')}\r\n".encode())
                while await stream.receive_some(65536):
                    pass
            except trio.BrokenResourceError:
                pass
            finally:
                await trio.aclose_forcefully(stream)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):
            nursery.start_soon(worker)
    return requests / (time.perf_counter() - started)


def bare_loop(server: SpaceProcess, requests: int) -> float:
    return trio.run(_bare_loop, server, requests)


# --- a million-URL frontier ------------------------------------------------------------------


def generate_frontier(server: SpaceProcess, data_dir: Path, urls: int) -> float:
    """A store whose frontier holds ``urls`` due rows spread over the space's capsules."""
    started = time.perf_counter()
    space = server.space
    engine = open_store(f"sqlite:///{data_dir / 'sextant.db'}")
    now = utcnow() - timedelta(minutes=1)
    per_capsule = urls // space.capsules
    with engine.begin() as conn:
        conn.execute(
            insert(Capsule),
            [
                {
                    "id": i + 1,
                    "host": host_of(i),
                    "port": space.ports[host_of(i)],
                    "display_host": host_of(i),
                    "first_seen_at": now,
                    "consecutive_failures": 0,
                }
                for i in range(space.capsules)
            ],
        )
    batch = 50_000
    page_id = 0
    for start in range(0, per_capsule * space.capsules, batch):
        pages, rows = [], []
        for n in range(start, min(start + batch, per_capsule * space.capsules)):
            capsule = n % space.capsules
            page_id += 1
            url = space.url(capsule, f"/x/{n}")
            authority = url.split("/")[2]
            pages.append(
                {
                    "id": page_id,
                    "url": url,
                    "capsule_id": capsule + 1,
                    "scope": authority,
                    "depth": 1,
                    "state": "new",
                    "discovered_at": now,
                    "updated_at": now,
                    "charset_detected": False,
                    "truncated": False,
                    "possibly_truncated": False,
                    "change_count": 0,
                    "consecutive_failures": 0,
                }
            )
            rows.append(
                {
                    "page_id": page_id,
                    "capsule_id": capsule + 1,
                    "due_at": now,
                    "priority": 0,
                    "depth": 1,
                    "reason": "link",
                    "attempts": 0,
                    "redirects": 0,
                    "enqueued_at": now,
                }
            )
        with engine.begin() as conn:
            conn.execute(insert(Page), pages)
            conn.execute(insert(FrontierEntry), rows)
    engine.dispose()
    return time.perf_counter() - started


def claim_ms(data_dir: Path) -> float:
    """Milliseconds for one 50-row claim, the crawler's first query on a frontier; the rows
    are given back, so the crawl that follows starts from the same frontier."""
    engine = open_store(f"sqlite:///{data_dir / 'sextant.db'}")
    frontier = Frontier(engine, "bench")
    started = time.perf_counter()
    frontier.claim(50)
    seconds = time.perf_counter() - started
    frontier.release_all()
    engine.dispose()
    return seconds * 1e3


def big_frontier(server: SpaceProcess, work: Path, urls: int, seconds: float) -> dict[str, float]:
    data_dir = work / "frontier"
    generate_frontier(server, work / "small-frontier", 1_000)
    small_claim = claim_ms(work / "small-frontier")
    generated = generate_frontier(server, data_dir, urls)
    large_claim = claim_ms(data_dir)
    child = run_child(
        crawl_command(data_dir, server.pins(), "--max-time", str(seconds), "--max-depth", "50")
    )
    if child.returncode != 0:
        raise RuntimeError(f"sextant crawl exited with {child.returncode}")
    engine = open_store(f"sqlite:///{data_dir / 'sextant.db'}")
    with engine.connect() as conn:
        fetched = conn.execute(
            select(func.count()).select_from(Page).where(Page.fetched_at.is_not(None))
        ).scalar_one()
        left = conn.execute(select(func.count()).select_from(FrontierEntry)).scalar_one()
    engine.dispose()
    return {
        "frontier_urls": float(urls),
        "frontier_generation_s": generated,
        "frontier_crawl_peak_rss_mb": child.peak_rss_mb,
        "frontier_pages_fetched": float(fetched),
        "frontier_left": float(left),
        "claim_50_ms_on_1000_urls": small_claim,
        "claim_50_ms_on_frontier": large_claim,
    }


# --- the benchmark -----------------------------------------------------------------------


def run(*, quick: bool = False) -> dict[str, float | str]:
    capsules, pages = (60, 25) if quick else (200, 100)
    frontier_urls = 100_000 if quick else 1_000_000
    figures: dict[str, float | str] = {"space": f"{capsules} capsules x {pages} pages"}
    server = SpaceProcess(capsules, pages)
    try:
        with tempfile.TemporaryDirectory(prefix="sextant-bench-crawl-") as tmp:
            work = Path(tmp)
            # The bare loop runs just before and just after the crawl, and the ratio uses
            # their mean: on a shared machine the speed drifts between runs, and bracketing
            # the crawl keeps that drift out of the ratio.
            requests = 2_000 if quick else 10_000
            bare_before = bare_loop(server, requests)
            crawl = crawl_space(server, work)
            bare_after = bare_loop(server, requests)
            bare = (bare_before + bare_after) / 2
            figures.update(crawl)
            figures["bare_tls_requests_per_second_before"] = bare_before
            figures["bare_tls_requests_per_second_after"] = bare_after
            figures["bare_tls_requests_per_second"] = bare
            figures["ratio_crawler_to_bare"] = crawl["pages_per_second"] / bare
            figures.update(big_frontier(server, work, frontier_urls, 10.0 if quick else 20.0))
    finally:
        server.close()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"generated space: {figures['space']} on {capsules} loopback addresses")
    print(
        f"crawl:  {crawl['pages']:.0f} pages in {crawl['seconds']:.1f} s = "
        f"{crawl['pages_per_second']:.0f} pages/s, {crawl['cpu_per_page_ms']:.2f} ms CPU/page, "
        f"peak RSS {crawl['peak_rss_mb']:.0f} MB (sextant crawl, delay 0, "
        f"concurrency {CONCURRENCY})"
    )
    print(
        f"bare TLS loop: {bare:.0f} requests/s (before the crawl {bare_before:.0f}, after "
        f"{bare_after:.0f}); crawler/bare = "
        f"{figures['ratio_crawler_to_bare']:.2f} (target >= 0.5)"
    )
    frontier_line = (
        f"frontier of {frontier_urls:,} URLs "
        f"(generated in {figures['frontier_generation_s']:.0f} s): "
        f"peak RSS {figures['frontier_crawl_peak_rss_mb']:.0f} MB (target < 300 MB), "
        f"{figures['frontier_pages_fetched']:.0f} fetched, {figures['frontier_left']:.0f} left"
    )
    print(frontier_line)
    print(
        f"claim of 50 rows: {figures['claim_50_ms_on_frontier']:.1f} ms on {frontier_urls:,} "
        f"URLs, {figures['claim_50_ms_on_1000_urls']:.1f} ms on 1,000"
    )
    print(f"(benchmark process itself: {own:.0f} MB)")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    run(quick=parser.parse_args().quick)
