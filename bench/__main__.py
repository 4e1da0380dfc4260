"""Run every benchmark and print one table of headline figures (``make bench``).

``--quick`` runs the small sizes (a minute or two in all); the default runs the
sizes the issues ask for, which takes much longer on two cores. ``--only`` picks
benchmarks by name. The table is what the README's performance section shows.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path


def discover() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        info.name for info in pkgutil.iter_modules([str(here)]) if info.name.startswith("bench_")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a fast look")
    parser.add_argument("--only", nargs="*", default=None, help="benchmark names, e.g. crawl")
    args = parser.parse_args(argv)
    names = discover()
    if args.only:
        names = [n for n in names if n.removeprefix("bench_") in args.only or n in args.only]
    rows: list[tuple[str, str, str]] = []
    failed = 0
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        try:
            figures = importlib.import_module(f"bench.{name}").run(quick=args.quick)
        except Exception:
            traceback.print_exc()
            rows.append((name, "FAILED", ""))
            failed += 1
            continue
        elapsed = time.perf_counter() - started
        for key, value in figures.items():
            shown = f"{value:,.3f}" if isinstance(value, float) else str(value)
            rows.append((name.removeprefix("bench_"), key, shown))
        rows.append((name.removeprefix("bench_"), "benchmark wall time (s)", f"{elapsed:,.1f}"))
    today = datetime.now(UTC).date().isoformat()
    size = "quick sizes" if args.quick else "full sizes"
    command = "python -m bench" + (" --quick" if args.quick else "")
    print(f"\n## Benchmarks ({today}, {size}, `{command}`)\n")
    print("| benchmark | figure | value |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
