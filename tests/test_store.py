"""The store: migrations create it, agree with the models, and SQLite is set up right."""

from __future__ import annotations

import fcntl
import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, text
from sqlalchemy.exc import IntegrityError

from sextant.errors import StoreError, StoreUnavailable
from sextant.store import (
    Capsule,
    FrontierEntry,
    Link,
    Page,
    Run,
    make_engine,
    session_factory,
    utcnow,
)
from sextant.store.failures import unavailable_as_store_error
from sextant.store.migrate import (
    check,
    current_revision,
    downgrade,
    head_revision,
    open_store,
    require_current,
    upgrade,
)

TABLES = {
    "capsules",
    "pages",
    "frontier",
    "links",
    "fetch_attempts",
    "certificate_events",
    "seed_requests",
    "runs",
}


def test_upgrade_creates_every_table_and_matches_the_models(db_url: str) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    assert TABLES <= set(inspect(engine).get_table_names())
    assert current_revision(engine) == head_revision(engine)
    check(engine)  # raises when autogenerate would find a difference


def test_downgrade_to_base_and_back(db_url: str) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    downgrade(engine, "base")
    assert not TABLES & set(inspect(engine).get_table_names())
    upgrade(engine)
    assert TABLES <= set(inspect(engine).get_table_names())


def test_sqlite_runs_with_wal_and_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1


def test_the_sqlite_busy_timeout_is_the_callers(tmp_path: Path) -> None:
    for seconds, milliseconds in ((None, 30000), (0.25, 250)):
        options = {} if seconds is None else {"busy_timeout": seconds}
        engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}", **options)
        with engine.connect() as connection:
            assert connection.execute(text("PRAGMA busy_timeout")).scalar() == milliseconds
        engine.dispose()


def test_a_locked_store_is_unavailable_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    open_store(f"sqlite:///{path}").dispose()
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    locker.execute("DELETE FROM runs")  # a write: the lock is really taken
    engine = open_store(f"sqlite:///{path}", busy_timeout=0.1)
    try:
        with pytest.raises(StoreUnavailable, match="database is locked"):
            with unavailable_as_store_error(), session_factory(engine).begin() as session:
                session.add(Run(kind="crawl", started_at=utcnow()))
    finally:
        locker.execute("ROLLBACK")
        locker.close()
        engine.dispose()


def test_a_file_that_is_not_a_database_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"these bytes were a store once " * 200)
    with pytest.raises(StoreUnavailable, match="file is not a database"):
        open_store(f"sqlite:///{path}")


def test_a_fresh_sqlite_file_is_migrated_on_first_open(tmp_path: Path) -> None:
    engine = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    assert current_revision(engine) == head_revision(engine)


def _hold_first_use_lock(path: Path):
    """The lock as a sibling process stopped (SIGSTOP) in the middle of its start holds it."""
    holder = open(f"{path}-first-use.lock", "a")  # noqa: SIM115 - closed by the caller
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: conflicts even in one process
    return holder


def _open_within(db_url: str, busy_timeout: float, seconds: float) -> BaseException | None:
    """What open_store raised (None: it opened), asserting it returned within ``seconds``
    (in a thread, so a wait without end fails the test instead of hanging the suite)."""
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            open_store(db_url, busy_timeout=busy_timeout).dispose()
            outcome.append(None)
        except BaseException as exc:  # reported to the test below
            outcome.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"open_store still waiting after {seconds} s"
    return outcome[0]


def test_a_current_store_opens_while_another_process_holds_the_first_use_lock(
    tmp_path: Path,
) -> None:
    # Seen with `sextant serve --processes 2`: one child stopped while it held the lock,
    # and its sibling never started answering.
    path = tmp_path / "store.db"
    open_store(f"sqlite:///{path}").dispose()
    holder = _hold_first_use_lock(path)
    try:
        assert _open_within(f"sqlite:///{path}", busy_timeout=30.0, seconds=3.0) is None
    finally:
        holder.close()


def test_a_new_store_waits_for_the_first_use_lock_only_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    holder = _hold_first_use_lock(path)
    try:
        started = time.monotonic()
        error = _open_within(f"sqlite:///{path}", busy_timeout=0.3, seconds=3.0)
        assert time.monotonic() - started >= 0.3
        assert isinstance(error, StoreUnavailable)
        assert "first-use.lock for over 0.3 s" in str(error)
    finally:
        holder.close()
    engine = open_store(f"sqlite:///{path}")  # the holder gone, the store is prepared
    assert current_revision(engine) == head_revision(engine)
    engine.dispose()


def _open_and_report(db_url: str) -> str:
    try:
        open_store(db_url).dispose()
    except StoreError as exc:
        return str(exc)
    return "ok"


def test_processes_opening_a_fresh_file_at_once_all_find_it_current(tmp_path: Path) -> None:
    """`sextant run` starts the capsule and the crawl together on a new store: whichever
    migrates it, the other must wait and find it at head, not half-migrated."""
    db_url = f"sqlite:///{tmp_path / 'store.db'}"
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        reports = pool.map(_open_and_report, [db_url] * 6)
    assert reports == ["ok"] * 6


def test_a_database_of_someone_else_is_refused_with_the_fix(db_url: str) -> None:
    engine = make_engine(db_url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE unrelated (x INTEGER)"))
    with pytest.raises(StoreError, match="sextant db upgrade"):
        require_current(engine)


def _capsule_and_page(db_url: str) -> tuple[object, int, int]:
    engine = make_engine(db_url)
    upgrade(engine)
    now = utcnow()
    with session_factory(engine).begin() as session:
        capsule = Capsule(
            host="alpha.test", port=1965, display_host="alpha.test", first_seen_at=now
        )
        page = Page(
            url="gemini://alpha.test/",
            capsule=capsule,
            scope="alpha.test",
            discovered_at=now,
            updated_at=now,
        )
        session.add_all([capsule, page])
        session.flush()
        session.add(
            FrontierEntry(page_id=page.id, capsule_id=capsule.id, due_at=now, enqueued_at=now)
        )
        session.add(
            Link(
                source_id=page.id,
                target_url="gemini://alpha.test/",
                target_id=page.id,
                target_scheme="gemini",
                first_seen_at=now,
            )
        )
        return engine, capsule.id, page.id


def test_deleting_a_page_cascades_to_its_frontier_row_and_links(db_url: str) -> None:
    engine, _capsule_id, page_id = _capsule_and_page(db_url)
    with session_factory(engine).begin() as session:
        session.execute(Page.__table__.delete().where(Page.id == page_id))
    with session_factory(engine)() as session:
        assert session.scalars(select(FrontierEntry)).all() == []
        assert session.scalars(select(Link)).all() == []


def test_urls_are_unique(db_url: str) -> None:
    """And the broken constraint stays an IntegrityError through the store-failure
    translation: only the store's condition is translated, a bug in our SQL stays visible."""
    engine, capsule_id, _ = _capsule_and_page(db_url)
    now = utcnow()
    with (
        pytest.raises(IntegrityError),
        unavailable_as_store_error(),
        session_factory(engine).begin() as session,
    ):
        session.add(
            Page(
                url="gemini://alpha.test/",
                capsule_id=capsule_id,
                scope="alpha.test",
                discovered_at=now,
                updated_at=now,
            )
        )
