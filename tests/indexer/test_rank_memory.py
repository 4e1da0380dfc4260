"""Link analysis reads the store in chunks into arrays: its memory is bytes per page, not a
Python object per row and URL (at 553,014 pages the old reading made the full index's largest
process 891 MB)."""

from __future__ import annotations

import sqlite3
import tracemalloc

from sqlalchemy import create_engine

from indexer.rank import compute
from sextant.graph.rows import CHUNK
from sextant.store.migrate import open_store

PAGES = CHUNK + 10_000  # more than one chunk, so what a chunk holds is not all of it
CAPSULES = 100
NOW = "2026-12-01 00:00:00"

#: Traced bytes per page at the peak, with one link per page. Reading every row with its URL
#: (and a URL → id dictionary) took 731; chunked reading takes about 250.
MAX_BYTES_PER_PAGE = 400


def test_link_analysis_holds_arrays_not_rows(tmp_path):
    path = tmp_path / "store.db"
    open_store(f"sqlite:///{path}").dispose()
    connection = sqlite3.connect(path)
    with connection:
        connection.executemany(
            "INSERT INTO capsules (id, host, port, display_host, first_seen_at,"
            " consecutive_failures) VALUES (?, ?, 1965, ?, ?, 0)",
            ((c + 1, f"c{c}.test", f"c{c}.test", NOW) for c in range(CAPSULES)),
        )
        connection.executemany(
            "INSERT INTO pages (id, url, capsule_id, scope, depth, state, status,"
            " discovered_at, updated_at, charset_detected, truncated, possibly_truncated,"
            " change_count, consecutive_failures)"
            " VALUES (?, ?, ?, ?, 0, 'ok', 20, ?, ?, 0, 0, 0, 0, 0)",
            (
                (
                    p + 1,
                    f"gemini://c{p % CAPSULES}.test/a/fairly/long/path/to/page-{p}.gmi",
                    p % CAPSULES + 1,
                    f"c{p % CAPSULES}.test",
                    NOW,
                    NOW,
                )
                for p in range(PAGES)
            ),
        )
        connection.executemany(
            "INSERT INTO links (source_id, target_url, target_id, target_scheme, label,"
            " position, cross_capsule, first_seen_at) VALUES (?, ?, ?, 'gemini', 'a', 0, 1, ?)",
            (
                (p + 1, f"gemini://elsewhere.test/{p}", (p * 7919) % PAGES + 1, NOW)
                for p in range(PAGES)
            ),
        )
    connection.close()
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as reader:
            tracemalloc.start()
            try:
                scores = compute(reader)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    finally:
        engine.dispose()
    assert len(scores.page_ids) == PAGES
    assert abs(scores.scores.mean() - 1.0) < 1e-9  # the average page scores 1
    assert peak / PAGES < MAX_BYTES_PER_PAGE, f"{peak / PAGES:.0f} bytes a page"
