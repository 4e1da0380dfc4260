"""What one hostile page costs a crawl: peak RSS of the crawler process and store growth.

Issue 18: a 5 MiB gemtext page of ~600,000 short distinct links once took the crawler to
1.77 GB of RSS and added 351 MB to the store. Run:

    .venv/bin/python -m bench.bench_page_cost [--quick]

A capsule in its own process serves one page of the largest body the crawler takes
(``FetchLimits.max_body_bytes``) made only of distinct relative links; ``sextant crawl
--max-pages 1`` fetches it in a fresh process, whose peak RSS is the kernel's high-water
mark of that process's own image (:mod:`bench.peak_rss`), so it is the crawler's alone. A
crawl of a one-line page gives the baseline: what any crawl costs before the page does.
``--quick`` uses a 1 MiB page.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.peak_rss import run_measured
from crawler.fetch import FetchLimits
from tests.gemini_server import ROOT, capsule_process


@dataclass(frozen=True)
class PageCost:
    seconds: float
    peak_rss_mb: float
    store_growth_bytes: int
    returncode: int


def links_page(size: int) -> tuple[str, int]:
    """A gemtext page of at most ``size`` bytes made only of distinct short links."""
    lines: list[str] = []
    total = number = 0
    while total + len(line := f"=>{number:x}\n") <= size:
        lines.append(line)
        total += len(line)
        number += 1
    return "".join(lines), number


def crawl_one_page(gemtext: str, work: Path) -> PageCost:
    """Serve ``gemtext`` at gemini://links.test/many/ and crawl that one page."""
    spec = {
        "capsules": [
            {
                "hostname": "links.test",
                "routes": {
                    "/robots.txt": {"status": 20, "meta": "text/plain", "body": ""},
                    "/many/": {"gemtext": gemtext},
                },
            }
        ]
    }
    data = work / "data"
    sextant = [sys.executable, "-m", "sextant", "--data-dir", str(data)]
    subprocess.run([*sextant, "db", "upgrade"], cwd=ROOT, check=True, capture_output=True)
    before = store_bytes(data)
    with capsule_process(spec, work) as server:
        command = [*sextant, "crawl", "--quiet", "--seed", server.url("links.test", "/many/")]
        for pin in server.resolve_args:
            command += ["--resolve", pin]
        measured = run_measured([*command, "--max-pages", "1", "--delay", "0"], cwd=ROOT)
    return PageCost(
        seconds=measured.seconds,
        peak_rss_mb=measured.peak_rss_mb,
        store_growth_bytes=store_bytes(data) - before,
        returncode=measured.returncode,
    )


def store_bytes(data: Path) -> int:
    """The SQLite store with its write-ahead log, whatever has been checkpointed."""
    return sum(path.stat().st_size for path in data.glob("sextant.db*"))


def run(*, quick: bool = False) -> dict[str, float | str]:
    size = 1024 * 1024 if quick else FetchLimits().max_body_bytes
    text, links = links_page(size)
    with tempfile.TemporaryDirectory(prefix="bench-page-") as scratch:
        base = crawl_one_page("=> /elsewhere One link\n", Path(scratch) / "baseline")
        cost = crawl_one_page(text, Path(scratch) / "links")
    if base.returncode or cost.returncode:
        raise RuntimeError(f"crawl failed: {base.returncode}, {cost.returncode}")
    return {
        "page": f"{len(text):,} bytes, {links:,} distinct links",
        "peak RSS, one-link page (MB)": base.peak_rss_mb,
        "peak RSS, the links page (MB)": cost.peak_rss_mb,
        "store growth, the links page (MB)": cost.store_growth_bytes / 1e6,
        "crawl of the links page (s)": cost.seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 1 MiB page instead of 5 MiB")
    args = parser.parse_args()
    for key, value in run(quick=args.quick).items():
        shown = f"{value:,.1f}" if isinstance(value, float) else value
        print(f"{key:<36} {shown}")


if __name__ == "__main__":
    main()
