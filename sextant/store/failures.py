"""Which database errors mean "the store cannot be used now", raised as :class:`StoreUnavailable`.

PEP 249 reserves ``OperationalError`` for errors "related to the database's operation and not
necessarily under the control of the programmer": a SQLite file locked past the busy timeout
(the crawler, or an operator's shell, holds the write lock), one that cannot be opened, a
PostgreSQL server that refuses the connection. SQLite reports a file that is no longer a
database (a damaged header, a malformed page) as a plain ``DatabaseError``. Those are facts
about the store, which callers tell people about. The other ``DatabaseError`` kinds
(integrity, programming, data) mean our SQL is wrong and stay bugs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy.exc import DatabaseError, OperationalError

from sextant.errors import StoreUnavailable

if TYPE_CHECKING:  # a typing Protocol of SQLAlchemy 2.1 (PEP 249's module interface)
    from sqlalchemy.engine.interfaces import DBAPIModule


@contextmanager
def unavailable_as_store_error(dbapi: DBAPIModule | None = None) -> Iterator[None]:
    """Raise :class:`StoreUnavailable` (with the database's own words) for a store that
    cannot answer; let every other error through.

    SQLAlchemy wraps the driver's errors in its own classes; code that uses the driver's
    cursor directly (for speed) passes its module, ``engine.dialect.loaded_dbapi``, whose
    classes PEP 249 names the same way.
    """
    try:
        yield
    except DatabaseError as exc:
        if not _unavailable(exc, OperationalError, DatabaseError):
            raise
        raise StoreUnavailable(_message(exc.orig or exc)) from exc
    except Exception as exc:
        if dbapi is None or not _unavailable(exc, dbapi.OperationalError, dbapi.DatabaseError):
            raise
        raise StoreUnavailable(_message(exc)) from exc


def _unavailable(exc: Exception, operational: type, database: type) -> bool:
    return isinstance(exc, operational) or type(exc) is database


def _message(cause: BaseException) -> str:
    return (
        f"the store cannot be used now ({cause}); wait for whatever holds it locked, "
        "or check the database file or server"
    )
