"""Every ``sextant`` command against PostgreSQL, the way an operator runs them.

Only the environment says where the store is (``SEXTANT_DB_URL=postgresql+psycopg://...``),
as in a deployment: schema commands, a crawl of scripted loopback capsules, ``show``,
``index``, ``search``, ``graph``, the search capsule (``serve``, whose add-seed form the next
crawl reads from the store) and the ``run`` loop. Skipped unless ``SEXTANT_TEST_PG_URL``
names a server (``.ci/postgres.sh`` starts one).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner, Result
from sqlalchemy import func, select

from sextant.cli import cli
from sextant.store import Capsule, Link, Page, Run, SeedRequest, make_engine
from tests.databases import create_postgres_database, drop_postgres_database, postgres_available
from tests.gemini_server import ROOT, CapsuleProcess, capsule_process
from tests.search_capsule.client import Client, Reply

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        not postgres_available(), reason="needs PostgreSQL (SEXTANT_TEST_PG_URL, .ci/postgres.sh)"
    ),
]

ALPHA, BETA, GAMMA = "alpha.pg.test", "beta.pg.test", "gamma.pg.test"
PAGES = 6
ROBOTS = {"status": 20, "meta": "text/plain", "body": "User-agent: *\n"}
SPEC = {
    "capsules": [
        {
            "hostname": ALPHA,
            "synthetic": {"pages": PAGES, "links_per_page": 2, "seed": 1},
            "routes": {
                "/robots.txt": ROBOTS,
                "/": {
                    "gemtext": "# Alpha lighthouse\nNotes of a lighthouse keeper.\n"
                    "=> /p/0 First page\n=> {url:" + BETA + "} Our neighbour\n"
                },
            },
        },
        {
            "hostname": BETA,
            "synthetic": {"pages": PAGES, "links_per_page": 2, "seed": 2},
            "routes": {"/robots.txt": ROBOTS},
        },
        # Linked from nowhere: it comes in through the search capsule's add-seed form.
        {
            "hostname": GAMMA,
            "routes": {
                "/robots.txt": ROBOTS,
                "/": {"gemtext": "# Gamma\nSuggested by a reader.\n"},
            },
        },
    ]
}
CRAWLED = 2 * (PAGES + 1)  # alpha's and beta's roots and pages


@pytest.fixture(scope="module")
def store_url() -> Iterator[str]:
    url = create_postgres_database()
    try:
        yield url
    finally:
        drop_postgres_database(url)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pg-data")


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CapsuleProcess]:
    with capsule_process(SPEC, tmp_path_factory.mktemp("pg-space")) as running:
        yield running


def environment(store_url: str, data_dir: Path) -> dict[str, str]:
    return {"SEXTANT_DB_URL": store_url, "SEXTANT_DATA_DIR": str(data_dir)}


def sextant(store_url: str, data_dir: Path, *args: str) -> Result:
    """One command, configured by the environment only."""
    return CliRunner().invoke(cli, list(args), env=environment(store_url, data_dir))


def crawl_args(space: CapsuleProcess, *seeds: str) -> list[str]:
    args = ["--delay", "0", "--timeout", "5"]
    for host in seeds:
        args += ["--seed", space.url(host, "/")]
    for pin in space.resolve_args:
        args += ["--resolve", pin]
    return args


@pytest.fixture(scope="module")
def crawled(store_url: str, data_dir: Path, space: CapsuleProcess) -> Result:
    assert sextant(store_url, data_dir, "db", "upgrade").exit_code == 0
    return sextant(store_url, data_dir, "crawl", *crawl_args(space, ALPHA, BETA))


@pytest.fixture(scope="module")
def indexed(store_url: str, data_dir: Path, crawled: Result) -> Result:
    return sextant(store_url, data_dir, "index")


def count(store_url: str, statement) -> int:
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())
    finally:
        engine.dispose()


def test_schema_commands_on_a_fresh_database(tmp_path):
    url = create_postgres_database()
    try:
        before = sextant(url, tmp_path, "db", "current")
        assert before.exit_code == 0, before.output
        assert "current: none" in before.output
        assert "run `sextant db upgrade`" in before.output
        # Any other command says what to do instead of failing on a missing table.
        early = sextant(url, tmp_path, "show", "gemini://alpha.pg.test/")
        assert early.exit_code == 1
        assert "sextant db upgrade" in early.output
        upgraded = sextant(url, tmp_path, "db", "upgrade")
        assert upgraded.exit_code == 0, upgraded.output
        head = re.search(r"at revision (\S+) \(postgresql\+psycopg://", upgraded.output)
        assert head, upgraded.output
        current = sextant(url, tmp_path, "db", "current")
        assert f"current: {head.group(1)}\nhead:    {head.group(1)}\nup to date" in current.output
        checked = sextant(url, tmp_path, "db", "check")
        assert checked.exit_code == 0, checked.output
        assert "models and migrations agree" in checked.output
        again = sextant(url, tmp_path, "db", "upgrade")  # idempotent
        assert again.exit_code == 0, again.output
        # Nothing went to a SQLite file in the data directory.
        assert not (tmp_path / "sextant.db").exists()
    finally:
        drop_postgres_database(url)


def test_crawl_stores_every_page_in_postgres(crawled, store_url, data_dir):
    assert crawled.exit_code == 0, crawled.output
    assert re.search(rf"pages fetched\s+{CRAWLED}\n", crawled.output), crawled.output
    assert re.search(r"frontier left\s+0\n", crawled.output), crawled.output
    assert count(store_url, select(func.count()).select_from(Page).where(Page.state == "ok")) == (
        CRAWLED
    )
    assert count(store_url, select(func.count()).select_from(Capsule)) == 2
    assert count(store_url, select(func.count()).select_from(Run).where(Run.kind == "crawl")) >= 1
    assert not (data_dir / "sextant.db").exists()


def test_show_reads_pages_from_postgres(crawled, store_url, data_dir, space):
    root = space.url(ALPHA, "/")
    shown = sextant(store_url, data_dir, "show", "--no-body", root)
    assert shown.exit_code == 0, shown.output
    assert "state           ok" in shown.output
    assert "title           Alpha lighthouse" in shown.output
    assert f"=> {space.url(BETA, '/')} Our neighbour" in shown.output
    as_json = sextant(store_url, data_dir, "show", "--json", root)
    facts = json.loads(as_json.output)
    assert (facts["url"], facts["status"], facts["title"]) == (root, 20, "Alpha lighthouse")
    assert "lighthouse keeper" in facts["body"]
    unknown = sextant(store_url, data_dir, "show", space.url(GAMMA, "/"))
    assert unknown.exit_code == 1
    assert "not in the store" in unknown.output


def test_index_and_search_from_postgres(indexed, store_url, data_dir, space):
    assert indexed.exit_code == 0, indexed.output
    assert f"full index: {CRAWLED} pages indexed" in indexed.output
    found = sextant(store_url, data_dir, "search", "lighthouse")
    assert found.exit_code == 0, found.output
    assert "1. Alpha lighthouse" in found.output
    assert space.url(ALPHA, "/") in found.output
    results = json.loads(sextant(store_url, data_dir, "search", "--json", "page").output)
    assert results["total"] == CRAWLED  # every page says "page" (roots: "First page")
    # Snippets come from the bodies PostgreSQL keeps, read with its own parameter style.
    assert all("**page**" in result["snippet"].lower() for result in results["results"])
    assert {result["host"] for result in results["results"]} == {
        f"{ALPHA}:{space.address(ALPHA)[1]}",
        f"{BETA}:{space.address(BETA)[1]}",
    }
    again = sextant(store_url, data_dir, "index")  # incremental, from the store's watermark
    assert again.exit_code == 0, again.output
    assert again.output.startswith("incremental index:"), again.output


def test_graph_commands_read_postgres(crawled, store_url, data_dir, space):
    stats = sextant(store_url, data_dir, "graph", "stats", "--json", "--quiet")
    assert stats.exit_code == 0, stats.output
    data = json.loads(stats.output)
    assert data["census"]["pages"] == count(store_url, select(func.count()).select_from(Page))
    assert data["graph"]["links"] > 0
    beta = f"{BETA}:{space.address(BETA)[1]}"
    alpha = f"{ALPHA}:{space.address(ALPHA)[1]}"
    assert alpha in data["graph"]["capsules_without_inbound"]
    assert beta not in data["graph"]["capsules_without_inbound"]  # alpha links to it
    census = sextant(store_url, data_dir, "graph", "census", "--json")
    assert census.exit_code == 0, census.output
    assert json.loads(census.output)["pages"] == data["census"]["pages"]
    edges = sextant(store_url, data_dir, "graph", "export", "--format", "csv", "--table", "edges")
    assert edges.exit_code == 0, edges.output
    rows = edges.output.strip().splitlines()
    links = count(store_url, select(func.count()).select_from(Link))
    assert 1 < len(rows) <= links + 1  # a header, then at most one row per link


def get(address: tuple[str, int], path: str) -> Reply:
    """One request to the search capsule, checked by the strict client."""
    return trio.run(Client(address).get, path)


@pytest.fixture
def search_capsule(indexed, store_url, data_dir, space) -> Iterator[tuple[str, int]]:
    command = [sys.executable, "-m", "sextant", "serve", "--host", "127.0.0.1", "--port", "0"]
    # The test capsules are not on port 1965: the add-seed form must be told to take theirs.
    command += ["--seed-port", str(space.address(GAMMA)[1])]
    env = {**os.environ, **environment(store_url, data_dir)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        listening = re.search(r"listening on (\S+) port (\d+)", line)
        assert listening, f"serve said {line!r} (exit code {process.poll()})"
        yield listening.group(1), int(listening.group(2))
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_serve_answers_from_postgres_and_its_seeds_reach_the_crawler(
    search_capsule, store_url, data_dir, space
):
    home = get(search_capsule, "/")
    assert home.status == 20
    found = get(search_capsule, "/search?lighthouse")
    assert found.status == 20
    assert space.url(ALPHA, "/") in found.links
    statistics = get(search_capsule, "/statistics")
    assert statistics.status == 20
    assert str(CRAWLED) in statistics.text
    capsule = get(search_capsule, f"/capsule?{ALPHA}:{space.address(ALPHA)[1]}")
    assert capsule.status == 20
    assert ALPHA in capsule.text
    backlinks = get(search_capsule, f"/backlinks?{space.url(BETA, '/')}")
    assert backlinks.status == 20
    assert space.url(ALPHA, "/") in backlinks.links
    for listing in ("/known-hosts", "/newest-pages", "/newest-hosts", "/known-feeds"):
        assert (get(search_capsule, listing)).status == 20, listing

    # A reader suggests gamma; the request lands in PostgreSQL, and the next crawl takes it.
    gamma = space.url(GAMMA, "/")
    added = get(search_capsule, f"/add-seed?{gamma}")
    assert added.status == 20, added.meta
    assert count(store_url, select(func.count()).select_from(SeedRequest)) == 1
    recrawl = sextant(store_url, data_dir, "crawl", *crawl_args(space))
    assert recrawl.exit_code == 0, recrawl.output
    assert re.search(r"pages fetched\s+1\n", recrawl.output), recrawl.output
    shown = sextant(store_url, data_dir, "show", "--json", gamma)
    assert json.loads(shown.output)["title"] == "Gamma"
    requests = select(func.count()).select_from(SeedRequest)
    assert count(store_url, requests.where(SeedRequest.outcome == "queued")) == 1


def test_run_once_keeps_every_stage_on_the_database_it_was_given(tmp_path, space):
    """``sextant run`` starts each stage as a subprocess: they must use the store it was
    given with ``--db-url``, not a SQLite file of their own in the data directory."""
    url = create_postgres_database()
    try:
        assert sextant(url, tmp_path, "db", "upgrade").exit_code == 0
        args = [f"--crawl-arg={arg}" for arg in crawl_args(space, GAMMA)]
        result = CliRunner().invoke(
            cli,
            ["--db-url", url, "--data-dir", str(tmp_path), "run", "--once", "--port", "0", *args],
        )
        assert result.exit_code == 0, result.output
        assert count(url, select(func.count()).select_from(Page).where(Page.state == "ok")) == 1
        assert not (tmp_path / "sextant.db").exists()
    finally:
        drop_postgres_database(url)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_demo_never_writes_the_sample_space_into_the_configured_store(tmp_path):
    """``sextant demo`` has a store of its own: with SEXTANT_DB_URL naming a real store,
    the sample capsules must not end up in it (nor the demo fail on that store's schema)."""
    url = create_postgres_database()
    try:
        assert sextant(url, tmp_path, "db", "upgrade").exit_code == 0
        command = [sys.executable, "-m", "sextant", "demo", "--no-wait", "--port", str(free_port())]
        command += ["--space-address", "127.0.5.10"]
        env = {**os.environ, **environment(url, tmp_path)}
        demo = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=180)
        assert demo.returncode == 0, demo.stderr.decode()
        assert "3/3 search capsule up" in demo.stdout.decode()
        assert count(url, select(func.count()).select_from(Page)) == 0
        demo_store = f"sqlite:///{tmp_path / 'demo' / 'sextant.db'}"
        assert count(demo_store, select(func.count()).select_from(Page)) > 0
    finally:
        drop_postgres_database(url)
