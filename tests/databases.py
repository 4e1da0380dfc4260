"""Real databases for tests: a fresh SQLite file, and a fresh PostgreSQL database
when ``SEXTANT_TEST_PG_URL`` points at a server (``.ci/run`` starts one).

The ``db_url`` fixture runs a test once per available backend, so the store and
crawler suites prove the same migrations and queries work on both.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

PG_URL_ENV = "SEXTANT_TEST_PG_URL"


def postgres_available() -> bool:
    return bool(os.environ.get(PG_URL_ENV))


def create_postgres_database() -> str:
    """A brand-new, empty database on the test server; returns its URL."""
    server = make_url(os.environ[PG_URL_ENV])
    name = f"sextant_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(url: str) -> None:
    target = make_url(url)
    admin = create_engine(make_url(os.environ[PG_URL_ENV]), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)'))
    admin.dispose()


BACKENDS = [
    "sqlite",
    pytest.param(
        "postgres",
        marks=pytest.mark.skipif(
            not postgres_available(), reason=f"{PG_URL_ENV} is not set (see .ci/postgres.sh)"
        ),
    ),
]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database, once per backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    url = create_postgres_database()
    try:
        yield url
    finally:
        drop_postgres_database(url)
