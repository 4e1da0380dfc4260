"""Alembic driven from code, so an installed ``sextant db upgrade`` works.

The migration scripts ship inside the wheel as the ``migrations`` package, and
the Alembic config is built here rather than read from an ``alembic.ini`` that
an installed copy would not have.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect

from sextant.errors import StoreError, StoreUnavailable
from sextant.store.engine import BUSY_TIMEOUT, make_engine
from sextant.store.failures import unavailable_as_store_error


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("migrations")))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    command.downgrade(alembic_config(engine), revision)


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def check(engine: Engine) -> None:
    """Raise when the models and the migrations disagree (``alembic check``)."""
    command.check(alembic_config(engine))


def require_current(engine: Engine) -> None:
    """Stop early, with the fix in the message, when the schema is not at head.

    Every command that touches the store calls this, so a user who skipped
    ``sextant db upgrade`` is told so instead of meeting "no such table".
    """
    current = current_revision(engine)
    head = head_revision(engine)
    if current == head:
        return
    if current is None and not inspect(engine).get_table_names():
        raise StoreError(
            f"the database {engine.url.render_as_string()} has no tables yet. "
            "Run `sextant db upgrade` first."
        )
    raise StoreError(
        f"the database is at revision {current}, the code expects {head}. Run `sextant db upgrade`."
    )


def open_store(db_url: str, *, busy_timeout: float = BUSY_TIMEOUT) -> Engine:
    """An engine whose schema is known to be current.

    A brand-new SQLite file is migrated on the spot, so a first
    ``sextant crawl`` just works; anything else that is behind (or any
    PostgreSQL database, which an operator upgrades deliberately) stops with
    the command that fixes it. A locked or damaged store stops with
    :class:`~sextant.errors.StoreUnavailable` rather than a traceback.
    """
    engine = make_engine(db_url, busy_timeout=busy_timeout)
    with unavailable_as_store_error():
        # A store at head is complete (Alembic moves the revision with each migration's
        # own commit), so the everyday case takes no lock: a sibling process stopped or
        # stuck while it held one must not keep this one from starting.
        if current_revision(engine) == head_revision(engine):
            return engine
        with _first_use(engine, timeout=busy_timeout):
            if engine.dialect.name == "sqlite" and not inspect(engine).get_table_names():
                upgrade(engine)
            require_current(engine)
    return engine


@contextlib.contextmanager
def _first_use(engine: Engine, *, timeout: float) -> Iterator[None]:
    """One process at a time looks at a SQLite file's schema and migrates it if it is new.

    `sextant run` and `demo` start the capsule and the crawl at once, and both may find
    the file empty: one migrating while the other read the half-migrated revision and
    stopped ("at revision 0001, the code expects 0005"; seen in CI). Alembic commits each
    migration on its own, so the schema can be seen half-built; a lock file beside the
    database makes looking and migrating one step (a few milliseconds once it is built).
    The wait for it is bounded like any wait for another process's lock (``timeout``, the
    store's busy timeout): a holder that is stopped or hung is reported, not waited for.
    """
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    path = f"{database}-first-use.lock"
    with open(path, "a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(
                        f"another process has held {path} for over {timeout:g} s while "
                        "preparing the store; stop that sextant process (or, if none is "
                        "running, try again)"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
