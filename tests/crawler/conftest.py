"""Fixtures the crawler's tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from sextant.store import make_engine
from sextant.store.migrate import upgrade


@pytest.fixture
def store(db_url: str) -> Iterator[Engine]:
    """A migrated store on each database the suite runs against (SQLite, PostgreSQL)."""
    engine = make_engine(db_url)
    upgrade(engine)
    yield engine
    engine.dispose()
