"""The search budget (issue 18): the costliest query shapes against the budget, at 100,000 pages.

An OR of 32 two-word phrases of the index's commonest words once cost 7.85 s of search
thread on a 20,000-page index. Every search now runs under a budget (250 ms by default,
``indexer/budget.py``); the target is that every shape answers within twice it. Run:

    .venv/bin/python -m bench.bench_budget [--quick] [--pages N] [--budget S] [--keep DIR]

The corpus and index are those of ``bench.bench_index`` (same generator, same seed; a
``--keep`` directory one of them made is reused by the other). The shapes use the corpus's
commonest words: ORs of as many phrases as a query may hold, top-level phrases ANDed,
stop-word phrases, a long AND/OR mix, 64 words ANDed and ORed, a 24-word phrase, phrases
ORed minus a phrase. Each runs three times on a warm searcher (one that answered the
ordinary query mix first), then once without a budget (capped at ``--unbounded`` seconds)
to show what the budget saves.

Keeping ordinary queries fast: the ordinary mix of ``bench.bench_index`` (320 queries) is
timed in one process, alternating rounds with the budget checks live and with
``Budget.check`` replaced by a no-op, so the ratio of the medians is the checks' cost; and
the checks a query makes are counted and one is timed, which says the same without the
noise of a shared machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_index import COMMON, QUICK_PAGES, Corpus, _report, generate, make_queries

FULL_PAGES = 100_000
UNBOUNDED_CAP = 120.0
ROUNDS = 4


def shapes() -> dict[str, str]:
    """The costly query shapes, from the corpus's commonest words."""
    from indexer.querylang import MAX_PHRASE_TERMS, MAX_PHRASES, MAX_TERMS

    words = COMMON[:64]
    pairs = [f'"{a} {b}"' for a, b in zip(words, words[1:] + words[:1], strict=True)]
    return {
        f"OR of {MAX_PHRASES} common phrases": " OR ".join(pairs[:MAX_PHRASES]),
        "OR of 32 common phrases (issue 18's query)": " OR ".join(pairs[:32]),
        f"AND of {MAX_PHRASES} common phrases": " ".join(pairs[:MAX_PHRASES]),
        "stop-word phrases": '"of the" "in the" "to the" "and the"',
        f"OR of {MAX_PHRASES // 2} phrases minus a phrase": (
            "(" + " OR ".join(pairs[: MAX_PHRASES // 2]) + ') -"of the"'
        ),
        "AND/OR mix of common words": " ".join(
            f"({' OR '.join(words[at : at + 3])})" for at in range(0, 60, 3)
        ),
        f"{MAX_TERMS} common words ANDed": " ".join(words[:MAX_TERMS]),
        f"{MAX_TERMS} common words ORed": " OR ".join(words[:MAX_TERMS]),
        f"a {MAX_PHRASE_TERMS}-word phrase": f'"{" ".join(words[:MAX_PHRASE_TERMS])}"',
        "common words OR phrases": " OR ".join(
            f"({a} {pair})" for a, pair in zip(words[20:36], pairs[:16], strict=True)
        ),
    }


def prepare(root: Path, pages: int) -> tuple[Path, str, Corpus, list[str]]:
    """The bench_index store and index in ``root``, made unless an earlier run left them."""
    from indexer.build import run_index

    db_path = root / "store.db"
    db_url = f"sqlite:///{db_path}"
    samples_path = root / "samples.json"
    index_dir = root / "data" / "index"
    corpus = Corpus(pages)
    if db_path.exists() and samples_path.exists():
        samples = json.loads(samples_path.read_text(encoding="utf-8"))
        print(f"reusing the {pages:,}-page store in {root}", flush=True)
    else:
        started = time.perf_counter()
        db_path.unlink(missing_ok=True)
        samples = generate(db_path, corpus)
        samples_path.write_text(json.dumps(samples), encoding="utf-8")
        print(f"generated {pages:,} pages in {time.perf_counter() - started:.1f} s", flush=True)
    if not (index_dir.exists() and any(index_dir.iterdir())):
        report = run_index(index_dir, db_url, rebuild=True)
        print(f"indexed {report.documents:,} pages in {report.seconds:.1f} s", flush=True)
    return index_dir, db_url, corpus, samples


def run(
    *,
    quick: bool = False,
    pages: int | None = None,
    budget: float | None = None,
    keep: Path | None = None,
    unbounded_cap: float = UNBOUNDED_CAP,
) -> dict[str, float | str]:
    from indexer.budget import DEFAULT_SECONDS, Budget
    from indexer.query import Searcher

    pages = pages or (QUICK_PAGES if quick else FULL_PAGES)
    seconds = budget or DEFAULT_SECONDS
    root = keep or Path(tempfile.mkdtemp(prefix="bench-budget-"))
    root.mkdir(parents=True, exist_ok=True)
    index_dir, db_url, corpus, samples = prepare(root, pages)
    ordinary = [text for _, text in make_queries(corpus, samples)]
    figures: dict[str, float | str] = {"pages": f"{pages:,}", "budget ms": 1000 * seconds}
    searcher = Searcher(index_dir, db_url)
    try:
        for text in ordinary:  # warm: the common words' postings decoded, as in service
            searcher.search(text, budget=Budget(60))
        worst = 0.0
        for name, query in shapes().items():
            row = _shape(searcher, query, seconds, unbounded_cap)
            print(f"{name}: {row['summary']}", flush=True)
            figures[f"{name}: worst ms"] = row["worst"]
            figures[f"{name}: outcome"] = row["outcome"]
            worst = max(worst, row["worst"] / 1000 / seconds)
        figures["worst shape / budget (target <= 2)"] = worst
        readings, check_ns = _check_count(searcher, ordinary)
        figures["budget checks per ordinary query, median"] = readings
        figures["one budget check ns"] = check_ns
        live, unchecked = _check_overhead(searcher, ordinary)
        figures["ordinary query p50 ms, checks live"] = 1000 * live
        figures["ordinary query p50 ms, checks off"] = 1000 * unchecked
        figures["ordinary p50 ratio live/off"] = live / unchecked
    finally:
        searcher.close()
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    _report(figures)
    return figures


def _shape(searcher: Any, query: str, seconds: float, cap: float) -> dict[str, Any]:
    """Three budgeted runs and one unbounded one: times and what each answered."""
    from indexer.budget import Budget
    from sextant.errors import QueryError

    times: list[float] = []
    outcome = ""
    for _ in range(3):
        started = time.perf_counter()
        try:
            results = searcher.search(query, budget=Budget(seconds))
            outcome = (
                f"partial, {len(results.hits)} hits" if results.partial else "complete in time"
            )
        except QueryError as exc:
            outcome = f"refused: {exc}"
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    try:
        full = searcher.search(query, budget=Budget(cap))
        unbounded = "capped" if full.partial else f"{time.perf_counter() - started:.2f} s"
    except QueryError as exc:
        unbounded = "capped" if "stopped early" in str(exc) else "refused by a limit"
    worst = 1000 * max(times)
    summary = (
        f"{', '.join(f'{1000 * t:.0f}' for t in times)} ms ({worst / 1000 / seconds:.2f}x the "
        f"budget); {outcome}; unbounded: {unbounded}"
    )
    return {"worst": worst, "outcome": f"{outcome}; unbounded {unbounded}", "summary": summary}


def _check_count(searcher: Any, queries: list[str]) -> tuple[float, float]:
    """Clock readings (one a budget check) per ordinary query at the median, and the cost
    of one check: their product is what the checks add to a query, free of the noise that
    timing whole queries on a shared machine has."""
    from indexer.budget import Budget

    counts: list[int] = []
    for text in queries:
        readings = 0

        def clock() -> float:
            nonlocal readings
            readings += 1
            return time.perf_counter()

        searcher.search(text, budget=Budget(60, clock=clock))
        counts.append(readings)
    budget = Budget(60)
    budget.start()
    started = time.perf_counter()
    for _ in range(100_000):
        budget.check()
    return statistics.median(counts), (time.perf_counter() - started) * 1e4


def _check_overhead(searcher: Any, queries: list[str]) -> tuple[float, float]:
    """Median seconds of an ordinary query with budget checks live and with them no-ops,
    in one process: a first round re-warms the caches the costly shapes evicted, then
    rounds alternate live-off, off-live (so neither side always runs first) and drift in
    the machine's speed hits both alike."""
    from indexer.budget import Budget

    times: dict[bool, list[float]] = {True: [], False: []}
    check = Budget.check
    order = [True] + [live for pair in range(ROUNDS) for live in (pair % 2 == 0, pair % 2 == 1)]
    try:
        for round_, live in enumerate(order):
            Budget.check = check if live else (lambda self: None)  # type: ignore[method-assign]
            for text in queries:
                started = time.perf_counter()
                searcher.search(text, budget=Budget(60))  # never partial: same work
                if round_ > 0:
                    times[live].append(time.perf_counter() - started)
    finally:
        Budget.check = check  # type: ignore[method-assign]
    return statistics.median(times[True]), statistics.median(times[False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PAGES:,} pages")
    parser.add_argument("--pages", type=int, default=None, help="corpus size")
    parser.add_argument("--budget", type=float, default=None, help="seconds [0.25]")
    parser.add_argument(
        "--unbounded",
        type=float,
        default=UNBOUNDED_CAP,
        help="cap in seconds on the runs without a budget",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the store and index here (and reuse what an earlier run kept there)",
    )
    args = parser.parse_args()
    run(
        quick=args.quick,
        pages=args.pages,
        budget=args.budget,
        keep=args.keep,
        unbounded_cap=args.unbounded,
    )


if __name__ == "__main__":
    main()
