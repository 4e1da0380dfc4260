"""The sample space (``gemserve/sample_space``) crawled and indexed the way ``sextant demo``
does it (the same stages, through :class:`sextant.pipeline.Children`), for tests that check
what the demo and the documentation promise about searching it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from indexer.query import Searcher
from sextant.pipeline import Children, sextant_command, stage_environment, wait_for_file

#: The sample capsules' first loopback address; test_demo.py uses 127.0.4.10.
SPACE_ADDRESS = "127.0.6.10"


@contextlib.contextmanager
def sample_searcher(data_dir: Path) -> Iterator[Searcher]:
    """Serve the sample space on loopback, crawl and index it into ``data_dir``, and stop
    the capsules; then yield a searcher on the index."""
    store = f"sqlite:///{data_dir / 'sextant.db'}"
    ready = data_dir / "sample-space.json"
    serve = sextant_command(
        data_dir,
        "sample-space",
        "serve",
        "--base-address",
        SPACE_ADDRESS,
        "--ready-file",
        str(ready),
    )
    with Children() as children:
        space = children.start(serve, env=stage_environment(store))
        layout = wait_for_file(ready, space, timeout=60)
        pins = [arg for capsule in layout["capsules"] for arg in ("--resolve", capsule["pin"])]
        crawl = ("crawl", "--seed", layout["seed"], "--allow-host", "*.example", "--delay", "0")
        children.run_stage(data_dir, *crawl, *pins, db_url=store)
        children.run_stage(data_dir, "index", db_url=store)
    searcher = Searcher(data_dir / "index", store)
    try:
        yield searcher
    finally:
        searcher.close()
