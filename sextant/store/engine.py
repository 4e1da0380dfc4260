"""Engines and sessions, with the SQLite settings the crawler depends on.

WAL lets the search capsule read while the crawler writes; ``foreign_keys``
is off by default in SQLite and our cascades need it; the busy timeout turns
a brief writer collision into a wait instead of an error; ``synchronous=NORMAL``
is safe under WAL (a power cut may lose the last commits, never corrupt) and
measured ~9,000 single-row transactions/s here against far fewer with FULL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import Session, sessionmaker

from sextant.errors import ConfigError

#: Seconds a SQLite connection waits for another one's lock before "database is locked". The
#: crawler and indexer would rather wait than fail; the capsule, which has a visitor waiting,
#: passes a shorter one.
BUSY_TIMEOUT = 30.0

SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=NORMAL",
)


def utcnow() -> datetime:
    """Naive UTC, the one form every timestamp in the store takes."""
    return datetime.now(UTC).replace(tzinfo=None)


def make_engine(db_url: str, *, busy_timeout: float = BUSY_TIMEOUT, **kwargs: Any) -> Engine:
    """An engine for ``db_url``; SQLite files get their directory, pragmas and busy timeout.

    The timeout is given to ``sqlite3.connect`` rather than set by a pragma, so that it
    already holds while the pragmas below run: ``journal_mode=WAL`` needs a lock too.
    """
    try:
        url = make_url(db_url)
        url.get_dialect()
    except (ArgumentError, NoSuchModuleError) as exc:
        raise ConfigError(
            f"cannot understand the database URL {db_url!r}. Use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB in SEXTANT_DB_URL or --db-url."
        ) from exc
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": busy_timeout}, **kwargs)
        event.listen(engine, "connect", _set_sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in SQLITE_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    # expire_on_commit=False: pages handed from the writer to the progress
    # display must stay readable after their transaction ends.
    return sessionmaker(engine, expire_on_commit=False)
