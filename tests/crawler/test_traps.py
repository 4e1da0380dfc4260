"""Exclusion rules (the shipped traps.txt and user files) and the structural trap heuristics."""

from __future__ import annotations

from datetime import date

import pytest

from crawler.traps import ExclusionRule, Exclusions, looks_like_trap
from sextant.errors import ConfigError
from sextant.urls import parse

DEFAULTS = Exclusions.default()


@pytest.mark.parametrize(
    ("url", "reason_part"),
    [
        ("gemini://example.org/proxy/https/example.com/", "web proxy"),
        ("gemini://Example.ORG/~user/tools/proxy/page", "web proxy"),
        ("gemini://example.org/cgi-bin/proxy.cgi?q", "CGI proxy"),
        ("gemini://example.org/go?url=https%3A%2F%2Fexample.com%2F", "inside a gemini URL"),
        ("gemini://example.org/view/gopher://example.com/1/", "inside a gemini URL"),
        ("gemini://example.org/archive/web/20210101000000/index", "Wayback"),
        ("gemini://gemi.dev/cgi-bin/wp.cgi/view?Gemini_(protocol)", "Gemipedia"),
        ("gemini://gemi.dev/cgi-bin/waffle.cgi/feed?x", "NewsWaffle"),
        ("gemini://example.org/hn/item/40000000", "Hacker News"),
        ("gemini://example.org/r/linux/comments/abc123/title/", "Reddit"),
        ("gemini://example.org/mirrors/www.example.com/index.gmi", "web site named by its domain"),
        ("gemini://gemini.spam.works/mirrors/textfiles/humor/jokes.txt", "textfiles.com"),
        ("gemini://git.example.org/sextant/commit/3f2a9c1", "git browser history"),
        ("gemini://git.example.org/sextant/blame/main/README.gmi", "git browser history"),
        ("gemini://git.example.org/cgit/sextant/log/?ofs=50", "cgit"),
        ("gemini://example.org/git/sextant/refs/heads/main", "git references"),
        ("gemini://example.org/code/project/.git/objects/ab/cdef", "repository internals"),
        ("gemini://example.org/events?month=2024-05", "calendar navigation"),
        ("gemini://example.org/calendar/2024/05/", "calendar views"),
        ("gemini://example.org/cgi-bin/guest?page%3Fpage", "another query"),
        ("gemini://example.org/cgi-bin/list?sort=name", "permutations"),
        ("gemini://example.org/search?cats", "search results"),
        ("gemini://example.org/v/search?cats", "search results"),
        ("gemini://gemini.conman.org/test/redirhell/", "torture tests"),
    ],
)
def test_default_rules_exclude_known_traps(url, reason_part):
    rule = DEFAULTS.match(parse(url))
    assert rule is not None, url
    assert reason_part in rule.reason
    assert rule.source.startswith("traps.txt:")


@pytest.mark.parametrize(
    "url",
    [
        "gemini://example.org/",
        "gemini://example.org/gemlog/2024-05-01-proxy-servers.gmi",
        "gemini://example.org/gemlog/2024/05/12/post.gmi",
        "gemini://example.org/notes/http.gmi",
        "gemini://example.org/r/linux/",
        "gemini://example.org/~user/wiki/Main_Page",
        "gemini://example.org/software/sextant/tree.gmi",
        "gemini://example.org/cgi-bin/guestbook?hello%20world",
        "gemini://example.org/research?topic",
        "gemini://example.org/links.gmi?gemini://other.example/",
        "gemini://gemini.conman.org/",
        "gemini://example.org/~john/hnotes/",
    ],
)
def test_default_rules_leave_ordinary_pages_alone(url):
    assert DEFAULTS.match(parse(url)) is None


def test_default_rules_each_have_a_reason_and_there_are_enough():
    assert 15 <= len(DEFAULTS.rules) <= 30
    assert all(len(rule.reason) > 10 for rule in DEFAULTS.rules)


def write(tmp_path, text):
    path = tmp_path / "exclude.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_user_file_globs_are_prefixes_with_segment_and_exact_forms(tmp_path):
    rules = Exclusions.from_file(
        write(
            tmp_path,
            "# my exclusions\n"
            "\n"
            "gemini://example.org/private/\n"
            "gemini://*.example.net/*/drafts/   unfinished posts\n"
            "gemini://example.com/$     only the front page\n"
            "re:\\.tar\\.gz$             archives\n",
        )
    )
    assert [rule.source for rule in rules.rules] == [
        f"{tmp_path / 'exclude.txt'}:3",
        f"{tmp_path / 'exclude.txt'}:4",
        f"{tmp_path / 'exclude.txt'}:5",
        f"{tmp_path / 'exclude.txt'}:6",
    ]
    cases = {
        "gemini://example.org/private/diary.gmi": "listed in",
        "gemini://example.org/public/": None,
        "gemini://blog.example.net/alice/drafts/one.gmi": "unfinished posts",
        "gemini://blog.example.net/alice/bob/drafts/one.gmi": None,  # * stays in one segment
        "gemini://example.net/alice/drafts/": None,  # "*." needs a subdomain
        "gemini://example.com/": "only the front page",
        "gemini://example.com/page.gmi": None,
        "gemini://example.com/src/release.tar.gz": "archives",
    }
    for url, reason in cases.items():
        rule = rules.match(parse(url))
        if reason is None:
            assert rule is None, url
        else:
            assert rule is not None, url
            assert reason in rule.reason


def test_glob_authority_is_case_insensitive_like_canonical_urls():
    rule = ExclusionRule("gemini://Example.ORG/Docs/", "docs")
    assert rule.matches(parse("gemini://example.org/Docs/x"))
    assert not rule.matches(parse("gemini://example.org/docs/x"))  # paths keep their case


def test_merged_keeps_order_defaults_first(tmp_path):
    user = Exclusions.from_file(write(tmp_path, "gemini://*/**/proxy/ my own reason\n"))
    merged = DEFAULTS.merged(user)
    assert len(merged.rules) == len(DEFAULTS.rules) + 1
    assert merged.match(parse("gemini://a.example/proxy/x")).source.startswith("traps.txt:")
    assert user.merged(DEFAULTS).match(parse("gemini://a.example/proxy/x")).reason == (
        "my own reason"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gemini://ok.example/\nexample.org/private/ reason\n", r"exclude\.txt:2: .*gemini://"),
        ("# fine\n\n\nre:([unclosed reason\n", r"exclude\.txt:4: invalid regular expression"),
        ("re: reason\n", r"exclude\.txt:1: .*regular expression"),
    ],
)
def test_bad_user_line_names_file_and_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        Exclusions.from_file(write(tmp_path, text))


def test_missing_or_binary_user_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read exclude file"):
        Exclusions.from_file(tmp_path / "absent.txt")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00gemini://x/\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        Exclusions.from_file(binary)


def test_packaged_rules_must_carry_a_reason():
    with pytest.raises(ConfigError, match=r"traps\.txt:2: rule .* has no reason"):
        Exclusions.parse("# x\ngemini://a.example/\n", source="traps.txt", require_reason=True)


TODAY = date(2025, 6, 1)
DEEP = "/".join(f"d{i}" for i in range(25))


@pytest.mark.parametrize(
    ("url", "category"),
    [
        ("gemini://example.org/a/b/a/b/a/b/", "repeated path segments"),
        ("gemini://example.org/docs/docs/docs/index.gmi", "repeated path segments"),
        ("gemini://example.org/x/a/y/a/z/a/w/a", "repeated path segments"),
        ("gemini://example.org/a////", "repeated path segments"),
        (f"gemini://example.org/{DEEP}", "very deep path"),
        ("gemini://example.org/calendar/2150/01/", "calendar out of range"),
        ("gemini://example.org/diary/1850/03/", "calendar out of range"),
        ("gemini://example.org/events/1850-03-01.gmi", "calendar out of range"),
        ("gemini://example.org/agenda?year=2999", "calendar out of range"),
        ("gemini://example.org/plans/2028/01/", "calendar out of range"),
        ("gemini://example.org/repo/tree/0123abcd/src/", "git browser"),
        ("gemini://example.org/repo/blob/" + "a" * 40 + "/README", "git browser"),
        ("gemini://example.org/repo/commit/?id=0123456789abcdef", "git browser"),
        ("gemini://example.org/cgi-bin/app?x=1&y=2&x=3", "query loop"),
        ("gemini://example.org/cgi-bin/app?a?b?c", "query loop"),
        ("gemini://example.org/cgi-bin/app?" + "q" * 600, "query loop"),
    ],
)
def test_heuristics_flag_traps(url, category):
    reason = looks_like_trap(parse(url), today=TODAY)
    assert reason is not None, url
    assert reason.startswith(category + ":"), reason


@pytest.mark.parametrize(
    "url",
    [
        "gemini://example.org/",
        "gemini://example.org/~user/gemlog/",
        "gemini://example.org/blog/2023/11/post.gmi",
        "gemini://example.org/plans/2027/12/",
        "gemini://example.org/history/1971-05-04.gmi",
        "gemini://example.org/photos/2020/01/01/01.jpg",
        "gemini://example.org/repo/tree/main/src/",
        "gemini://example.org/photos/deadbeef-cafe.jpg",
        "gemini://example.org/a/b/a/b/",
        "gemini://example.org/cgi-bin/app?x=1&y=2",
        "gemini://example.org/search?what%20is%20a%3F",
        "gemini://example.org/" + "/".join(f"d{i}" for i in range(19)),
    ],
)
def test_heuristics_leave_ordinary_urls_alone(url):
    assert looks_like_trap(parse(url), today=TODAY) is None
