"""``sextant show`` on a store filled by a real crawl, and ``sextant crawl``'s clear errors."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from click.testing import CliRunner

from gemserve.server import Response
from sextant.cli import cli
from tests.crawler.crawling import crawl
from tests.gemini_server import ScriptedCapsule, gemtext
from tests.hostile_space import unsafe_characters


def run_cli(tmp_path, *args):
    runner = CliRunner()
    return runner.invoke(
        cli,
        ["--data-dir", str(tmp_path), "--db-url", f"sqlite:///{tmp_path / 'store.db'}", *args],
        catch_exceptions=False,
    )


async def test_show_prints_what_the_store_knows(tmp_path, capsules):
    site = ScriptedCapsule("show.test")
    site.routes(
        {
            "/": gemtext(
                "# Welcome\nHello \x1b]0;pwned\x07 terminal.\n=> /about About us\n"
                "=> /moved\n=> gopher://hole.test/ A hole\n",
                lang="en",
            ),
            "/about": gemtext("# About\n=> / Home\n"),
            "/moved": Response.redirect("/about"),
        }
    )
    running = await capsules(site)
    home = running["show.test"].url("/")
    await crawl(tmp_path, running, home)

    human = run_cli(tmp_path, "show", home)
    assert human.exit_code == 0, human.output
    text = human.output
    assert text.splitlines()[0] == home
    assert "20 text/gemini; charset=utf-8; lang=en" in text
    assert "Welcome" in text
    assert f"=> {running['show.test'].url('/about')} About us" in text
    assert "=> gopher://hole.test/ A hole" in text
    assert "inbound links   1" in text  # from /about
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "Hello \ufffd]0;pwned\ufffd terminal." in text

    moved = run_cli(tmp_path, "show", "--no-body", running["show.test"].url("/moved"))
    assert f"redirects to    {running['show.test'].url('/about')}" in moved.output

    as_json = run_cli(tmp_path, "show", "--json", home, running["show.test"].url("/about"))
    assert as_json.exit_code == 0
    first, second = (json.loads(line) for line in as_json.output.splitlines())
    for key in ("url", "status", "meta", "mime", "charset", "lang", "title", "body", "links"):
        assert key in first
    assert (first["url"], first["status"], first["mime"], first["lang"]) == (
        home,
        20,
        "text/gemini",
        "en",
    )
    assert first["title"] == "Welcome"
    assert first["links"][0] == {
        "url": running["show.test"].url("/about"),
        "label": "About us",
        "scheme": "gemini",
    }
    assert first["fetched_at"].endswith("Z")
    assert second["title"] == "About"


async def test_show_unknown_and_invalid_urls_fail_clearly(tmp_path, capsules):
    site = ScriptedCapsule("known.test").route("/", gemtext("# Known\n"))
    running = await capsules(site)
    home = running["known.test"].url("/")
    await crawl(tmp_path, running, home)

    result = run_cli(tmp_path, "show", "--no-body", "gemini://unknown.test/", home)
    assert result.exit_code == 1
    assert "gemini://unknown.test/: not in the store" in result.output
    assert home in result.output  # the known one is still shown

    invalid = run_cli(tmp_path, "show", "https://web.test/")
    assert invalid.exit_code == 1
    assert "is not a gemini URL" in invalid.output


async def test_show_and_the_fetch_log_neutralise_c1_and_bidi_controls(tmp_path, capsules):
    # What a page can still smuggle past the crawler: the 8-bit CSI in a body and a
    # title, a bidi override and isolate anywhere, even in a header's meta (the protocol
    # refuses control characters there, not format characters).
    flip = "\u202eevil\u2066isolated\u2069"
    site = ScriptedCapsule("bidi.test")
    site.routes(
        {
            "/": gemtext(
                f"# Welcome \x9b2J{flip}\nBody \x1b[2J\x9b31m{flip} text.\n"
                f"=> /gone Gone {flip}\n=> /ok \x1b]8;;http://x.test/\x1b\\link\x1b]8;;\x1b\\\n"
            ),
            "/gone": Response(51, f"gone {flip}"),
            "/ok": gemtext("# ok\n"),
        }
    )
    running = await capsules(site)
    home = running["bidi.test"].url("/")
    log = tmp_path / "fetches.jsonl"
    await crawl(tmp_path, running, home, log_file=log)

    human = run_cli(tmp_path, "show", home, running["bidi.test"].url("/gone"))
    assert human.exit_code == 0, human.output
    assert unsafe_characters(human.output) == []
    assert "title           Welcome \ufffd2Jevilisolated" in human.output
    assert "Body \ufffd[2J\ufffd31mevilisolated text." in human.output
    assert "Gone evilisolated" in human.output
    assert "status          51 gone evilisolated" in human.output

    as_json = run_cli(tmp_path, "show", "--json", home)
    assert unsafe_characters(as_json.output) == []
    page = json.loads(as_json.output)
    assert page["title"] == f"Welcome \x9b2J{flip}"  # the data itself is untouched
    assert f"\x9b31m{flip}" in page["body"]

    logged = log.read_text()
    assert unsafe_characters(logged) == []
    metas = [json.loads(line)["meta"] for line in logged.splitlines()]
    assert f"gone {flip}" in metas


async def test_show_tells_how_many_links_were_dropped(tmp_path, capsules):
    site = ScriptedCapsule("many.test")
    site.route("/", gemtext("".join(f"=> /{n} Page {n}\n" for n in range(2100))))
    running = await capsules(site)
    home = running["many.test"].url("/")
    await crawl(tmp_path, running, home, max_pages=1)

    human = run_cli(tmp_path, "show", "--no-body", home)
    assert "outbound links  2000 (100 more dropped: only the first 2,000 distinct" in human.output
    as_json = json.loads(run_cli(tmp_path, "show", "--json", home).output)
    assert (len(as_json["links"]), as_json["links_dropped"]) == (2000, 100)


@pytest.mark.parametrize(
    ("meta", "asked", "waited"),
    [
        # Longer than the crawler holds a capsule: its rows go back to the frontier, due
        # after the wait (capped at PolitenessRules.slow_down_cap, 600 s).
        ("3600", 3600, 600),
        # Short: waited out in memory; the crawl ends (--max-time) before the retry.
        ("5", 5, 5),
    ],
    ids=["deferred", "held"],
)
async def test_show_explains_a_slow_down(tmp_path, capsules, meta, asked, waited):
    site = ScriptedCapsule("busy.test")
    site.routes({"/": gemtext("# Busy\n=> /slow Slow\n"), "/slow": Response(44, meta)})
    running = await capsules(site)
    slow = running["busy.test"].url("/slow")
    await crawl(tmp_path, running, running["busy.test"].url("/"), max_time=2.0)
    assert len(site.hits("/slow")) == 1

    as_json = json.loads(run_cli(tmp_path, "show", "--json", slow).output)
    assert (as_json["state"], as_json["status"], as_json["meta"]) == ("error", 44, meta)
    assert as_json["slow_down"]["seconds"] == asked
    asked_at = datetime.fromisoformat(as_json["slow_down"]["at"].rstrip("Z"))
    retry_at = datetime.fromisoformat(as_json["retry_at"].rstrip("Z"))
    assert waited - 1 <= (retry_at - asked_at).total_seconds() <= waited + 2

    human = run_cli(tmp_path, "show", "--no-body", slow).output
    assert f"status          44 {meta}" in human
    retry = as_json["retry_at"].replace("T", " ")
    assert f"slowed down     the capsule asked to wait {asked} s; retry after {retry}" in human


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resolve", "nonsense"], "expected HOST:PORT:ADDRESS"),
        (["--allow-host", "a/b"], "--allow-host 'a/b'"),
        (["--seed", "http://web.test/"], "--seed 'http://web.test/'"),
        (["--seeds", "missing-seeds.txt"], "does not exist"),
    ],
)
def test_crawl_refuses_bad_options_with_a_clear_message(tmp_path, args, message):
    result = run_cli(tmp_path, "crawl", "--quiet", *args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_crawl_with_nothing_to_do_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no seeds.txt here
    result = run_cli(tmp_path, "crawl")
    assert result.exit_code == 0
    assert "Nothing to crawl" in result.output
    assert "pages fetched" in result.output
