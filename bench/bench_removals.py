"""What a change of mind costs: robots.txt re-judged, exclusion rules swept, a capsule forgotten.

Run:

    .venv/bin/python -m bench.bench_removals [--quick]

A SQLite store of fetched pages (100,000 on 100 capsules; --quick: a tenth) is measured for:
the first sweep of the built-in trap rules over every stored page (what the first crawl
after an upgrade pays once), the sweep at a later run when no rule is new, a changed
robots.txt forbidding half of one 10,000-page capsule (inside one writer transaction, as
the crawler does it), and ``sextant forget`` of another 10,000-page capsule.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from sqlalchemy import Engine, select, update

from crawler.admission import load_exclusions
from crawler.messages import RobotsRecord
from crawler.options import CrawlOptions
from crawler.rejudge import rejudge_robots, sweep_exclusions
from crawler.removals import forget
from crawler.url_rows import CapsuleIds, NewPage, insert_pages
from sextant.store import Capsule, Page, make_engine, utcnow
from sextant.store.migrate import upgrade
from sextant.urls import parse

FULL = (100, 1000)  # capsules, pages per capsule
QUICK = (10, 1000)
BIG_CAPSULE = 10_000


def populate(engine: Engine, capsules: int, per_capsule: int) -> None:
    now = utcnow()
    sizes = [BIG_CAPSULE, BIG_CAPSULE] + [per_capsule] * max(0, capsules - 2)
    for number, size in enumerate(sizes):
        urls = [
            f"gemini://c{number}.example/{'private' if n % 2 else 'notes'}/{n}.gmi"
            for n in range(size)
        ]
        with engine.begin() as conn:
            insert_pages(conn, [NewPage(parse(url), 2) for url in urls], CapsuleIds(), now)
    with engine.begin() as conn:
        conn.execute(update(Page).values(state="ok", fetched_at=now, body="text"))


def run(*, quick: bool = False) -> dict[str, float | str]:
    capsules, per_capsule = QUICK if quick else FULL
    figures: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-removals-") as scratch:
        engine = make_engine(f"sqlite:///{Path(scratch) / 'store.db'}")
        upgrade(engine)
        populate(engine, capsules, per_capsule)
        with engine.connect() as conn:
            total = conn.scalar(select(Page.id).order_by(Page.id.desc()).limit(1))
        figures["stored pages"] = f"{total:,}"
        rules = load_exclusions(CrawlOptions())
        started = time.perf_counter()
        sweep_exclusions(engine, rules)
        figures["first sweep of the built-in rules (s)"] = time.perf_counter() - started
        started = time.perf_counter()
        sweep_exclusions(engine, rules)
        figures["sweep at a later run, no new rule (s)"] = time.perf_counter() - started

        with engine.connect() as conn:
            first = conn.scalar(select(Capsule.id).where(Capsule.host == "c0.example"))
        assert first is not None, "the generated store has capsule c0.example"
        now = utcnow()
        record = RobotsRecord(
            first, now, None, 20, "User-agent: *\nDisallow: /private/\n", True, None
        )
        started = time.perf_counter()
        with engine.begin() as conn:
            forbidden = rejudge_robots(conn, record, now)
        figures["robots.txt change, 10,000-page capsule (s)"] = time.perf_counter() - started
        figures["pages it disallowed"] = f"{forbidden:,}"

        started = time.perf_counter()
        erased = forget(engine, "c1.example", "removal requested")
        figures["forget a 10,000-page capsule (s)"] = time.perf_counter() - started
        figures["pages forgotten"] = f"{erased:,}"
        engine.dispose()
    for key, value in figures.items():
        print(f"{key:<45} {value:,.3f}" if isinstance(value, float) else f"{key:<45} {value}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the pages")
    run(quick=parser.parse_args().quick)


if __name__ == "__main__":
    main()
