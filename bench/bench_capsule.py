"""How many searches per second does the search capsule answer, and how fast?

The full run (the issue's figure) generates a store of 100,000 pages on 1,000 capsules with
about 300,000 links, builds the index with the indexer's own build, serves it with the real
capsule as ``sextant serve`` runs it (one process per core; TLS, routing, rendering; the
per-client throttle off, since all load comes from one address), warms it up with as many
distinct queries as each level sends (a capsule that has been running a while), and drives
it from a separate client process at concurrency 1, 16 and 64. Every measured request is a
fresh TLS connection (Gemini has no keep-alive) with a query never asked before, so the
result cache does not flatter the figures; one extra run repeats a single query to show
what the cache gives. Run:

    .venv/bin/python -m bench.bench_capsule [--quick] [--pages N] [--requests N] [--processes N]
        [--unbalanced] [--hostile | --idle [--uncapped]]

``--hostile`` and ``--idle`` measure issue 18 instead: an attacker at 127.0.0.2 keeps 40
costly queries in flight (``--hostile``) or holds 2,500 idle connections (``--idle``), and
a visitor at 127.0.0.3 sends simple searches one at a time; target p99 <= 1 s.

The generated store and index are kept in ``$TMPDIR/sextant-bench-capsule-<pages>`` and
reused by later runs (delete the directory to regenerate). Target: p99 <= 100 ms at
concurrency 16 on two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import multiprocessing
import os
import random
import resource
import socket
import ssl
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import insert, select

from gemserve.admission import share_of
from gemserve.server import ServerLimits, bind_sockets
from indexer.build import run_index
from indexer.query import open_searcher
from search_capsule.cli import shared_limits
from search_capsule.loadshare import LoadShare
from search_capsule.processes import Supervisor, default_process_count
from search_capsule.server import DEFAULT_LIMITS, SERVER_LIMITS, load_certificate, serve_process
from search_capsule.services import CapsuleLimits
from sextant.config import Settings
from sextant.store import make_engine
from sextant.store.migrate import open_store, upgrade
from sextant.store.models import Capsule, Link, Page
from sextant.tls import client_context

HOST = "127.0.0.1"
SEED = 1965
CAPSULES = 1000
LINKS_PER_PAGE = 3
CONCURRENCY = (1, 16, 64)
LANGS = ("en",) * 6 + ("de", "fr", "es", "nl")

# Syllables for invented words, and the common words people actually search for.
_SYLLABLE_TEXT = "ka ri to ma ne lo su vi en ar ol in um sa te de fi no gra bel mon ter vel dor"
_COMMON_TEXT = (
    "the of and to in is that it for on with as was at by this from or have not are but "
    "gemini capsule server page log post about music radio garden solar book code linux "
    "weather recipe poetry travel photo game history science space station tilde note"
)
_SYLLABLES = _SYLLABLE_TEXT.split()
_COMMON = _COMMON_TEXT.split()


def vocabulary(size: int, rng: random.Random) -> list[str]:
    """Common words first, then invented ones; drawn with a Zipf-like weight later."""
    words = list(dict.fromkeys(_COMMON))
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def zipf_weights(count: int) -> list[float]:
    return [1.0 / (rank + 1) for rank in range(count)]


def make_corpus(settings: Settings, pages: int, rng: random.Random) -> list[str]:
    """Write capsules, pages and links into the store; return the vocabulary used."""
    words = vocabulary(20_000, rng)
    weights = zipf_weights(len(words))
    cumulative = list(_accumulate(weights))
    now = datetime(2026, 6, 1)
    engine = open_store(settings.db_url)
    capsule_count = min(CAPSULES, max(1, pages // 20))
    with engine.begin() as connection:
        connection.execute(
            insert(Capsule),
            [
                {
                    "host": f"capsule{n}.example",
                    "port": 1965,
                    "display_host": f"capsule{n}.example",
                    "first_seen_at": now - timedelta(days=n % 300),
                    "last_success_at": now,
                }
                for n in range(capsule_count)
            ],
        )
        capsule_ids = list(connection.scalars(select(Capsule.id).order_by(Capsule.id)))
    batch: list[dict[str, Any]] = []
    for n in range(pages):
        capsule = n % capsule_count
        length = rng.randint(150, 600)  # words: about 1-4 KB of text
        body_words = rng.choices(words, cum_weights=cumulative, k=length)
        title = " ".join(rng.choices(words[:3000], k=rng.randint(2, 6))).capitalize()
        lines = [f"# {title}"]
        for start in range(0, length, 40):
            lines.append(" ".join(body_words[start : start + 40]))
        body = "\n".join(lines) + "\n"
        batch.append(
            {
                "url": f"gemini://capsule{capsule}.example/p{n}.gmi",
                "capsule_id": capsule_ids[capsule],
                "scope": f"capsule{capsule}.example",
                "state": "ok",
                "discovered_at": now - timedelta(minutes=n),
                "updated_at": now,
                "status": 20,
                "mime": "text/gemini",
                "charset": "utf-8",
                "lang": rng.choice(LANGS),
                "size": len(body.encode()),
                "body": body,
                "title": title,
                "fetched_at": now,
            }
        )
        if len(batch) == 5000:
            _insert(engine, Page, batch)
            batch = []
    _insert(engine, Page, batch)
    _write_links(engine, pages, capsule_count, rng, now)
    engine.dispose()
    return words


def _accumulate(values: list[float]) -> Any:
    total = 0.0
    for value in values:
        total += value
        yield total


def _insert(engine: Any, model: Any, rows: list[dict[str, Any]]) -> None:
    if rows:
        with engine.begin() as connection:
            connection.execute(insert(model), rows)


def _write_links(engine: Any, pages: int, capsules: int, rng: random.Random, now: Any) -> None:
    with engine.connect() as connection:
        ids = list(connection.scalars(select(Page.id).order_by(Page.id)))
    batch: list[dict[str, Any]] = []
    # Preferential attachment, roughly: low page numbers are linked far more often.
    for source in range(pages):
        for _ in range(LINKS_PER_PAGE):
            target = min(pages - 1, int(rng.paretovariate(1.2)) - 1 + rng.randrange(50))
            batch.append(
                {
                    "source_id": ids[source],
                    "target_id": ids[target],
                    "target_url": f"gemini://capsule{target % capsules}.example/p{target}.gmi",
                    "target_scheme": "gemini",
                    "label": "see also",
                    "cross_capsule": source % capsules != target % capsules,
                    "first_seen_at": now,
                }
            )
        if len(batch) >= 20_000:
            _insert(engine, Link, batch)
            batch = []
    _insert(engine, Link, batch)


def prepare(pages: int) -> tuple[Settings, list[str]]:
    """The store and index for ``pages`` pages, generated once and then reused.

    The index is brought up to date on every run: nothing to do when it is current, a full
    build when a newer indexer changed its format.
    """
    directory = Path(tempfile.gettempdir()) / f"sextant-bench-capsule-{pages}"
    settings = Settings.load(data_dir=directory, db_url=f"sqlite:///{directory / 'sextant.db'}")
    marker = directory / "corpus.json"
    if marker.exists():
        words = json.loads(marker.read_text())["words"]
        upgrade(make_engine(settings.db_url))  # a store kept from before a migration
    else:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("sextant.db*"):
            stale.unlink()
        started = time.perf_counter()
        words = make_corpus(settings, pages, random.Random(SEED))[:5000]
        print(f"generated {pages:,} pages in {time.perf_counter() - started:.1f} s", flush=True)
        marker.write_text(json.dumps({"words": words}))
    started = time.perf_counter()
    report = run_index(settings.index_dir, settings.db_url)
    print(
        f"index ({report.mode}, {report.indexed:,} written): {report.documents:,} documents, "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return settings, words


def make_queries(words: list[str], count: int, rng: random.Random) -> list[str]:
    """Distinct queries in the mix people type: words, AND of two or three, phrases, filters."""
    common, rare = words[:300], words[300:]
    queries: set[str] = set()
    while len(queries) < count:
        kind = rng.random()
        if kind < 0.35:
            query = rng.choice(rare)
        elif kind < 0.65:
            query = " ".join(rng.sample(common, 1) + rng.sample(rare, rng.randint(1, 2)))
        elif kind < 0.8:
            query = f'"{rng.choice(common)} {rng.choice(rare)}"'
        elif kind < 0.9:
            query = f"{rng.choice(rare)} lang:{rng.choice(LANGS)}"
        else:
            query = f"site:capsule{rng.randrange(CAPSULES)}.example {rng.choice(common)}"
        queries.add(query)
    # Shuffled from sorted order: a set's order changes with each process's string hashing,
    # and runs compared with each other must send the same queries in the same order.
    return sorted(sorted(queries), key=lambda _: rng.random())


# --- the client process --------------------------------------------------------------------


def client_process(port: int, paths: list[str], concurrency: int, results: Any) -> None:
    started = _cpu_seconds()  # not counting the imports that started this process
    outcome = _load(port, paths, concurrency)
    outcome["client cpu"] = _cpu_seconds() - started
    results.put(outcome)


def _load(port: int, paths: list[str], concurrency: int) -> dict[str, Any]:
    """Fetch ``paths`` with ``concurrency`` threads of blocking TLS sockets.

    Threads rather than trio: the client shares the two cores with the capsule, so its CPU
    is taken from the server's. A blocking client (the TLS work in C, outside the GIL)
    spends 0.8-0.9 ms of CPU a request at concurrency 16; one thread driving non-blocking
    sockets from a selector measured the same, so the simpler code stays.
    """
    context = client_context()
    pending = iter(paths)
    taking = threading.Lock()
    latencies: list[float] = []
    failures: Counter[str] = Counter()

    def worker() -> None:
        while True:
            with taking:
                path = next(pending, None)
            if path is None:
                return
            started = time.perf_counter()
            try:
                status = _fetch(port, path, context)
            except (OSError, ValueError) as exc:  # ValueError: no status line came back
                failure = type(exc).__name__
            else:
                if status == 20:
                    latencies.append(time.perf_counter() - started)
                    continue
                failure = f"status {status}"
            with taking:  # a Counter's += is a read and a write: not atomic across threads
                failures[failure] += 1

    started = time.perf_counter()
    workers = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    return {"wall": time.perf_counter() - started, "latencies": latencies, "failures": failures}


def _fetch(port: int, path: str, context: ssl.SSLContext, source: str = "") -> int:
    with socket.create_connection((HOST, port), timeout=30, source_address=(source, 0)) as tcp:
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with context.wrap_socket(tcp, server_hostname="localhost") as stream:
            stream.sendall(f"gemini://{HOST}:{port}{path}\r\n".encode())
            data = bytearray()
            while chunk := stream.recv(65536):
                data += chunk
    return int(data[:2])


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def drive(port: int, paths: list[str], concurrency: int) -> dict[str, Any]:
    """Run the load from a separate process, as real clients would be."""
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    process = spawn.Process(target=client_process, args=(port, paths, concurrency, results))
    process.start()
    outcome = results.get()
    process.join()
    return outcome


# --- the server, in this process -----------------------------------------------------------


class Server:
    """The capsule as ``sextant serve --processes N`` runs it: a supervisor process and N
    capsule processes accepting on one port, all apart from this one."""

    def __init__(
        self,
        settings: Settings,
        processes: int,
        *,
        balanced: bool = True,
        limits: CapsuleLimits | None = None,
        server_limits: ServerLimits | None = None,
    ) -> None:
        self.sockets = bind_sockets(HOST, 0)
        self.port = self.sockets[0].getsockname()[1]
        certificate = load_certificate(settings, "localhost")
        if limits is None:
            limits = CapsuleLimits(rate_per_client=None)  # all load comes from one address
        # The per-address connection cap is off too unless asked for (the hostile modes).
        if server_limits is None:
            server_limits = dataclasses.replace(SERVER_LIMITS, max_connections_per_address=None)
        child = partial(
            serve_process,
            settings,
            limits,
            certificate,
            HOST,
            ["localhost", HOST],
            server_limits=server_limits,
        )
        # Unbalanced: no process ever leaves a connection to a sibling, so each goes to
        # whichever process the kernel wakes first (how they shared the port before).
        share = LoadShare(processes) if balanced else LoadShare(processes, max_defer=0.0)
        self._supervisor = multiprocessing.get_context("fork").Process(
            target=_supervise, args=(child, self.sockets, processes, share)
        )

    def __enter__(self) -> Server:
        self._supervisor.start()
        return self

    def cpu_seconds(self) -> float:
        """CPU time used so far by the supervisor and its capsule processes (Linux /proc;
        NaN elsewhere)."""
        return _tree_cpu_seconds(self._supervisor.pid) if self._supervisor.pid else math.nan

    def settle(self, *, busy_share: float = 0.05, timeout: float = 600.0) -> float:
        """Wait until the capsule's start-up work (listings computed at start, see
        ``search_capsule.handlers.listings.warm``) is done: two seconds in a row in which
        the processes used less than ``busy_share`` of a core. Returns the seconds waited.

        At 600,000 pages that work takes each process about a minute of CPU; a load measured
        meanwhile measures the start, not the capsule people use afterwards."""
        started = time.perf_counter()
        quiet = 0
        before = self.cpu_seconds()
        while quiet < 2 and time.perf_counter() - started < timeout:
            time.sleep(1.0)
            now = self.cpu_seconds()
            quiet = quiet + 1 if now - before < busy_share else 0
            before = now
        return time.perf_counter() - started

    def __exit__(self, *exc: object) -> None:
        self._supervisor.terminate()
        self._supervisor.join()
        for listening in self.sockets:
            listening.close()


def _tree_cpu_seconds(root: int) -> float:
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu seconds)
    try:
        names = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return math.nan
    ticks = os.sysconf("SC_CLK_TCK")
    for name in names:
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        stats[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    tree = {root}
    grown = True
    while grown:  # children of children, whatever order their pids came in
        grown = False
        for pid, (parent, _) in stats.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grown = True
    return sum(stats[pid][1] for pid in tree if pid in stats)


def _supervise(child: Any, sockets: list[Any], processes: int, share: LoadShare) -> None:
    Supervisor(child, sockets, processes, share).run()


def search_api_latencies(settings: Settings, queries: list[str]) -> tuple[list[float], float]:
    """Latencies of the search API alone, and the share of queries that found something
    (a benchmark of searches that all come back empty would measure nothing)."""
    latencies = []
    found = 0
    with open_searcher(settings) as searcher:
        searcher.search(queries[0])
        for query in queries:
            started = time.perf_counter()
            results = searcher.search(query)
            latencies.append(time.perf_counter() - started)
            found += results.total > 0
    return latencies, found / len(queries)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run(
    *,
    quick: bool = False,
    pages: int | None = None,
    requests: int | None = None,
    processes: int | None = None,
    balanced: bool = True,
) -> dict:
    pages = pages or (2_000 if quick else 100_000)
    requests = requests or (300 if quick else 2_000)
    settings, words = prepare(pages)
    rng = random.Random(SEED)
    queries = make_queries(words, requests * (len(CONCURRENCY) + 2), rng)
    figures: dict[str, float | str] = {"pages indexed": f"{pages:,}"}
    # The search API alone, in this process, no TLS: the floor under every figure below.
    alone, found = search_api_latencies(settings, queries[-requests:])
    if found < 0.5:
        raise RuntimeError(
            f"only {found:.0%} of the queries find anything: the index at "
            f"{settings.index_dir} is broken or stale; delete it and run again"
        )
    figures["queries with results"] = f"{found:.0%}"
    figures["search API alone p50 ms"] = percentile(alone, 0.50) * 1000
    figures["search API alone p99 ms"] = percentile(alone, 0.99) * 1000
    print(
        f"search API alone (no capsule, no TLS): p50 {figures['search API alone p50 ms']:.1f} ms,"
        f" p99 {figures['search API alone p99 ms']:.1f} ms; {found:.0%} of queries find pages"
    )
    print(f"{pages:,} pages; {requests:,} requests per level, each a new TLS connection")
    print(
        f"{'concurrency':>11} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7} "
        f"{'server':>8} {'client':>8}  (CPU ms a request)"
    )
    processes = processes or default_process_count()
    print(
        f"{processes} capsule processes (sextant serve --processes {processes})"
        + ("" if balanced else ", unbalanced: connections go where the kernel puts them")
    )
    with Server(settings, processes, balanced=balanced) as server:
        # Warm up as a capsule that has been running a while: searchers open, everyday
        # words' postings decoded and cached. The queries measured below are all new.
        drive(server.port, [f"/search?{quote(q)}" for q in queries[:requests]], 16)
        for level, concurrency in enumerate(CONCURRENCY, start=1):
            chunk = queries[level * requests : (level + 1) * requests]
            paths = [f"/search?{quote(q)}" for q in chunk]
            _report(figures, f"c{concurrency}", _measure(server, paths, concurrency))
        cached = [f"/search?{quote(queries[0])}"] * requests
        _report(figures, "c16 cached query", _measure(server, cached, 16))
    target = figures.get("c16 p99 ms")
    if isinstance(target, float):
        verdict = "meets" if target <= 100 else "misses"
        print(f"target p99 <= 100 ms at concurrency 16: {verdict} ({target:.1f} ms)")
    return figures


def _measure(server: Server, paths: list[str], concurrency: int) -> dict[str, Any]:
    before = server.cpu_seconds()
    outcome = drive(server.port, paths, concurrency)
    outcome["server cpu"] = server.cpu_seconds() - before
    outcome["requests"] = len(paths)
    return outcome


def _report(figures: dict[str, float | str], name: str, outcome: dict) -> None:
    latencies = outcome["latencies"]
    failed = sum(outcome["failures"].values())
    rate = len(latencies) / outcome["wall"] if outcome["wall"] else 0.0
    p50 = percentile(latencies, 0.50) * 1000 if latencies else float("nan")
    p99 = percentile(latencies, 0.99) * 1000 if latencies else float("nan")
    server_cpu = outcome["server cpu"] / outcome["requests"] * 1000
    client_cpu = outcome["client cpu"] / outcome["requests"] * 1000
    print(
        f"{name:>11} {rate:8.1f} {p50:8.1f} {p99:8.1f} {failed:7d} {server_cpu:8.2f} "
        f"{client_cpu:8.2f}",
        flush=True,
    )
    if outcome["failures"]:
        print(f"            failures: {outcome['failures']}")
    figures[f"{name} req/s"] = rate
    figures[f"{name} p50 ms"] = p50
    figures[f"{name} p99 ms"] = p99
    figures[f"{name} server CPU ms/request"] = server_cpu
    figures[f"{name} client CPU ms/request"] = client_cpu
    if failed:
        figures[f"{name} failed"] = float(failed)


# --- one address against another (issue 18) -------------------------------------------------

ATTACKER = "127.0.0.2"
VISITOR = "127.0.0.3"


def costly_queries(words: list[str], count: int, rng: random.Random) -> list[str]:
    """ORs of phrases of the commonest words, as long as a request allows: the queries that
    held the search thread for seconds before searches had a budget."""
    common = words[:30]
    queries = []
    for _ in range(count):
        parts: list[str] = []
        while sum(len(part) + 4 for part in parts) < 300:  # ~900 bytes once percent-encoded
            parts.append(f'"{rng.choice(common)} {rng.choice(common)}"')
        queries.append(" OR ".join(parts))
    return queries


def attacker_process(
    port: int, paths: list[str], concurrency: int, ready: Any, stop: Any, results: Any
) -> None:
    """``concurrency`` threads sending ``paths`` from the attacker's address until ``stop``;
    ``ready`` once they run (the process takes seconds to import what it needs)."""
    context = client_context()
    statuses: Counter[str] = Counter()
    taking = threading.Lock()
    pending = itertools.cycle(paths)

    def worker() -> None:
        while not stop.is_set():
            with taking:
                path = next(pending)
            try:
                outcome = str(_fetch(port, path, context, ATTACKER))
            except (OSError, ValueError) as exc:  # refused over its connection cap
                outcome = type(exc).__name__
            with taking:
                statuses[outcome] += 1

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.set()
    for thread in threads:
        thread.join()
    results.put(dict(statuses))


def idle_process(port: int, count: int, ready: Any, stop: Any) -> None:
    """Open ``count`` plain TCP connections from the attacker's address and say nothing."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
    held = []
    for _ in range(count):
        tcp = socket.socket()
        tcp.bind((ATTACKER, 0))
        tcp.setblocking(False)
        tcp.connect_ex((HOST, port))
        held.append(tcp)
    ready.set()
    stop.wait()
    for tcp in held:
        tcp.close()


#: A visitor's pace: a person pages through results a few times a second at most. Faster,
#: the visitor would spend its own allowance (10 costly pages a second per address, shared
#: out among the processes) and be answered 44, which says nothing about the attacker.
VISITOR_INTERVAL = 0.5


def visitor_latencies(port: int, paths: list[str]) -> tuple[list[float], Counter[str]]:
    context = client_context()
    latencies: list[float] = []
    failures: Counter[str] = Counter()
    due = time.perf_counter()
    for path in paths:
        time.sleep(max(0.0, due - time.perf_counter()))
        started = time.perf_counter()
        due = started + VISITOR_INTERVAL
        try:
            status = _fetch(port, path, context, VISITOR)
        except (OSError, ValueError) as exc:
            failures[type(exc).__name__] += 1
            continue
        if status == 20:
            latencies.append(time.perf_counter() - started)
        else:
            failures[f"status {status}"] += 1
    return latencies, failures


def run_hostile(
    mode: str,
    *,
    quick: bool,
    pages: int | None,
    requests: int | None,
    processes: int | None,
    capped: bool,
) -> dict:
    """``hostile``: 40 costly queries always in flight from one address; ``idle``: 2,500
    idle connections held from one address. Either way, what another address's simple
    searches (each new, one at a time) wait. ``capped`` False: the per-address limits off."""
    pages = pages or (2_000 if quick else 100_000)
    requests = requests or (100 if quick else 300)
    settings, words = prepare(pages)
    rng = random.Random(SEED + 18)
    simple = [q for q in make_queries(words, requests * 2, rng) if " " not in q][:requests]
    visitor = [f"/search?{quote(q)}" for q in simple]
    processes = processes or default_process_count()
    # As `sextant serve` runs: the throttle on and the totals shared out among the processes
    # (capped False: the throttle and the connection cap off; the lanes and budget stay).
    limits = shared_limits(
        DEFAULT_LIMITS if capped else CapsuleLimits(rate_per_client=None), processes
    )
    server_limits = dataclasses.replace(
        SERVER_LIMITS,
        max_connections_per_address=share_of(
            SERVER_LIMITS.max_connections_per_address if capped else None, processes
        ),
    )
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    figures: dict[str, float | str] = {"pages indexed": f"{pages:,}", "mode": mode}
    with Server(settings, processes, limits=limits, server_limits=server_limits) as server:
        time.sleep(1.0)  # the processes open their searchers
        visitor_latencies(server.port, [f"/search?{quote(words[0])}"])  # warm up
        ready = spawn.Event()
        if mode == "hostile":
            attack = [f"/search?{quote(q)}" for q in costly_queries(words, 400, rng)]
            results = spawn.Queue()
            attacker = spawn.Process(
                target=attacker_process, args=(server.port, attack, 40, ready, stop, results)
            )
        else:
            results = None
            attacker = spawn.Process(target=idle_process, args=(server.port, 2500, ready, stop))
        attacker.start()
        ready.wait()
        time.sleep(1.0)  # the attack in full swing
        latencies, failures = visitor_latencies(server.port, visitor)
        stop.set()
        attacker_statuses = results.get() if results is not None else {}
        attacker.join()
    p50 = percentile(latencies, 0.50) * 1000 if latencies else math.nan
    p99 = percentile(latencies, 0.99) * 1000 if latencies else math.nan
    worst = max(latencies) * 1000 if latencies else math.nan
    what = "40 costly queries in flight" if mode == "hostile" else "2,500 idle connections"
    print(
        f"{pages:,} pages, {processes} processes, throttle and connection cap "
        f"{'on' if capped else 'off'}; {what} from {ATTACKER}"
    )
    print(
        f"visitor from {VISITOR}: {len(latencies)} simple searches, p50 {p50:.1f} ms, "
        f"p99 {p99:.1f} ms, max {worst:.1f} ms, failed {sum(failures.values())} {dict(failures)}"
    )
    if attacker_statuses:
        print(f"attacker's answers: {attacker_statuses}")
    verdict = "meets" if p99 <= 1000 else "misses"
    print(f"target: the visitor's p99 <= 1 s: {verdict} ({p99:.1f} ms)")
    figures.update({"visitor p50 ms": p50, "visitor p99 ms": p99, "visitor max ms": worst})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 pages, 300 requests")
    parser.add_argument("--pages", type=int, default=None)
    parser.add_argument("--requests", type=int, default=None, help="per concurrency level")
    parser.add_argument(
        "--processes", type=int, default=None, help="capsule processes (default: one per core)"
    )
    parser.add_argument(
        "--unbalanced",
        action="store_true",
        help="processes never leave a connection to a less busy sibling (for comparison)",
    )
    parser.add_argument(
        "--hostile",
        action="store_true",
        help="40 costly queries in flight from 127.0.0.2; a visitor's latency from 127.0.0.3",
    )
    parser.add_argument(
        "--idle",
        action="store_true",
        help="2,500 idle connections from 127.0.0.2; a visitor's latency from 127.0.0.3",
    )
    parser.add_argument(
        "--uncapped",
        action="store_true",
        help="with --hostile/--idle: the per-address throttle and connection cap off "
        "(for comparison; lanes and the search budget stay)",
    )
    args = parser.parse_args()
    if args.hostile or args.idle:
        run_hostile(
            "hostile" if args.hostile else "idle",
            quick=args.quick,
            pages=args.pages,
            requests=args.requests,
            processes=args.processes,
            capped=not args.uncapped,
        )
        return
    run(
        quick=args.quick,
        pages=args.pages,
        requests=args.requests,
        processes=args.processes,
        balanced=not args.unbalanced,
    )


if __name__ == "__main__":
    main()
