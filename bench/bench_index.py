"""Indexing and query speed on a generated Geminispace: our build against a naive Whoosh one.

Issue 4's targets, on 100,000 pages of 1-8 KB: query p99 ≤ 50 ms with a warm searcher; a full
build at least twice as fast as a default-settings Whoosh writer measured in the same run; an
incremental run over 1% changed pages in under 10% of the full build's time. Run:

    .venv/bin/python -m bench.bench_index [--quick] [--pages N] [--naive-pages N] [--keep DIR]

The corpus is seeded: capsules of uneven size; gemtext pages with headings, paragraphs and
link lines; words drawn from a Zipf distribution over a vocabulary of real English words
followed by generated ones (so frequent words are real, rare ones are many); 15% of pages in
German, French or Spanish, a third of those without a declared language (detection runs);
about eight links per page, three quarters inside the capsule, with labels.

The naive writer is what a first Whoosh program looks like: ``TEXT`` fields with the stemming
analyzer, the body stored for highlighting, one default ``ix.writer()``, one commit. It reads
the same pages from the same store through the same gemtext parser, so the comparison is of
indexing, not of data access. On the full size it indexes the first ``--naive-pages`` pages
only (20,000 by default: at its speed the whole corpus would take many minutes); docs/s is
what is compared, and a naive writer only slows down as its index grows.

Queries (320, the same for both indexes where they apply): single content words, ANDs of two
or three, two-word phrases taken from page texts, and filters (``site:``, ``lang:``, ``type:``,
``size:``) combined with a word; five stop-word-only phrases ("of the") are timed apart.
Latency is the whole ``Searcher.search`` call, snippets from the store included, wall clock.
Build throughput is wall clock on a shared 2-core machine, where other work can take a core
away from one side of the comparison; the same figure per CPU second (all processes) is
reported beside it. The headline query figures are for a warm searcher (one that has
answered 320 other queries drawn the same way, so the posting lists of common words are
decoded and cached); a fresh searcher's figures are reported too.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy

FULL_PAGES = 100_000
QUICK_PAGES = 3_000
NAIVE_PAGES = 20_000
LINKS_PER_PAGE = 8
SEED = 4

COMMON = """
the of and to a in is it you that he was for on are with as I his they be at one have this
from or had by hot word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so
these her long make thing see him two has look more day could go come did number sound no
most people my over know water than call first who may down side been now find any new work
part take get place made live where after back little only round man year came show every
good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air
well also play small end put home read hand port large spell add even land here must big
high such follow act why ask men change went light kind off need house picture try us again
animal point mother world near build self earth father head stand own page should country
found answer school grow study still learn plant cover food sun four between state keep eye
never last let thought city tree cross farm hard start might story saw far sea draw left
late run while press close night real life few north open seem together next white children
begin got walk example ease paper group always music those both mark often letter until mile
river car feet care second book carry took science eat room friend began idea fish mountain
stop once base hear horse cut sure watch color face wood main enough plain girl usual young
ready above ever red list though feel talk bird soon body dog family direct pose leave song
measure door product black short numeral class wind question happen complete ship area half
rock order fire south problem piece told knew pass since top whole king space heard best
hour better true during hundred five remember step early hold west ground interest reach
fast verb sing listen six table travel less morning ten simple several vowel toward war lay
against pattern slow center love person money serve appear road map rain rule govern pull
cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan
figure star box noun field rest correct able pound done beauty drive stood contain front
teach week final gave green oh quick develop ocean warm free minute strong special mind
behind clear tail produce fact street inch multiply nothing course stay wheel full force
blue object decide surface deep moon island foot system busy test record boat common gold
possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought
heat snow tire bring yes distant fill east paint language among gemini capsule protocol
gemlog client server certificate garden bread recipe cycling terminal linux editor poem
""".split()  # noqa: SIM905 - a word list reads best as text

FOREIGN = {
    "de": """
    der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es
    an werden aus er hat dass sie nach wird bei einer um am sind noch wie einem über einen
    so zum war haben nur oder aber vor zur bis mehr durch man sein wurde sei haus garten
    brot rezept kapsel stadt wasser heute
    """.split(),  # noqa: SIM905
    "fr": """
    le de un être et à il avoir ne je son que se qui ce dans en du elle au pour pas que vous
    par sur faire plus dire me on mon lui nous comme mais pouvoir avec tout y aller voir
    bien où sans tu ou leur homme si deux mari moi vouloir te femme venir quand grand celui
    maison jardin pain recette capsule ville eau
    """.split(),  # noqa: SIM905
    "es": """
    el la de que y a en un ser se no haber por con su para como estar tener le lo todo pero
    más hacer o poder decir este ir otro ese si me ya ver porque dar cuando él muy sin vez
    mucho saber qué sobre mi alguno mismo yo también hasta casa jardín pan receta cápsula
    ciudad agua
    """.split(),  # noqa: SIM905
}
LANG_SHARE = {"en": 0.85, "de": 0.05, "fr": 0.05, "es": 0.05}
SYLLABLES = [
    "ka",
    "ri",
    "to",
    "mo",
    "na",
    "shi",
    "lu",
    "ve",
    "pe",
    "ra",
    "zo",
    "qui",
    "fen",
    "dal",
    "bor",
    "sen",
    "tik",
    "mar",
    "lo",
    "pa",
]


def _vocabulary(rng: numpy.random.Generator, size: int = 40_000) -> list[str]:
    words = list(dict.fromkeys(COMMON))
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class Corpus:
    """The generated pages: bodies, languages, links (kept for building queries)."""

    def __init__(self, pages: int, seed: int = SEED) -> None:
        self.rng = numpy.random.default_rng(seed)
        self.pages = pages
        self.vocabulary = _vocabulary(self.rng)
        ranks = numpy.arange(1, len(self.vocabulary) + 1)
        weights = 1.0 / ranks**1.07
        self.word_p = weights / weights.sum()
        capsules = max(pages // 40, 1)
        sizes = self.rng.pareto(1.3, capsules) + 1
        self.capsule_of = numpy.sort(self.rng.choice(capsules, size=pages, p=sizes / sizes.sum()))
        self.capsules = capsules
        langs = list(LANG_SHARE)
        self.lang = self.rng.choice(langs, size=pages, p=list(LANG_SHARE.values()))
        self.declared = self.rng.random(pages) < numpy.where(self.lang == "en", 0.9, 0.66)
        self.mime = numpy.where(self.rng.random(pages) < 0.06, "text/plain", "text/gemini")
        self.lengths = self.rng.integers(1024, 8 * 1024, pages)

    def url(self, page: int) -> str:
        return f"gemini://c{self.capsule_of[page]}.example/p{page}.gmi"

    def links(self, page: int) -> list[int]:
        count = int(self.rng.poisson(LINKS_PER_PAGE))
        capsule = self.capsule_of[page]
        first = int(numpy.searchsorted(self.capsule_of, capsule))
        last = int(numpy.searchsorted(self.capsule_of, capsule, side="right"))
        targets = []
        for _ in range(count):
            if self.rng.random() < 0.75 and last - first > 1:
                targets.append(int(self.rng.integers(first, last)))
            else:
                targets.append(int(min(self.rng.zipf(1.5) - 1, self.pages - 1)))
        return [t for t in targets if t != page]

    def words(self, count: int, lang: str) -> list[str]:
        chosen = [
            self.vocabulary[i] for i in self.rng.choice(len(self.vocabulary), count, p=self.word_p)
        ]
        if lang != "en":
            foreign = FOREIGN[lang]
            picks = self.rng.integers(0, len(foreign), count)
            mask = self.rng.random(count) < 0.6
            chosen = [foreign[p] if m else w for w, p, m in zip(chosen, picks, mask, strict=True)]
        return chosen

    def body(self, page: int, links: list[int]) -> str:
        lang = str(self.lang[page])
        budget = int(self.lengths[page])
        words = self.words(budget // 6 + 20, lang)
        lines = [f"# {' '.join(words[:4]).capitalize()}", ""]
        at = 4
        link_labels = iter(links)
        while at < len(words):
            size = int(self.rng.integers(15, 60))
            lines.append(" ".join(words[at : at + size]).capitalize() + ".")
            at += size
            roll = self.rng.random()
            if roll < 0.15:
                lines.append(f"## {' '.join(words[at : at + 3])}")
                at += 3
            elif roll < 0.45:
                target = next(link_labels, None)
                if target is not None:
                    lines.append(f"=> {self.url(target)} {' '.join(words[at : at + 3])}")
                    at += 3
        for target in link_labels:
            lines.append(f"=> {self.url(target)} {' '.join(self.words(3, lang))}")
        return "\n".join(lines) + "\n"


def generate(path: Path, corpus: Corpus) -> list[str]:
    """Write the corpus into a migrated SQLite store; returns a sample of bodies for queries."""
    from sextant.store.migrate import open_store

    open_store(f"sqlite:///{path}").dispose()
    now = (datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)).isoformat(sep=" ")
    samples: list[str] = []
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA synchronous=OFF")
    with connection:
        connection.executemany(
            "INSERT INTO capsules (id, host, port, display_host, first_seen_at,"
            " consecutive_failures) VALUES (?,?,1965,?,?,0)",
            ((c + 1, f"c{c}.example", f"c{c}.example", now) for c in range(corpus.capsules)),
        )
        link_rows: list[tuple[object, ...]] = []

        def page_rows() -> Iterator[tuple[object, ...]]:
            for page in range(corpus.pages):
                links = corpus.links(page)
                body = corpus.body(page, links)
                if page % 97 == 0:
                    samples.append(body)
                for position, target in enumerate(links):
                    cross = bool(corpus.capsule_of[target] != corpus.capsule_of[page])
                    label = " ".join(corpus.words(3, str(corpus.lang[page])))
                    link_rows.append(
                        (page + 1, corpus.url(target), target + 1, label, position, cross, now)
                    )
                mime = str(corpus.mime[page])
                lang = str(corpus.lang[page]) if corpus.declared[page] else None
                yield (
                    page + 1,
                    corpus.url(page),
                    int(corpus.capsule_of[page]) + 1,
                    f"c{corpus.capsule_of[page]}.example",
                    "ok",
                    20,
                    mime,
                    mime,
                    lang,
                    "utf-8",
                    len(body.encode()),
                    body,
                    f"{page:064x}",
                    now,
                    now,
                    now,
                )

        connection.executemany(
            "INSERT INTO pages (id, url, capsule_id, scope, depth, state, status, meta, mime,"
            " lang, charset, size, body, content_hash, discovered_at, updated_at, fetched_at,"
            " charset_detected, truncated, possibly_truncated, change_count,"
            " consecutive_failures) VALUES (?,?,?,?,0,?,?,?,?,?,?,?,?,?,?,?,?,0,0,0,0,0)",
            page_rows(),
        )
        connection.executemany(
            "INSERT INTO links (source_id, target_url, target_id, target_scheme, label,"
            " position, cross_capsule, first_seen_at) VALUES (?,?,?,'gemini',?,?,?,?)",
            link_rows,
        )
    connection.close()
    return samples


def make_queries(
    corpus: Corpus, samples: list[str], count: int = 320, seed: int = SEED + 1
) -> list[tuple[str, str]]:
    """(kind, query) pairs, seeded: a quarter each of single words, ANDs of two or three
    words, two-word phrases and filters with a word.

    Query words are content words, as people type them: drawn log-uniformly by frequency rank
    between 100 and 20,000 (the 100 commonest words of the corpus are the, of, and...).
    Phrases are adjacent word pairs from page texts, keeping pairs with at least one such
    word ("the garden", not "of the"); stop-word-only phrases get their own measurement
    (a sampled path; see indexer.query._phrase_hits), reported separately.
    """
    from indexer.analysis import words

    rng = numpy.random.default_rng(seed)
    vocabulary = corpus.vocabulary
    rank_of = {word: rank for rank, word in enumerate(vocabulary)}

    def content_word() -> str:
        rank = int(numpy.exp(rng.uniform(numpy.log(100), numpy.log(20_000))))
        return vocabulary[min(rank, len(vocabulary) - 1)]

    queries: list[tuple[str, str]] = []
    quarter = count // 4
    for _ in range(quarter):
        queries.append(("word", content_word()))
    for _ in range(quarter):
        size = int(rng.integers(2, 4))
        queries.append(("and", " ".join(content_word() for _ in range(size))))
    while len(queries) < 3 * quarter:
        text = samples[int(rng.integers(0, len(samples)))]
        tokens = [w.text.lower() for w in words(text.split("\n", 2)[-1])]
        at = int(rng.integers(0, max(len(tokens) - 2, 1)))
        pair = tokens[at : at + 2]
        if len(pair) == 2 and max(rank_of.get(word, 0) for word in pair) >= 100:
            queries.append(("phrase", f'"{" ".join(pair)}"'))
    for i in range(count - 3 * quarter):
        word = content_word()
        capsule = int(corpus.capsule_of[int(rng.integers(0, corpus.pages))])
        queries.append(
            (
                "filter",
                [
                    f"site:c{capsule}.example {word}",
                    f"lang:de {rng.choice(FOREIGN['de'])}",
                    f"type:text/plain {word}",
                    f"size:>4K {word}",
                ][i % 4],
            )
        )
    for stopwords in ("of the", "the the", "to a", "and the", "in a"):
        queries.append(("stopword phrase", f'"{stopwords}"'))
    return queries


def naive_build(db_url: str, directory: Path, limit: int) -> tuple[int, float]:
    """A default-settings Whoosh writer over the same pages; returns (documents, seconds)."""
    from sqlalchemy import select
    from whoosh import fields, index
    from whoosh.analysis import StemmingAnalyzer

    from sextant import gemtext
    from sextant.store import make_engine
    from sextant.store.models import Page

    schema = fields.Schema(
        url=fields.ID(stored=True, unique=True),
        title=fields.TEXT(stored=True, analyzer=StemmingAnalyzer()),
        headings=fields.TEXT(analyzer=StemmingAnalyzer()),
        body=fields.TEXT(stored=True, analyzer=StemmingAnalyzer()),
    )
    directory.mkdir(parents=True)
    started = time.perf_counter()
    ix = index.create_in(str(directory), schema)
    writer = ix.writer()
    engine = make_engine(db_url)
    count = 0
    with engine.connect() as connection:
        query = (
            select(Page.url, Page.title, Page.mime, Page.body)
            .where(Page.state == "ok")
            .order_by(Page.id)
            .limit(limit)
        )
        for row in connection.execute(query):
            body = row.body or ""
            title = row.title or ""
            headings = ""
            if row.mime == "text/gemini":
                parsed = gemtext.parse(body)
                body, title = parsed.text, title or parsed.title or ""
                headings = "\n".join(h.text for h in parsed.headings)
            writer.add_document(url=row.url, title=title, headings=headings, body=body)
            count += 1
    writer.commit()
    engine.dispose()
    return count, time.perf_counter() - started


def naive_latencies(directory: Path, queries: list[tuple[str, str]]) -> list[float]:
    from whoosh import index
    from whoosh.qparser import MultifieldParser

    ix = index.open_dir(str(directory))
    parser = MultifieldParser(["title", "headings", "body"], ix.schema)
    timings: list[float] = []
    with ix.searcher() as searcher:
        for kind, text in queries:
            if kind == "filter":
                continue
            started = time.perf_counter()
            results = searcher.search(parser.parse(text), limit=10)
            for hit in results:
                hit.highlights("body")
            len(results)
            timings.append(time.perf_counter() - started)
    return timings


def percentile(values: list[float], q: float) -> float:
    return float(numpy.percentile(numpy.asarray(values), q)) if values else 0.0


def touch_one_percent(path: Path, pages: int) -> int:
    """Change 1% of pages as a re-crawl would: new text, new hash, updated_at now."""
    rng = numpy.random.default_rng(SEED + 2)
    chosen = rng.choice(pages, size=max(pages // 100, 1), replace=False) + 1
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
    connection = sqlite3.connect(path)
    with connection:
        connection.executemany(
            "UPDATE pages SET body = body || ?, content_hash = ?, updated_at = ? WHERE id = ?",
            (("\nAn update with a fresh sentence.\n", f"changed-{i}", now, int(i)) for i in chosen),
        )
    connection.close()
    return len(chosen)


def touch_back(path: Path) -> None:
    """Put a reused store's timestamps back in the past, as generated."""
    past = (datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)).isoformat(sep=" ")
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("UPDATE pages SET updated_at = ?", (past,))
    connection.close()


def run(
    *,
    quick: bool = False,
    pages: int | None = None,
    naive_pages: int | None = None,
    keep: Path | None = None,
) -> dict[str, float | str]:
    from indexer.build import run_index
    from indexer.query import Searcher
    from sextant.store import make_engine
    from sextant.store.migrate import upgrade

    pages = pages or (QUICK_PAGES if quick else FULL_PAGES)
    naive_limit = min(pages, naive_pages or NAIVE_PAGES)
    root = keep or Path(tempfile.mkdtemp(prefix="bench-index-"))
    root.mkdir(parents=True, exist_ok=True)
    db_path = root / "store.db"
    db_url = f"sqlite:///{db_path}"
    figures: dict[str, float | str] = {"pages": f"{pages:,}"}
    try:
        started = time.perf_counter()
        corpus = Corpus(pages)
        samples_path = root / "samples.json"
        if keep is not None and db_path.exists() and samples_path.exists():
            # A store kept by an earlier run with the same size and seed is the same corpus.
            samples = json.loads(samples_path.read_text(encoding="utf-8"))
            print(f"reusing the {pages:,}-page store in {root}", flush=True)
            upgrade(make_engine(db_url))  # kept from before a migration, perhaps
            touch_back(db_path)
        else:
            db_path.unlink(missing_ok=True)
            samples = generate(db_path, corpus)
            samples_path.write_text(json.dumps(samples), encoding="utf-8")
            print(f"generated {pages:,} pages in {time.perf_counter() - started:.1f} s", flush=True)
        queries = make_queries(corpus, samples)
        for stale in (root / "naive", root / "data"):
            shutil.rmtree(stale, ignore_errors=True)

        cpu = _cpu_seconds()
        count, seconds = naive_build(db_url, root / "naive", naive_limit)
        naive_cpu = _cpu_seconds() - cpu
        naive_rate = count / seconds
        print(f"naive: {count:,} docs in {seconds:.1f} s = {naive_rate:,.0f} docs/s", flush=True)

        index_dir = root / "data" / "index"
        cpu = _cpu_seconds()
        full = run_index(index_dir, db_url, rebuild=True)
        full_cpu = _cpu_seconds() - cpu
        print(
            f"sextant full: {full.documents:,} docs in {full.seconds:.1f} s = "
            f"{full.docs_per_second:,.0f} docs/s ({full.index_bytes / 2**20:,.0f} MB)",
            flush=True,
        )
        changed = touch_one_percent(db_path, pages)
        incremental = run_index(index_dir, db_url)
        print(
            f"sextant incremental: {incremental.indexed:,} docs ({changed:,} changed) in "
            f"{incremental.seconds:.1f} s = {100 * incremental.seconds / full.seconds:.1f}% "
            "of the full build",
            flush=True,
        )

        # "Warm" is a searcher that has served traffic: it answered a different query set
        # drawn the same way first, so common words' posting lists are decoded and cached,
        # the measured queries' rarer words mostly are not. "Cold" is a fresh searcher.
        searcher = Searcher(index_dir, db_url)
        searcher.search(queries[0][1])  # opening: arrays, field lengths
        cold = _latencies(searcher, queries)
        searcher.close()
        searcher = Searcher(index_dir, db_url)
        for _, text in make_queries(corpus, samples, seed=SEED + 99):
            searcher.search(text)
        latencies = _latencies(searcher, queries)
        searcher.close()
        every = _measured(latencies)
        cold_every = _measured(cold)
        naive_times = naive_latencies(root / "naive", queries)

        figures["naive writer docs/s (Whoosh defaults)"] = naive_rate
        figures["naive writer pages measured"] = f"{count:,}"
        figures["full build docs/s"] = full.docs_per_second
        figures["full build speed-up over naive (x)"] = full.docs_per_second / naive_rate
        figures["naive writer docs per CPU second"] = count / naive_cpu
        figures["full build docs per CPU second (all processes)"] = full.documents / full_cpu
        figures["full build seconds"] = full.seconds
        figures["link analysis seconds (during build)"] = full.rank_seconds
        figures["index size MB"] = full.index_bytes / 2**20
        figures["incremental 1% seconds"] = incremental.seconds
        figures["incremental 1% share of full build (%)"] = 100 * incremental.seconds / full.seconds
        figures["queries"] = (
            f"{len(every)} (+{len(latencies.get('stopword phrase', []))} stop-word phrases)"
        )
        figures["query p50 ms"] = 1000 * percentile(every, 50)
        figures["query p95 ms"] = 1000 * percentile(every, 95)
        figures["query p99 ms"] = 1000 * percentile(every, 99)
        for kind, values in latencies.items():
            figures[f"query p99 ms ({kind})"] = 1000 * percentile(values, 99)
        figures["cold searcher query p50 ms"] = 1000 * percentile(cold_every, 50)
        figures["cold searcher query p99 ms"] = 1000 * percentile(cold_every, 99)
        figures["naive index query p99 ms (no filters, highlights)"] = 1000 * percentile(
            naive_times, 99
        )
        figures["mean query ms"] = 1000 * statistics.fmean(every)
        _report(figures)
        return figures
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the build's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _latencies(searcher: Any, queries: list[tuple[str, str]]) -> dict[str, list[float]]:
    """Seconds per query by kind, each query through the whole search call."""
    latencies: dict[str, list[float]] = {}
    for kind, text in queries:
        started = time.perf_counter()
        searcher.search(text)
        latencies.setdefault(kind, []).append(time.perf_counter() - started)
    return latencies


def _measured(latencies: dict[str, list[float]]) -> list[float]:
    """The mixed-query latencies (stop-word-only phrases are reported on their own)."""
    return [
        value for kind, values in latencies.items() if kind != "stopword phrase" for value in values
    ]


def _report(figures: dict[str, float | str]) -> None:
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        shown = f"{value:,.2f}" if isinstance(value, float) else value
        print(f"{key:<{width}}  {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PAGES:,} pages")
    parser.add_argument("--pages", type=int, default=None, help="corpus size")
    parser.add_argument(
        "--naive-pages", type=int, default=None, help=f"naive writer's share [{NAIVE_PAGES:,}]"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the store and indexes here (and reuse a store an earlier run kept there)",
    )
    args = parser.parse_args()
    run(quick=args.quick, pages=args.pages, naive_pages=args.naive_pages, keep=args.keep)


if __name__ == "__main__":
    main()
