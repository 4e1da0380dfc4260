"""How fast are the two functions every fetched page goes through?

The crawler parses each gemtext body once and normalizes/resolves each of its links,
so these numbers bound crawl throughput on the CPU side. Run:

    .venv/bin/python -m bench.bench_gemtext [--quick] [--seed N] [--links N]

Input is generated (seeded, so runs are comparable): a 1 MiB page mixing the line
types in the proportions of real capsules, and ~100k links of the shapes seen in the
wild (relative, absolute, dot segments, percent-escapes, IDN hosts, other schemes).

Two ratios that were unit tests once (a ratio of timings flakes on a loaded machine, so
they are printed here instead): how parsing time grows from a 1 MiB page to the same page
four times over (linear is 4x, a quadratic step 16x), and what a page of four 1 MiB link
"URLs" of accented letters costs ``crawler.content.analyse`` against prose of the same size
(30x before such links were refused unread, about 1x after).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import urllib.parse
from collections.abc import Callable

from crawler.content import analyse
from sextant import gemtext, urls
from sextant.protocol import MimeType

PAGE_BYTES = 1024 * 1024

_WORDS = [
    "gemini",
    "capsule",
    "tilde",
    "smolnet",
    "log",
    "post",
    "about",
    "the",
    "of",
    "and",
    "a",
    "to",
    "in",
    "is",
    "that",
    "it",
    "for",
    "on",
    "with",
    "as",
    "was",
    "café",
    "naïve",
    "über",
    "résumé",
    "日本語",
    "проект",
    "space",
    "orbit",
    "sextant",
    "star",
]


def _sentence(rng: random.Random, low: int = 4, high: int = 20) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))


def _link_target(rng: random.Random) -> str:
    """One link as an author would write it."""
    kind = rng.random()
    name = rng.choice(_WORDS)
    if kind < 0.35:
        return f"{name}/{rng.randint(1, 999)}.gmi"
    if kind < 0.50:
        return f"../{name}/index.gmi"
    if kind < 0.60:
        return f"/~{name}/log/{rng.randint(2019, 2025)}-{rng.randint(1, 12):02d}.gmi"
    if kind < 0.80:
        host = rng.choice(["example.org", "Tilde.Team", "gemini.circumlunar.space", "bücher.de"])
        port = rng.choice(["", "", "", ":1965", ":1966"])
        return f"gemini://{host}{port}/{name}/./x/../page%7e{rng.randint(1, 99)}.gmi"
    if kind < 0.88:
        return f"search?{name}%20{rng.choice(_WORDS)}+more"
    if kind < 0.95:
        return f"https://www.example.com/{name}?q={rng.randint(1, 9)}"
    return f"{name} with spaces/é.gmi"


def make_page(rng: random.Random, size: int = PAGE_BYTES) -> str:
    parts: list[str] = ["# A generated capsule page\n"]
    total = len(parts[0])
    while total < size:
        roll = rng.random()
        if roll < 0.40:
            chunk = _sentence(rng, 10, 60) + "\n"
        elif roll < 0.65:
            chunk = f"=> {_link_target(rng)} {rng.choice(['', _sentence(rng, 1, 8)])}\n"
        elif roll < 0.72:
            chunk = f"{'#' * rng.randint(1, 3)} {_sentence(rng, 1, 6)}\n"
        elif roll < 0.82:
            chunk = f"* {_sentence(rng, 2, 10)}\n"
        elif roll < 0.87:
            chunk = f"> {_sentence(rng, 5, 25)}\n"
        elif roll < 0.93:
            body = "\n".join("  " + _sentence(rng, 1, 8) for _ in range(rng.randint(3, 15)))
            chunk = f"```{rng.choice(['', 'ascii art', 'python'])}\n{body}\n```\n"
        else:
            chunk = "\n"
        parts.append(chunk)
        total += len(chunk.encode())
    return "".join(parts)


def _respell(url: str) -> str:
    authority, _, path = url.removeprefix("gemini://").partition("/")
    if ":" not in authority:
        authority += ":1965"
    return f"GEMINI://{authority.upper()}/./{path}#fragment"


def _median_seconds(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _best_of_interleaved(
    first: Callable[[], object], second: Callable[[], object], runs: int
) -> tuple[float, float]:
    """The best time of each, taken in turns so that both meet the same load from other
    work, with the cyclic garbage collector off: its passes grow with whatever else is
    alive, not with the work measured."""
    times: tuple[list[float], list[float]] = ([], [])
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            for fn, sink in ((first, times[0]), (second, times[1])):
                start = time.perf_counter()
                fn()
                sink.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return min(times[0]), min(times[1])


def parse_growth(runs: int) -> tuple[float, float]:
    """Seconds to parse a 1 MiB page of every line type, and the same page four times over."""
    block = "# H\npara text here\n=> gemini://x.example/a/b Label\n* item\n> quote\n```\npre\n```\n"
    page = block * (1024 * 1024 // len(block))
    bigger = page * 4
    return _best_of_interleaved(lambda: gemtext.parse(page), lambda: gemtext.parse(bigger), runs)


def huge_links_cost(runs: int) -> tuple[float, float]:
    """Seconds for ``analyse`` of four 1 MiB link "URLs" of accented letters, and of prose of
    the same size: such a link is refused as it is read, never percent-encoded in full."""
    base = urls.parse("gemini://example.org/dir/page.gmi")
    gemini = MimeType.parse("text/gemini")
    huge = (("=> " + "é" * 512 * 1024 + " Huge\n") * 4 + "=> /fine Fine\n").encode()
    prose = ("word " * (len(huge) // 5)).encode()
    return _best_of_interleaved(
        lambda: analyse(base, huge, gemini), lambda: analyse(base, prose, gemini), runs
    )


def run(*, quick: bool = False, seed: int = 1965, links: int | None = None) -> dict[str, float]:
    """Print the report and return the headline figures for ``python -m bench``."""
    rng = random.Random(seed)
    runs = 3 if quick else 7
    link_count = links if links is not None else (10_000 if quick else 100_000)

    page = make_page(rng)
    size_mb = len(page.encode()) / 1e6
    doc = gemtext.parse(page)
    parse_s = _median_seconds(lambda: gemtext.parse(page), runs)
    print(
        f"gemtext.parse: {size_mb:.2f} MB, {page.count(chr(10))} lines, {len(doc.links)} links: "
        f"median {parse_s * 1e3:.1f} ms over {runs} runs = {size_mb / parse_s:.0f} MB/s"
    )

    one, four = parse_growth(runs)
    print(
        f"gemtext.parse growth: 1 MiB {one * 1e3:.0f} ms, 4 MiB {four * 1e3:.0f} ms = "
        f"{four / one:.1f}x (linear 4x, quadratic 16x; best of {runs}, interleaved)"
    )
    hostile, friendly = huge_links_cost(runs)
    print(
        f"analyse, four 1 MiB link URLs: {hostile * 1e3:.0f} ms against "
        f"{friendly * 1e3:.0f} ms for as much prose = {hostile / friendly:.1f}x"
    )

    base = urls.parse("gemini://example.org/~alice/log/2024/index.gmi")
    base_text = str(base)
    refs = [_link_target(rng) for _ in range(link_count)]
    absolutes = [urls.resolve(base, ref) for ref in refs]
    # Raw spellings of the absolute URLs (upper-case, default port, dot segment,
    # fragment), so normalize has real work to do rather than only the clean fast path.
    raws = [_respell(url) for url in absolutes if url.startswith("gemini:")]

    def per_call_us(fn: Callable[[str], object], items: list[str]) -> float:
        return _median_seconds(lambda: [fn(item) for item in items], 3) / len(items) * 1e6

    normalize_us = per_call_us(urls.normalize, raws)
    print(f"urls.normalize: {normalize_us:.2f} µs/call over {len(raws)} absolute URLs")
    resolve_us = per_call_us(lambda ref: urls.resolve(base, ref), refs)
    print(f"urls.resolve (GeminiURL base): {resolve_us:.2f} µs/call over {len(refs)} links")
    resolve_str_us = per_call_us(lambda ref: urls.resolve(base_text, ref), refs)
    print(f"urls.resolve (str base): {resolve_str_us:.2f} µs/call over {len(refs)} links")
    # Reference point only: urljoin does less (no normalization, no validation).
    urljoin_us = per_call_us(lambda ref: urllib.parse.urljoin(base_text, ref), refs)
    print(f"urllib.parse.urljoin (for comparison): {urljoin_us:.2f} µs/call")

    return {
        "gemtext.parse 1 MiB page (ms, median)": parse_s * 1e3,
        "gemtext.parse throughput (MB/s)": size_mb / parse_s,
        "gemtext.parse time, 4 MiB over 1 MiB (x, linear 4)": four / one,
        "analyse, four 1 MiB link URLs over as much prose (x)": hostile / friendly,
        "urls.normalize (µs/call)": normalize_us,
        "urls.resolve, GeminiURL base (µs/call)": resolve_us,
        "urls.resolve, str base (µs/call)": resolve_str_us,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k links instead of 100k")
    parser.add_argument("--seed", type=int, default=1965)
    parser.add_argument("--links", type=int, default=None)
    args = parser.parse_args()
    run(quick=args.quick, seed=args.seed, links=args.links)


if __name__ == "__main__":
    main()
