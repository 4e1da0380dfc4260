"""Fixtures: a real SQLite store with Space helpers, and the known-answer index built once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from indexer.build import IndexReport, run_index
from indexer.query import Searcher
from sextant.store.migrate import open_store
from tests.indexer.fixture_space import PAGES
from tests.indexer.spaces import P, Space


@dataclass
class Store:
    url: str
    engine: Engine
    space: Space
    index_dir: Path

    def index(self, **options: object) -> IndexReport:
        """An index run as `sextant index` does it; no watermark slack, so that a test's
        edits a millisecond after a run are the only pages the next run sees."""
        options.setdefault("watermark_slack", timedelta(0))
        return run_index(self.index_dir, self.url, **options)  # type: ignore[arg-type]

    def searcher(self) -> Searcher:
        return Searcher(self.index_dir, self.url)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = open_store(url)
    yield Store(url, engine, Space(engine), tmp_path / "data" / "index")
    engine.dispose()


@contextlib.contextmanager
def indexed(root: Path, pages: dict[str, P]) -> Iterator[Searcher]:
    """A store of ``pages`` in ``root``, indexed once, and a searcher on it (for read-only
    tests that share one index)."""
    url = f"sqlite:///{root / 'store.db'}"
    engine = open_store(url)
    Space(engine).add(pages)
    run_index(root / "index", url, watermark_slack=timedelta(0))
    searcher = Searcher(root / "index", url)
    try:
        yield searcher
    finally:
        searcher.close()
        engine.dispose()


@pytest.fixture(scope="package")
def known(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Searcher]:
    """The fixture space, indexed once for every read-only test of the package."""
    with indexed(tmp_path_factory.mktemp("known"), PAGES) as searcher:
        yield searcher


def every_posting(ix: Any) -> list[tuple[str, bytes, list[tuple[int, float, bytes]]]]:
    """Every term's every posting (document, weight, encoded value), as the index holds them."""
    found = []
    with ix.reader() as reader:
        for fieldname, tbytes in reader.all_terms():
            matcher = reader.postings(fieldname, tbytes)
            postings = []
            while matcher.is_active():
                postings.append((matcher.id(), matcher.weight(), matcher.value()))
                matcher.next()
            found.append((fieldname, tbytes, postings))
    return found
