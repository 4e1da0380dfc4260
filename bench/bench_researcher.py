"""What judging robots.txt for ``researcher`` costs the census and the link graph.

Run:

    .venv/bin/python -m bench.bench_researcher [--quick]

The store of :mod:`bench.bench_graph` (100,000 pages, 1,000,000 links; --quick: a tenth)
is measured twice in fresh processes: without any robots.txt, then with files on its
capsules as the crawler keeps them: a fifth close most of their pages to everyone
(``Disallow: /p`` with an ``Allow: /p1``), 1% close themselves to the researcher whole, 5%
have rules for ``indexer`` only, and the rest answered 51.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_graph import FULL, QUICK, generate

FILES = (
    ("id % 5 = 0", "User-agent: *\nDisallow: /p\nAllow: /p1\n"),
    ("id % 100 = 1", "User-agent: researcher\nDisallow: /\n"),
    ("id % 20 = 3", "User-agent: indexer\nDisallow: /\n"),
)


def add_robots(path: Path) -> None:
    connection = sqlite3.connect(path)
    with connection:
        for where, text in FILES:
            connection.execute(
                f"UPDATE capsules SET robots_status = 20, robots_txt = ? WHERE {where}", (text,)
            )
        connection.execute("UPDATE capsules SET robots_status = 51 WHERE robots_status IS NULL")
    connection.close()


def measure(path: Path) -> dict[str, float | int]:
    """As ``sextant graph stats`` runs it: judge once, then the census and the graph."""
    from sextant.census import census
    from sextant.graph.load import load_graph
    from sextant.graph.researcher import left_out
    from sextant.store import session_factory
    from sextant.store.migrate import open_store

    sessions = session_factory(open_store(f"sqlite:///{path}"))
    with sessions() as session:
        start = time.perf_counter()
        left = left_out(session)
        judged = time.perf_counter()
        census(session, left=left)
        counted = time.perf_counter()
        load_graph(session, left)
        loaded = time.perf_counter()
    return {
        "pages left out": left.pages,
        "capsules left out": left.capsules,
        "judge robots.txt (s)": judged - start,
        "census (s)": counted - judged,
        "load graph (s)": loaded - counted,
    }


def run(*, quick: bool = False) -> dict[str, float | str]:
    """Both measurements, printed and returned for ``python -m bench``'s table."""
    pages, links = QUICK if quick else FULL
    figures: dict[str, float | str] = {"pages": f"{pages:,}", "links": f"{links:,}"}
    with tempfile.TemporaryDirectory(prefix="bench-researcher-") as scratch:
        plain, with_robots = Path(scratch) / "plain.db", Path(scratch) / "robots.db"
        generate(plain, pages, links)
        shutil.copy(plain, with_robots)
        add_robots(with_robots)
        for name, path in (("no robots.txt", plain), ("with robots.txt", with_robots)):
            child = subprocess.run(
                [sys.executable, "-m", "bench.bench_researcher", "--measure", str(path)],
                check=True,
                capture_output=True,
                text=True,
                cwd=Path(__file__).resolve().parent.parent,
            )
            measured = json.loads(child.stdout.strip().splitlines()[-1])
            figures.update({f"{name}: {key}": value for key, value in measured.items()})
    for key, value in figures.items():
        shown = (
            f"{value:,.3f}"
            if isinstance(value, float)
            else format(value, "," if isinstance(value, int) else "")
        )
        print(f"{key:<40} {shown}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    run(quick=args.quick)


if __name__ == "__main__":
    main()
