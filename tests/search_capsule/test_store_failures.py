"""A store that cannot answer: the capsule says 41 with a message for people, never 42.

Real SQLite files made unusable the ways they are in production: another process holding
the write lock (the crawler mid-transaction) past the capsule's busy timeout, and a file
whose bytes are no longer a database. Every request goes through real TLS.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from indexer.build import run_index
from search_capsule.app import STORE_UNAVAILABLE
from search_capsule.services import CapsuleLimits
from sextant.config import Settings
from sextant.store import SeedRequest
from sextant.store.migrate import open_store
from tests.search_capsule import space
from tests.search_capsule.conftest import UNTHROTTLED, settings_in, start_capsule

#: Short, so a test waits a fraction of a second for a lock instead of the capsule's 5 s.
QUICK_GIVE_UP = CapsuleLimits(rate_per_client=UNTHROTTLED.rate_per_client, store_busy_timeout=0.2)


@pytest.fixture
def store_settings(tmp_path: Path) -> Settings:
    """A store of its own (the module-wide one must stay usable), with no index."""
    settings = settings_in(tmp_path / "store")
    engine = open_store(settings.db_url)
    space.populate(engine)
    engine.dispose()
    return settings


def store_file(settings: Settings) -> Path:
    return settings.data_dir / "sextant.db"  # where settings_in puts it


@contextlib.contextmanager
def write_lock(settings: Settings) -> Iterator[None]:
    """Hold the store's write lock from another connection, as the crawler does mid-batch."""
    locker = sqlite3.connect(store_file(settings), isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        locker.execute(
            "INSERT INTO seed_requests (url, source, requested_at) "
            "VALUES ('gemini://crawler.example/', 'crawler', '2026-07-01 12:00:00')"
        )
        yield
    finally:
        locker.execute("ROLLBACK")
        locker.close()


async def test_add_seed_answers_41_while_another_process_holds_the_write_lock(
    nursery, store_settings, tls_context
):
    running = await start_capsule(nursery, store_settings, tls_context, limits=QUICK_GIVE_UP)
    seed = "/add-seed?" + quote("gemini://waiting.example/")
    try:
        with write_lock(store_settings):
            started = time.monotonic()
            refused = await running.client.get(seed)
            waited = time.monotonic() - started
            # Readers are not blocked by a writer (WAL): the store pages still answer.
            statistics = await running.client.get("/statistics")
        assert (refused.status, refused.meta) == (41, STORE_UNAVAILABLE)
        # The capsule's own busy timeout, not the crawler's 30 s (loose: a loaded machine).
        assert waited < 10
        assert statistics.status == 20
        queued = await running.client.get(seed)  # the lock is gone: the same request works
        assert queued.status == 20
        assert "Thank you! The URL is queued." in queued.text
    finally:
        running.app.close()
    engine = open_store(store_settings.db_url)
    with Session(engine) as session:
        urls = session.scalars(select(SeedRequest.url)).all()
    engine.dispose()
    # Stored once: the refused attempt left nothing behind, and the locker rolled back.
    assert urls.count("gemini://waiting.example/") == 1
    assert "gemini://crawler.example/" not in urls


def damage(settings: Settings) -> None:
    """Overwrite the whole file, header first, the way a bad disk or a stray `cp` would."""
    path = store_file(settings)
    size = path.stat().st_size
    with path.open("r+b") as store:
        store.write(b"not a database, any more. " * (size // 26 + 1))


@pytest.mark.parametrize(
    "path", ["/statistics", "/known-hosts", "/capsule?alpha.example", "/add-seed?beta.example"]
)
async def test_a_damaged_store_answers_41_for_store_pages(
    nursery, store_settings, tls_context, path
):
    running = await start_capsule(nursery, store_settings, tls_context, limits=QUICK_GIVE_UP)
    try:
        damage(store_settings)
        # Connections opened before the damage could still answer from SQLite's cache; a
        # capsule process started later (or a new pooled connection) meets the file as it is.
        running.app.services.store.engine.dispose()
        reply = await running.client.get(path)
        assert (reply.status, reply.meta) == (41, STORE_UNAVAILABLE)
        about = await running.client.get("/about")  # pages that need no store still work
        assert about.status == 20
    finally:
        running.app.close()


@pytest.fixture
def indexed_settings(store_settings: Settings) -> Settings:
    """The store above, indexed: searches read their snippets from the store."""
    engine = open_store(store_settings.db_url)
    space.add_notes(engine, 3)
    engine.dispose()
    run_index(store_settings.index_dir, store_settings.db_url, procs=1)
    return store_settings


async def test_a_search_on_a_damaged_store_answers_41(nursery, indexed_settings, tls_context):
    """The index is fine, but snippets come from the store, through the driver's own cursor."""
    running = await start_capsule(nursery, indexed_settings, tls_context, limits=QUICK_GIVE_UP)
    try:
        damage(indexed_settings)
        reply = await running.client.get("/search?" + space.NOTES_WORD)
        assert (reply.status, reply.meta) == (41, STORE_UNAVAILABLE)
    finally:
        running.app.close()
