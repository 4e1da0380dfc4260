"""Three ``sextant crawl --worker`` processes share one PostgreSQL frontier; one is killed.

The capsules run in their own process and log every request they receive, so what the
checks count is what the servers saw, across all crawler processes:

* every page is fetched exactly once, except what the killed worker had claimed and not
  stored (its leases run out, ``--lease``, and another worker fetches those again);
* per capsule, two requests are never closer than ``--delay``, even when one worker takes a
  capsule over the moment another let it go (the last request's time is in the store);
* nothing is lost: every page ends in the store with its final state, the frontier empty.

Each capsule is a chain (every page links to the next), so it has one frontier row at a
time and is free between two pages: the workers keep taking capsules from each other,
which is the hand-over the spacing check is about.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, select

from crawler.admission import Admission, load_exclusions
from crawler.frontier import Frontier
from crawler.options import CrawlOptions
from crawler.seeds import process_inbox
from crawler.url_rows import CapsuleIds, Enqueue, NewPage, enqueue, insert_pages
from sextant.store import FrontierEntry, Page, SeedRequest, make_engine, utcnow
from sextant.store.migrate import upgrade
from sextant.urls import parse
from tests.databases import create_postgres_database, drop_postgres_database, postgres_available
from tests.gemini_server import ROOT, capsule_process

needs_postgres = pytest.mark.skipif(
    not postgres_available(), reason="needs PostgreSQL (SEXTANT_TEST_PG_URL, .ci/postgres.sh)"
)

HOSTS = tuple(f"c{n}.workers.test" for n in range(6))
PAGES = 14
DELAY = 0.2
LEASE = 2.0
CONCURRENCY = 4
WORKERS = 3
SPEC = {
    "capsules": [
        {
            "hostname": host,
            # links_per_page=1: page i links to page i+1 only, a chain.
            "synthetic": {"pages": PAGES, "links_per_page": 1, "seed": n},
            "routes": {
                "/robots.txt": {"status": 20, "meta": "text/plain", "body": "User-agent: *\n"}
            },
        }
        for n, host in enumerate(HOSTS)
    ]
}
EXPECTED = {(host, path) for host in HOSTS for path in ["/robots.txt", "/"]} | {
    (host, f"/p/{n}") for host in HOSTS for n in range(PAGES)
}


@pytest.fixture
def store_url() -> Iterator[str]:
    url = create_postgres_database()
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    try:
        yield url
    finally:
        drop_postgres_database(url)


def test_a_worker_sees_live_leases_of_others_only(store):
    now = utcnow()
    with store.begin() as conn:
        refs = insert_pages(conn, [NewPage(parse("gemini://a.test/"), 0)], CapsuleIds(), now)
        enqueue(conn, [Enqueue(ref.id, ref.capsule_id, 0) for ref in refs.values()], now)
    mine, theirs = Frontier(store, "mine"), Frontier(store, "theirs", lease_seconds=60)
    assert not mine.leased_elsewhere()
    assert len(theirs.claim(10).items) == 1
    assert mine.leased_elsewhere()
    assert not theirs.leased_elsewhere()  # its own leases are not "elsewhere"
    # A dead worker's lease runs out: nothing to wait for any more.
    assert not mine.leased_elsewhere(now + timedelta(seconds=61))
    theirs.release_all()
    assert not mine.leased_elsewhere()


def test_workers_reading_the_inbox_at_once_queue_each_seed_once(store):
    """Every worker reads the seed inbox at start and every 30 s; two at once must not both
    insert the same page (on PostgreSQL one would fail on the unique URL)."""
    urls = [f"gemini://inbox{n}.test/" for n in range(40)]
    with store.begin() as conn:
        conn.execute(
            insert(SeedRequest.__table__),
            [{"url": url, "source": "capsule", "requested_at": utcnow()} for url in urls],
        )
    options = CrawlOptions()
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def read_inbox() -> None:
        try:
            admission = Admission(options, load_exclusions(options))
            outcomes.extend(o.outcome for o in process_inbox(store, admission, CapsuleIds()))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=read_inbox) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(outcomes) == ["queued"] * len(urls)
    with store.connect() as conn:
        queued = conn.execute(select(func.count()).select_from(FrontierEntry)).scalar_one()
        unprocessed = conn.execute(
            select(func.count()).select_from(SeedRequest).where(SeedRequest.processed_at.is_(None))
        ).scalar_one()
    assert (queued, unprocessed) == (len(urls), 0)


def worker_command(store_url: str, data_dir: Path, server, log: Path) -> list[str]:
    command = [sys.executable, "-m", "sextant", "--db-url", store_url, "--data-dir", str(data_dir)]
    command += ["crawl", "--worker", "--quiet", "--log", str(log)]
    for host in HOSTS:
        command += ["--seed", server.url(host, "/")]
    for pin in server.resolve_args:
        command += ["--resolve", pin]
    command += ["--delay", str(DELAY), "--lease", str(LEASE), "--max-depth", str(PAGES + 5)]
    return [*command, "--concurrency", str(CONCURRENCY), "--timeout", "5"]


def server_hits(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def requested_urls(log: Path) -> list[str]:
    """URLs a worker asked for, from its ``--log`` (written when each answer is in)."""
    if not log.exists():
        return []
    return [json.loads(line)["url"] for line in log.read_text().splitlines() if line]


def leases(engine: Engine) -> Counter[int]:
    """Leased frontier rows per worker process id (a lease owner is ``host:pid:random``)."""
    with engine.connect() as conn:
        owners = conn.execute(
            select(FrontierEntry.lease_owner).where(FrontierEntry.lease_owner.is_not(None))
        )
        return Counter(int(owner.split(":")[-2]) for (owner,) in owners)


def leased_by(engine: Engine, pid: int) -> set[str]:
    """URLs of the frontier rows leased by the worker with this process id."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(Page.url)
            .join(FrontierEntry, FrontierEntry.page_id == Page.id)
            .where(FrontierEntry.lease_owner.like(f"%:{pid}:%"))
        )
        return {row.url for row in rows}


def path_of(url: str) -> tuple[str, str]:
    rest = url.removeprefix("gemini://")
    authority, _, path = rest.partition("/")
    return authority.rsplit(":", 1)[0], "/" + path


@pytest.mark.postgres
@needs_postgres
def test_three_workers_share_the_frontier_and_survive_a_kill(tmp_path, store_url):
    hits_log = tmp_path / "hits.jsonl"
    logs = [tmp_path / f"worker{n}.jsonl" for n in range(WORKERS)]
    engine = make_engine(store_url)
    try:
        with capsule_process(SPEC, tmp_path, requests_log=hits_log) as server:
            workers = [
                subprocess.Popen(
                    worker_command(store_url, tmp_path / "data", server, log),
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                for log in logs
            ]
            # Kill a worker while it holds a claim, once the crawl is well under way. A claim
            # lasts one fetch, a few milliseconds: the worker is frozen (SIGSTOP) before its
            # claim is confirmed, so that it cannot let the claim go before the kill.
            by_pid = {worker.pid: worker for worker in workers}
            deadline = time.monotonic() + 30
            while True:
                holders = [pid for pid in leases(engine) if pid in by_pid]
                if holders and len(server_hits(hits_log)) >= 30:
                    victim = by_pid[holders[0]]
                    victim.send_signal(signal.SIGSTOP)
                    if leased_by(engine, victim.pid):
                        break
                    victim.send_signal(signal.SIGCONT)
                for worker in workers:
                    assert worker.poll() is None, worker.communicate()[1].decode()
                assert time.monotonic() < deadline, "no worker held a claim"
                time.sleep(0.01)
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=10)
            killed_at = time.monotonic()
            in_flight = leased_by(engine, victim.pid)
            assert in_flight, "the kill came after the victim let its claim go"
            hits_at_kill = len(server_hits(hits_log))
            survivors = [worker for worker in workers if worker is not victim]
            for survivor in survivors:
                _, err = survivor.communicate(timeout=60)
                assert survivor.returncode == 0, err.decode()
            finished_at = time.monotonic()
        hits = server_hits(hits_log)
    finally:
        engine.dispose()
    assert hits_at_kill < len(EXPECTED) - 20, "killed too late to test anything"

    # Every page fetched; twice only if the victim had claimed it and not stored it.
    counts = Counter((hit["host"], hit["path"]) for hit in hits)
    assert set(counts) == EXPECTED
    repeated = {key for key, n in counts.items() if n > 1}
    assert set(counts.values()) <= {1, 2}
    claimed_by_victim = {path_of(url) for url in in_flight}
    victim_capsules = {host for host, _ in claimed_by_victim}
    for host, path in repeated:
        assert (host, path) in claimed_by_victim or (
            path == "/robots.txt" and host in victim_capsules
        ), (host, path, claimed_by_victim)

    # The killed worker's claim came back when its lease ran out (renewed every third of
    # it), not before.
    for host, path in repeated:
        second = sorted(hit["at"] for hit in hits if (hit["host"], hit["path"]) == (host, path))
        assert second[1] >= killed_at + LEASE * 2 / 3 - 0.1, (host, path)
    assert finished_at - killed_at < 30

    # Politeness across processes: per capsule, never two requests closer than the delay.
    times: dict[str, list[float]] = defaultdict(list)
    for hit in hits:
        times[hit["host"]].append(hit["at"])
    gaps = {
        host: min(b - a for a, b in itertools.pairwise(sorted(at))) for host, at in times.items()
    }
    assert min(gaps.values()) >= DELAY, gaps

    # The workers did share: the victim and at least one survivor asked for pages, so
    # capsules changed hands (counted for the message: consecutive requests to a capsule
    # by two workers, the subtle case for the spacing above).
    fetched_by = {
        worker.pid: requested_urls(log) for worker, log in zip(workers, logs, strict=True)
    }
    assert fetched_by[victim.pid], "the victim asked for nothing"
    assert any(fetched_by[worker.pid] for worker in survivors)
    owner = {path_of(url): pid for pid, urls in fetched_by.items() for url in urls}
    handovers = 0
    for host in HOSTS:
        sequence = sorted(
            (hit["at"], owner.get((hit["host"], hit["path"])))
            for hit in hits
            if hit["host"] == host
        )
        handovers += sum(1 for (_, a), (_, b) in itertools.pairwise(sequence) if a != b)
    assert handovers >= 1

    # Nothing lost: every page stored with its final state, nothing left in the frontier.
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            states = Counter(state for (state,) in conn.execute(select(Page.state)))
            frontier = conn.execute(select(func.count()).select_from(FrontierEntry)).scalar_one()
    finally:
        engine.dispose()
    assert states == Counter({"ok": len(HOSTS) * (PAGES + 1)})
    assert frontier == 0
