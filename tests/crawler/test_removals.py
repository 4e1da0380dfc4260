"""A change of mind takes effect at the next run: robots.txt edits, new exclusion rules and
``sextant forget``, each end to end (real TLS capsules on loopback, a real store, a real
index, and a search that no longer finds the pages)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import event, func, insert, select, update

from crawler.admission import EXCLUDED
from crawler.messages import RobotsRecord
from crawler.rejudge import BATCH, rejudge_robots, sweep_exclusions
from crawler.removals import forget, stored_removals
from crawler.traps import Exclusions
from crawler.url_rows import CapsuleIds, NewPage, insert_pages
from gemserve.server import Request, Response
from indexer.build import run_index
from indexer.query import Searcher
from sextant.cli import cli
from sextant.store import Capsule, ExclusionSweep, FetchAttempt, FrontierEntry, Link, Page, utcnow
from sextant.urls import parse
from tests.crawler.crawling import Crawled, crawl, settings_for
from tests.gemini_server import ScriptedCapsule, gemtext, plain

PERMISSIVE = "User-agent: *\nDisallow:\n"


def diary_capsule(name: str) -> ScriptedCapsule:
    """A home page, two private pages and a public one, each with a word of its own (and the
    capsule's name, so two such capsules are not folded together as duplicates)."""
    site = ScriptedCapsule(name)
    site.route("/", gemtext("# Home\n=> /public\n=> /private/a\n=> /private/b\n"))
    site.route("/public", gemtext(f"# Public\nlighthouse keepers gather at {name}\n"))
    site.route("/private/a", gemtext(f"# Secret A\nzanzibar marmalade recipe of {name}\n"))
    site.route("/private/b", gemtext(f"# Secret B\nzanzibar harbour photographs of {name}\n"))
    return site


def searched(tmp_path: Path, query: str) -> set[str]:
    """Bring the index up to date (as ``sextant index`` does), then search it."""
    settings = settings_for(tmp_path)
    run_index(settings.index_dir, settings.db_url, procs=1)
    with Searcher(settings.index_dir, settings.db_url) as searcher:
        return {hit.url for hit in searcher.search(query, page_size=50).hits}


def make_due(result: Crawled, *urls: str) -> None:
    """As if a day had passed: robots.txt and these pages are due again."""
    past = utcnow() - timedelta(days=2)
    with result.engine.begin() as conn:
        conn.execute(update(Capsule).values(robots_fetched_at=past))
        conn.execute(update(Page).where(Page.url.in_(urls)).values(next_crawl_at=past))


async def test_a_robots_change_drops_the_stored_pages_it_now_forbids(tmp_path, capsules):
    site = diary_capsule("robots.test")
    robots = {"text": PERMISSIVE}

    async def robots_txt(request: Request) -> Response:
        return plain(robots["text"])

    site.route("/robots.txt", robots_txt)
    running = await capsules(site)
    home = running["robots.test"].url("/")
    first = await crawl(tmp_path, running, home)
    private = {running["robots.test"].url(p) for p in ("/private/a", "/private/b")}
    assert searched(tmp_path, "zanzibar") == private

    robots["text"] = "User-agent: indexer\nDisallow: /private/\n"
    make_due(first, home)  # only the home page: the private pages are not due for weeks
    second = await crawl(tmp_path, running, recrawl=True)
    assert site.paths.count("/robots.txt") == 2
    assert site.paths.count("/private/a") == 1  # never asked again
    for url in private:
        page = second.page(url)
        assert page.state == "disallowed"
        assert "robots.txt" in page.error_message
    assert second.page(running["robots.test"].url("/public")).state == "ok"
    assert searched(tmp_path, "zanzibar") == set()
    assert searched(tmp_path, "lighthouse") == {running["robots.test"].url("/public")}


async def test_an_unchanged_robots_txt_rejudges_nothing(tmp_path, capsules):
    site = diary_capsule("same.test")
    site.route("/robots.txt", plain(PERMISSIVE))
    running = await capsules(site)
    home = running["same.test"].url("/")
    first = await crawl(tmp_path, running, home)
    stamps = {url: page.updated_at for url, page in first.pages().items()}
    make_due(first, home)
    second = await crawl(tmp_path, running, recrawl=True)
    assert site.paths.count("/robots.txt") == 2
    for url, page in second.pages().items():
        if url != home:
            assert page.updated_at == stamps[url], url


async def test_an_exclusion_added_between_two_crawls_drops_the_stored_pages(tmp_path, capsules):
    site = diary_capsule("rules.test")
    running = await capsules(site)
    await crawl(tmp_path, running, running["rules.test"].url("/"))
    private = {running["rules.test"].url(p) for p in ("/private/a", "/private/b")}
    assert searched(tmp_path, "zanzibar") == private

    rules = tmp_path / "exclude.txt"
    rules.write_text("gemini://rules.test:*/private/ the author asked us to stay out\n")
    asked = len(site.paths)
    second = await crawl(tmp_path, running, exclude_file=rules)  # nothing is due
    assert len(site.paths) == asked
    for url in private:
        page = second.page(url)
        assert page.state == EXCLUDED
        assert "the author asked us to stay out" in page.error_message
    assert searched(tmp_path, "zanzibar") == set()
    assert searched(tmp_path, "lighthouse") == {running["rules.test"].url("/public")}
    with second.session() as session:
        swept = set(session.scalars(select(ExclusionSweep.pattern)))
    assert "gemini://rules.test:*/private/" in swept


async def test_a_recrawl_the_new_rules_refuse_excludes_the_page(tmp_path, capsules):
    site = diary_capsule("recrawl.test")
    running = await capsules(site)
    first = await crawl(tmp_path, running, running["recrawl.test"].url("/"))
    public = running["recrawl.test"].url("/public")
    make_due(first, public)
    # A lower depth cap is no exclusion rule, so no sweep sees it: the recrawl must.
    second = await crawl(tmp_path, running, recrawl=True, max_depth=0)
    page = second.page(public)
    assert page.state == EXCLUDED
    assert "depth cap" in page.error_message
    assert site.paths.count("/public") == 1


def run_cli(tmp_path: Path, *args: str) -> str:
    result = CliRunner().invoke(
        cli,
        ["--data-dir", str(tmp_path), "--db-url", settings_for(tmp_path).db_url, *args],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return result.output


async def test_forget_a_capsule_and_a_prefix(tmp_path, capsules):
    alpha = diary_capsule("alpha.test")
    beta = diary_capsule("beta.test")
    running = await capsules(alpha, beta)
    first = await crawl(
        tmp_path, running, running["alpha.test"].url("/"), running["beta.test"].url("/")
    )
    assert len(searched(tmp_path, "zanzibar")) == 4
    assert len(searched(tmp_path, "lighthouse")) == 2

    beta_host = running["beta.test"].url("/").removeprefix("gemini://").rstrip("/")
    out = run_cli(tmp_path, "forget", beta_host, "--reason", "removal requested by the author")
    assert "4 pages" in out
    alpha_private = running["alpha.test"].url("/private/")
    run_cli(tmp_path, "forget", alpha_private, "--reason", "private diary")

    pages = first.pages()
    gone = [url for url in pages if "beta.test" in url or url.startswith(alpha_private)]
    assert len(gone) == 6
    for url in gone:
        page = pages[url]
        assert page.state == EXCLUDED
        assert page.body is None
        assert page.title is None
    assert "removal requested by the author" in pages[running["beta.test"].url("/")].error_message
    assert "private diary" in pages[running["alpha.test"].url("/private/a")].error_message
    with first.session() as session:
        ids = [pages[url].id for url in gone]
        assert session.scalar(select(func.count()).where(Link.source_id.in_(ids))) == 0
        assert session.scalar(select(func.count()).where(FetchAttempt.page_id.in_(ids))) == 0
    assert pages[running["alpha.test"].url("/public")].state == "ok"

    assert searched(tmp_path, "zanzibar") == set()
    assert searched(tmp_path, "lighthouse") == {running["alpha.test"].url("/public")}

    listed = run_cli(tmp_path, "forget", "--list")
    assert "removal requested by the author" in listed
    assert "private diary" in listed
    # Later crawls never ask again, even when seeded and linked.
    alpha.route("/", gemtext("# Home\n=> /private/c\n=> " + running["beta.test"].url("/x")))
    asked = (len(alpha.paths), len(beta.paths))
    make_due(first, running["alpha.test"].url("/"))
    again = await crawl(
        tmp_path,
        running,
        running["beta.test"].url("/"),
        running["beta.test"].url("/y"),
        recrawl=True,
    )
    assert len(beta.paths) == asked[1]
    assert alpha.paths[asked[0] :] == ["/robots.txt", "/"]
    assert again.page(running["alpha.test"].url("/private/c")).state == EXCLUDED

    # Undone: the pages come back at the next crawl.
    out = run_cli(tmp_path, "forget", "--undo", beta_host)
    assert "no longer forgotten" in out
    with first.engine.connect() as conn:
        assert [r.prefix for r in stored_removals(conn)] == [alpha_private]
    await crawl(tmp_path, running)
    assert beta.paths.count("/private/a") == 2
    assert len(searched(tmp_path, "zanzibar")) == 2


def test_forget_refuses_a_missing_or_huge_reason_and_a_bad_target(tmp_path):
    base = ["--data-dir", str(tmp_path), "--db-url", settings_for(tmp_path).db_url, "forget"]
    runner = CliRunner()
    missing = runner.invoke(cli, [*base, "example.org"])
    assert missing.exit_code != 0
    assert "--reason" in missing.output
    huge = runner.invoke(cli, [*base, "example.org", "--reason", "x" * 10_000])
    assert huge.exit_code != 0
    assert "characters" in huge.output
    bad = runner.invoke(cli, [*base, "http://example.org/", "--reason", "why"])
    assert bad.exit_code != 0
    assert "gemini" in bad.output
    unknown = runner.invoke(cli, [*base, "--undo", "example.org"])
    assert unknown.exit_code != 0
    assert "--list" in unknown.output
    assert "Nothing forgotten." in runner.invoke(cli, base).output


# --- bounded work on a large capsule ------------------------------------------------------------


def many_pages(store, count: int) -> list[str]:
    """``count`` fetched pages on one capsule, half of them under /private/."""
    now = utcnow()
    urls = [f"gemini://big.test/{'private' if n % 2 else 'public'}/{n}" for n in range(count)]
    with store.begin() as conn:
        insert_pages(conn, [NewPage(parse(url), 1) for url in urls], CapsuleIds(), now)
        conn.execute(update(Page).values(state="ok", fetched_at=now, updated_at=now))
    return urls


def test_a_robots_change_on_a_large_capsule_is_judged_in_batches(store):
    count = 2 * BATCH + 501  # several batches, and a last one part full
    many_pages(store, count)
    with store.connect() as conn:
        capsule_id = conn.scalar(select(Capsule.id))
    now = utcnow()
    record = RobotsRecord(
        capsule_id, now, None, 20, "User-agent: *\nDisallow: /private/\n", True, None
    )
    with store.begin() as conn:
        assert rejudge_robots(conn, record, now) == count // 2
        # The same file again (the writer stores it after this call): nothing to do.
        conn.execute(update(Capsule).values(robots_status=20, robots_txt=record.text))
        assert rejudge_robots(conn, record, now) == 0
    with store.connect() as conn:
        states = dict(conn.execute(select(Page.state, func.count()).group_by(Page.state)).all())
    assert states == {"ok": count - count // 2, "disallowed": count // 2}


def test_new_rules_sweep_a_large_store_once(store):
    count = 2 * BATCH + 501
    many_pages(store, count)
    with store.begin() as conn:
        first_id = conn.scalar(select(func.min(Page.id)))
        conn.execute(
            FrontierEntry.__table__.insert().values(
                page_id=first_id + 1, capsule_id=1, due_at=utcnow(), enqueued_at=utcnow()
            )
        )
    rules = Exclusions.parse(
        "gemini://big.test/private/ not for us\n", source="exclude.txt", require_reason=True
    )
    assert sweep_exclusions(store, rules) == count // 2
    with store.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(FrontierEntry)) == 0
    # Rules already met cost nothing at the next run.
    assert sweep_exclusions(store, rules) == 0
    # A rule dropped and added back is swept again (new pages may match it meanwhile).
    assert sweep_exclusions(store, Exclusions()) == 0
    with store.begin() as conn:
        conn.execute(update(Page).values(state="ok"))
    assert sweep_exclusions(store, rules) == count // 2


def test_forget_of_a_large_capsule_empties_every_page(store):
    count = 2 * BATCH + 501
    many_pages(store, count)
    assert forget(store, "big.test", "gone for good") == count
    with store.connect() as conn:
        left = conn.scalar(select(func.count()).where(Page.body.is_not(None)))
        excluded = conn.scalar(select(func.count()).where(Page.state == EXCLUDED))
    assert left == 0
    assert excluded == count


def test_a_pubnix_users_robots_change_touches_only_their_directory(store):
    now = utcnow()
    urls = [
        "gemini://pubnix.test/~ann/drafts/one",
        "gemini://pubnix.test/~ann/public",
        "gemini://pubnix.test/~bob/drafts/one",
        "gemini://pubnix.test/drafts/one",
    ]
    with store.begin() as conn:
        insert_pages(conn, [NewPage(parse(url), 1) for url in urls], CapsuleIds(), now)
        conn.execute(update(Page).values(state="ok", fetched_at=now))
        capsule_id = conn.scalar(select(Capsule.id))
        record = RobotsRecord(
            capsule_id,
            now,
            None,
            20,
            "User-agent: *\nDisallow: /drafts/\n",
            True,
            None,
            user="ann",
        )
        assert rejudge_robots(conn, record, now) == 1
    with store.connect() as conn:
        states = dict(conn.execute(select(Page.url, Page.state)).all())
    assert states == {
        urls[0]: "disallowed",
        urls[1]: "ok",
        urls[2]: "ok",
        urls[3]: "ok",
    }


def test_two_crawler_processes_sweeping_the_same_new_rule_both_start(store):
    """Another --worker records the sweep between our reading and our writing of it."""
    many_pages(store, 10)
    rules = Exclusions.parse(
        "gemini://big.test/private/ not for us\n", source="exclude.txt", require_reason=True
    )
    raced: list[bool] = []

    def other_process_sweeps(conn, cursor, statement, *args) -> None:
        if (
            "exclusion_sweeps" in statement
            and statement.lstrip().startswith("SELECT")
            and not raced
        ):
            raced.append(True)
            with store.begin() as other:
                other.execute(
                    insert(ExclusionSweep).values(pattern=rules.rules[0].pattern, swept_at=utcnow())
                )

    event.listen(store, "after_cursor_execute", other_process_sweeps)
    try:
        assert sweep_exclusions(store, rules) == 5
    finally:
        event.remove(store, "after_cursor_execute", other_process_sweeps)
    assert raced == [True]
