"""A generated Geminispace shaped like the real one, at any size (issue 21's benchmark).

Lupa's census counted about 600,000 URIs on about 4,200 capsules with a mean resource of
about 26 KB. The shape kept at every size (``pages`` scales the counts, not the shares):

* capsule sizes with a long tail: most capsules have a handful of pages, three archives hold
  2-4 % of all pages each (10,000+ at full size), two pubnixes serve 1,000+ ``~user``
  directories each (at full size) from one host and one address;
* an aggregator capsule (as Antenna or Cosmos are) links every capsule's root, so the whole
  space is reachable from a few seeds; about 85 % of the other links stay in their capsule;
* 40 % of capsules are gemlogs: dated entries, a ``/gemlog/`` index and an ``/atom.xml``
  feed; the rest are sites of nested pages;
* 5 % of resources are binaries (images, PDFs, archives, audio) with a lognormal size around
  150 KB; text is lognormal around 4 KB, so the mean resource is about 26 KB;
* languages per capsule (en, de, fr, es, it, ru), most declared in the ``lang`` parameter;
* a third of capsules serve a robots.txt that closes ``/private/``; a few trap capsules
  generate endless URLs (a calendar with a "next month" link for ever, a CGI that answers
  any query with links to further queries).

Nothing is held per page: a page is rendered on request from a hash of (capsule, number), so
the server's memory is the capsule table and generation costs what one request renders.
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cached_property

import numpy

from bench.bench_capsule import vocabulary
from bench.bench_index import COMMON, FOREIGN

FULL_PAGES = 600_000
FULL_CAPSULES = 4_200
PUBNIX_USERS = (1_200, 1_050)  # ~user directories of the two pubnixes at full size
ARCHIVE_PAGES = (25_000, 15_000, 12_000)  # the big capsules at full size
BINARY_SHARE = 0.05
GEMLOG_SHARE = 0.40
ROBOTS_SHARE = 0.33
CROSS_LINK_SHARE = 0.15
TRAP_KINDS = ("calendar", "cgi")
FANOUT = 6  # children of a page in a site's tree: depth stays well under --max-depth
TEXT_MEDIAN, TEXT_SIGMA, TEXT_CAP = 4_000, 1.1, 400_000
BINARY_MEDIAN, BINARY_SIGMA, BINARY_CAP = 170_000, 1.35, 5_000_000
BINARY_TYPES = (
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("pdf", "application/pdf"),
    ("zip", "application/zip"),
    ("mp3", "audio/mpeg"),
)
LANG_SHARE = {"en": 0.68, "de": 0.08, "fr": 0.08, "es": 0.07, "it": 0.04, "ru": 0.05}
EXTRA_WORDS = {
    "it": """
    il di che e la un a per non in una sono mi ho lo ma ha le si ti con cosa se io come da
    questo qui hai bene tu sei del anche era mio solo della tutto nel loro sempre casa
    giardino pane ricetta capsula città acqua oggi perché molto
    """.split(),  # noqa: SIM905 - a word list reads best as text
    "ru": """
    и в не на я быть он с что а по это она этот к но они мы как из у который то за свой
    весь год от так о для ты же все тот мочь вы человек такой его сказать только или ещё
    дом сад хлеб рецепт капсула город вода сегодня
    """.split(),  # noqa: SIM905
}
FOREIGN_WORDS = {**FOREIGN, **EXTRA_WORDS}
_NUMBER = re.compile(r"(\d+)(?:\.\w+)?$")


def _mix(*parts: int) -> int:
    """A stable hash of small integers: the same page renders the same on every request."""
    return zlib.crc32(b"%d" % parts[0] + b"".join(b":%d" % p for p in parts[1:]))


@dataclass(frozen=True)
class Capsule:
    index: int
    host: str
    kind: str  # aggregator, site, gemlog, archive, pubnix, trap-calendar, trap-cgi
    pages: int  # resources numbered 0..pages-1 (page 0 is the root)
    lang: str
    declares_lang: bool
    robots: bool
    users: tuple[int, ...] = ()  # a pubnix: pages of each ~user directory

    @cached_property
    def user_starts(self) -> list[int]:
        """First page number of each ~user directory (page 0 is the pubnix's root)."""
        return list(itertools.accumulate(self.users, initial=1))[:-1]


class ScaleSpace:
    """The layout of a generated space and the renderer of its pages."""

    def __init__(self, pages: int = FULL_PAGES, seed: int = 21) -> None:
        self.seed = seed
        rng = numpy.random.default_rng(seed)
        scale = pages / FULL_PAGES
        count = max(12, round(FULL_CAPSULES * scale))
        capsules: list[Capsule] = []
        langs = rng.choice(list(LANG_SHARE), size=count, p=list(LANG_SHARE.values()))

        def common(index: int, host: str, kind: str, size: int, **extra: object) -> Capsule:
            lang = str(langs[index]) if kind not in ("pubnix", "aggregator") else "en"
            return Capsule(
                index=index,
                host=host,
                kind=kind,
                pages=size,
                lang=lang,
                declares_lang=lang == "en" or rng.random() < 0.6,
                robots=kind != "aggregator" and rng.random() < ROBOTS_SHARE,
                **extra,  # type: ignore[arg-type]
            )

        for n, full_users in enumerate(PUBNIX_USERS):
            users = max(5, round(full_users * scale))
            # Most users keep a page or two, a few a whole gemlog: mean about 7 pages.
            user_sizes = tuple(int(s) for s in numpy.minimum(rng.pareto(1.6, users) * 4 + 1, 400))
            capsules.append(
                common(
                    len(capsules),
                    f"pubnix{n}.example",
                    "pubnix",
                    1 + sum(user_sizes),
                    users=user_sizes,
                )
            )
        for full in ARCHIVE_PAGES:
            capsules.append(
                common(
                    len(capsules), f"capsule{len(capsules)}.example", "archive", round(full * scale)
                )
            )
        traps = max(len(TRAP_KINDS), round(count * 0.0015))
        for n in range(traps):
            kind = f"trap-{TRAP_KINDS[n % len(TRAP_KINDS)]}"
            capsules.append(common(len(capsules), f"capsule{len(capsules)}.example", kind, 3))
        rest = count - len(capsules) - 1
        aggregator_pages = max(1, (count + 49) // 50)  # 50 capsule links a page
        left = max(rest, pages - sum(c.pages for c in capsules) - aggregator_pages)
        # A "small" capsule stays below the archives, as at full size; but a small run has
        # few capsules for many pages, so the cap never drops below four times their mean.
        cap = max(ARCHIVE_PAGES[-1] * scale * 0.6, 4 * left / max(rest, 1))
        sizes = _tail_sizes(rng, rest, left, cap=cap)
        kinds = numpy.where(rng.random(rest) < GEMLOG_SHARE, "gemlog", "site")
        for size, kind in zip(sizes, kinds, strict=True):
            capsules.append(
                common(len(capsules), f"capsule{len(capsules)}.example", str(kind), size)
            )
        capsules.append(common(len(capsules), "aggregator.example", "aggregator", aggregator_pages))
        self.capsules = capsules
        self.by_host = {c.host: c for c in capsules}
        self.aggregator = capsules[-1]
        # Cross-capsule links favour some capsules (popular ones get linked by everyone).
        popularity = rng.pareto(1.0, len(capsules)) + 0.05
        self._popular = list(itertools.accumulate(popularity / popularity.sum()))
        self._bodies = _Words(seed)
        self._binary = random.Random(seed).randbytes(BINARY_CAP)

    def vocabulary(self) -> list[str]:
        """The words pages are made of, commonest first (for drawing queries)."""
        return self._bodies.vocabulary.tolist()

    @property
    def pages(self) -> int:
        return sum(c.pages for c in self.capsules)

    def largest_address_pages(self) -> int:
        """Pages behind the busiest address: politeness makes its crawl the longest."""
        return max(c.pages for c in self.capsules)

    # --- what a page is --------------------------------------------------------------------

    def is_binary(self, capsule: Capsule, number: int) -> bool:
        if number == 0 or capsule.kind == "aggregator" or capsule.kind.startswith("trap"):
            return False
        if capsule.kind == "pubnix" and self._user_first(capsule, number) == number:
            return False
        return _mix(self.seed, capsule.index, number, 1) % 10_000 < BINARY_SHARE * 10_000

    def size_of(self, capsule: Capsule, number: int) -> int:
        rng = random.Random(_mix(self.seed, capsule.index, number, 2))
        if self.is_binary(capsule, number):
            return min(BINARY_CAP, int(rng.lognormvariate(0, BINARY_SIGMA) * BINARY_MEDIAN))
        return max(200, min(TEXT_CAP, int(rng.lognormvariate(0, TEXT_SIGMA) * TEXT_MEDIAN)))

    def path(self, capsule: Capsule, number: int) -> str:
        if number == 0:
            return "/"
        if capsule.kind == "pubnix":
            user = bisect.bisect_right(capsule.user_starts, number) - 1
            first = capsule.user_starts[user]
            if number == first:
                return f"/~user{user}/"
            return f"/~user{user}/{self._leaf(capsule, number)}"
        if capsule.kind == "aggregator":
            return f"/list/{number}.gmi"
        leaf = self._leaf(capsule, number)
        if capsule.robots and number % 50 == 7:
            return f"/private/{leaf}"
        if capsule.kind == "gemlog" and not self.is_binary(capsule, number):
            return f"/gemlog/{leaf}"
        return f"/{leaf}"

    def _user_first(self, capsule: Capsule, number: int) -> int:
        """The first page of the ~user directory that holds page ``number``."""
        return capsule.user_starts[bisect.bisect_right(capsule.user_starts, number) - 1]

    def _leaf(self, capsule: Capsule, number: int) -> str:
        if self.is_binary(capsule, number):
            extension = BINARY_TYPES[_mix(self.seed, capsule.index, number, 3) % 5][0]
            return f"files/{number}.{extension}"
        if capsule.kind == "gemlog":
            return f"{self.entry_date(capsule, number).isoformat()}-{number}.gmi"
        return f"p/{number}.gmi"

    def entry_date(self, capsule: Capsule, number: int) -> date:
        """Entries go back from 2026 a few days apart, newest first by number."""
        return date(2026, 11, 30) - timedelta(days=number * 3 + capsule.index % 7)

    def number_of(self, capsule: Capsule, path: str) -> int | None:
        """The page a path names, or None (and so 51) for any other path."""
        if path == "/":
            return 0
        if capsule.kind == "pubnix" and path.startswith("/~user") and path.endswith("/"):
            user = path[6:-1]
            if user.isdigit() and int(user) < len(capsule.users):
                return capsule.user_starts[int(user)]
            return None
        match = _NUMBER.search(path)
        if match is None:
            return None
        number = int(match.group(1))
        if 0 < number < capsule.pages and self.path(capsule, number) == path:
            return number
        return None

    # --- links -----------------------------------------------------------------------------

    def links(self, capsule: Capsule, number: int) -> list[tuple[int, int]]:
        """(capsule, page) targets of a text page: a tree, its neighbours, some elsewhere."""
        rng = random.Random(_mix(self.seed, capsule.index, number, 4))
        if capsule.kind == "aggregator":
            first = number * 50
            listed = [(c, 0) for c in range(first, min(first + 50, len(self.capsules) - 1))]
            pages = [(capsule.index, n) for n in range(1, capsule.pages)] if number == 0 else []
            return pages + listed
        lo, hi = 1, capsule.pages
        if capsule.kind == "pubnix":
            if number == 0:
                return [(capsule.index, start) for start in capsule.user_starts]
            user = bisect.bisect_right(capsule.user_starts, number) - 1
            lo = capsule.user_starts[user]
            hi = lo + capsule.users[user]
        targets = [
            (capsule.index, child)
            for child in range(
                (number - lo) * FANOUT + lo + 1, (number - lo) * FANOUT + lo + FANOUT + 1
            )
            if lo < child < hi
        ]
        if number > lo:
            targets.append((capsule.index, lo + (number - lo - 1) // FANOUT))
        for _ in range(min(rng.randint(0, 6), max(hi - lo - 1, 0))):
            targets.append((capsule.index, rng.randrange(lo, hi)))
        while rng.random() < CROSS_LINK_SHARE * 2:
            other = min(bisect.bisect(self._popular, rng.random()), len(self.capsules) - 1)
            page = 0 if rng.random() < 0.7 else rng.randrange(self.capsules[other].pages)
            targets.append((other, page))
            if rng.random() < 0.5:
                break
        return targets

    # --- rendering -------------------------------------------------------------------------

    def render(self, capsule: Capsule, number: int, origin: Callable[[int], str]) -> bytes:
        """The body of page ``number``; ``origin(capsule)`` gives gemini://host:port."""
        if self.is_binary(capsule, number):
            size = self.size_of(capsule, number)
            start = _mix(self.seed, capsule.index, number, 5) % (BINARY_CAP - size + 1)
            return self._binary[start : start + size]
        rng = numpy.random.default_rng(_mix(self.seed, capsule.index, number, 6))
        size = self.size_of(capsule, number)
        lines = [f"# {self._bodies.title(rng, capsule.lang)}", ""]
        if capsule.kind == "gemlog" and number:
            lines += [f"Posted {self.entry_date(capsule, number).isoformat()}", ""]
        if number == 0 and capsule.kind == "gemlog":
            lines += ["=> /gemlog/ Gemlog", "=> /atom.xml Atom feed", ""]
        if number == 0 and capsule.kind.startswith("trap"):
            lines += [f"=> {self.trap_entry(capsule)} Calendar and search", ""]
        links = self.links(capsule, number)
        budget = size
        paragraphs = 0
        for target, page in links:
            url = self.url(target, page, origin)
            label = self._bodies.title(rng, self.capsules[target].lang)
            line = f"=> {url} {label}"
            budget -= len(line)
            lines.append(line)
            if paragraphs < 40 and budget > 0 and rng.random() < 0.4:
                text = self._bodies.paragraph(rng, capsule.lang, min(budget, 900))
                budget -= len(text) + 1
                lines.append(text)
                paragraphs += 1
        while budget > 0:
            if rng.random() < 0.15:
                lines.append(f"## {self._bodies.title(rng, capsule.lang)}")
            text = self._bodies.paragraph(rng, capsule.lang, min(budget, 900))
            budget -= len(text.encode()) + 1
            lines.append(text)
        return ("\n".join(lines) + "\n").encode()

    def url(self, capsule: int, page: int, origin: Callable[[int], str]) -> str:
        return origin(capsule) + self.path(self.capsules[capsule], page)

    def meta(self, capsule: Capsule, number: int) -> str:
        if self.is_binary(capsule, number):
            return BINARY_TYPES[_mix(self.seed, capsule.index, number, 3) % 5][1]
        if capsule.declares_lang:
            return f"text/gemini; charset=utf-8; lang={capsule.lang}"
        return "text/gemini"

    def gemlog_index(self, capsule: Capsule) -> str:
        """The /gemlog/ page: a gemfeed of the newest 200 entries (what gemlog tools write)."""
        lines = [f"# {capsule.host} gemlog", ""]
        for number in self._entries(capsule):
            day = self.entry_date(capsule, number).isoformat()
            lines.append(f"=> {self.path(capsule, number)} {day} Entry {number}")
        return "\n".join(lines) + "\n"

    def atom_feed(self, capsule: Capsule, origin: str) -> str:
        entries = "".join(
            f"<entry><title>Entry {n}</title><link href='{origin}{self.path(capsule, n)}'/>"
            f"<updated>{self.entry_date(capsule, n).isoformat()}T12:00:00Z</updated></entry>"
            for n in itertools.islice(self._entries(capsule), 20)
        )
        return (
            "<?xml version='1.0' encoding='utf-8'?><feed xmlns='http://www.w3.org/2005/Atom'>"
            f"<title>{capsule.host}</title>{entries}</feed>"
        )

    def _entries(self, capsule: Capsule) -> Iterator[int]:
        found = 0
        for number in range(1, capsule.pages):
            if found == 200:
                return
            if self.path(capsule, number).startswith("/gemlog/"):
                found += 1
                yield number

    def robots_txt(self, capsule: Capsule) -> str:
        return "User-agent: *\nDisallow: /private/\n"

    def trap(self, capsule: Capsule, path: str, query: str | None) -> str | None:
        """The endless part of a trap capsule, or None if the path is not in it."""
        if capsule.kind == "trap-calendar" and path.startswith("/cal/"):
            parts = path[5:].strip("/").split("/")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                return None
            year, month = int(parts[0]), int(parts[1])
            after = (year + month // 12, month % 12 + 1)
            before = (year - (month == 1), (month - 2) % 12 + 1)
            return (
                f"# Calendar {year}-{month:02}\n\nNothing planned.\n"
                f"=> /cal/{before[0]}/{before[1]:02}/ Previous month\n"
                f"=> /cal/{after[0]}/{after[1]:02}/ Next month\n"
            )
        if capsule.kind == "trap-cgi" and path == "/search":
            words = (query or "gemini").split("+")[:50]
            more = "".join(
                f"=> /search?{'+'.join([*words, extra])} More about {extra}\n"
                for extra in ("solar", "garden", "linux", "poem")
            )
            return f"# Results for {' '.join(words)}\n\nNo results.\n{more}"
        return None

    def trap_entry(self, capsule: Capsule) -> str:
        return "/cal/2026/11/" if capsule.kind == "trap-calendar" else "/search?gemini"


def _tail_sizes(rng: numpy.random.Generator, count: int, total: int, cap: float) -> list[int]:
    """``count`` capsule sizes summing to about ``total``: lognormal (most capsules hold a
    few pages, some hundreds), none above ``cap`` so the archives stay the biggest."""
    weights = rng.lognormal(0, 1.6, count)
    sizes = weights / weights.sum() * total
    for _ in range(20):  # what the cap cuts off goes to the others, in proportion
        over = numpy.maximum(sizes - cap, 0).sum()
        sizes = numpy.minimum(sizes, cap)
        if over < 1:
            break
        room = sizes < cap
        sizes[room] += over * sizes[room] / sizes[room].sum()
    return [max(1, int(size)) for size in sizes]


class _Words:
    """Zipf-distributed words per language: real English words first (the frequent ones),
    then bench_capsule's invented ones (the many rare); other languages mix in 60 % of
    their own common words (bench_index's lists and two more), enough for py3langid.

    Drawn with numpy a page at a time: word by word in Python would cost the server more
    than the crawler's whole fetch."""

    def __init__(self, seed: int) -> None:
        invented = vocabulary(30_000, random.Random(seed))
        self.vocabulary = numpy.array(list(dict.fromkeys(COMMON + invented)), dtype=object)
        weights = 1.0 / numpy.arange(1, len(self.vocabulary) + 1) ** 1.07
        self.cumulative = numpy.cumsum(weights / weights.sum())
        self.foreign = {
            lang: numpy.array(words, dtype=object) for lang, words in FOREIGN_WORDS.items()
        }

    def words(self, rng: numpy.random.Generator, lang: str, count: int) -> list[str]:
        chosen = self.vocabulary[numpy.searchsorted(self.cumulative, rng.random(count))]
        if lang != "en":
            foreign = self.foreign[lang]
            mask = rng.random(count) < 0.6
            chosen[mask] = foreign[rng.integers(0, len(foreign), int(mask.sum()))]
        return chosen.tolist()

    def paragraph(self, rng: numpy.random.Generator, lang: str, budget: int) -> str:
        return " ".join(self.words(rng, lang, max(4, budget // 6))).capitalize() + "."

    def title(self, rng: numpy.random.Generator, lang: str) -> str:
        return " ".join(self.words(rng, lang, int(rng.integers(2, 6)))).capitalize()
