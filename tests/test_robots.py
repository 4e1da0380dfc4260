"""robots.txt as capsule authors really write it: groups, precedence, wildcards, junk."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sextant.robots import (
    DEFAULT_AGENTS,
    MAX_ROBOTS_CHARS,
    RESEARCHER_AGENTS,
    RobotsPolicy,
    Rule,
    allowed_in_user_directory,
    normalize_percent_encoding,
    parse_robots_response,
    pubnix_user,
)

LAYERED = """\
User-agent: *
Disallow: /
Crawl-delay: 30

User-agent: indexer
Disallow: /private
Crawl-delay: 10

User-agent: sextant
Disallow: /drafts
"""


# ---------------------------------------------------------------- every group that addresses us

# The issue's file: "*" closes /private/ and indexer closes /noindex/. Read as RFC 9309
# does (most specific group only), indexer's group would hide "*"'s and /private/ was
# fetched; the companion spec says a bot "should still respect" the "*" rules.
ISSUE = """\
User-agent: *
Disallow: /private/

User-agent: indexer
Disallow: /noindex/
"""


@pytest.mark.parametrize(
    ("agents", "path", "allowed"),
    [
        (DEFAULT_AGENTS, "/private/x", False),
        (DEFAULT_AGENTS, "/noindex/x", False),
        (DEFAULT_AGENTS, "/public", True),
        (RESEARCHER_AGENTS, "/private/x", False),
        (RESEARCHER_AGENTS, "/noindex/x", True),  # indexer's rules are not the researcher's
        (("indexer",), "/private/x", True),  # without "*" only indexer's group applies
    ],
)
def test_the_issue_file(agents, path, allowed):
    assert RobotsPolicy.parse(ISSUE).allowed(path, agents) is allowed


@pytest.mark.parametrize(
    ("agents", "path", "allowed"),
    [
        (DEFAULT_AGENTS, "/private/x", False),  # indexer's rule holds beside sextant's group
        (DEFAULT_AGENTS, "/drafts/x", False),
        (DEFAULT_AGENTS, "/public", False),  # "*" closes everything, whatever others say
        (("indexer", "sextant"), "/private/x", False),
        (("indexer", "sextant"), "/drafts/x", False),
        (("indexer", "sextant"), "/public", True),
        (("indexer",), "/drafts/x", True),
        (("*",), "/public", False),
        (("archiver", "*"), "/public", False),  # an unnamed agent still meets *
        (("archiver",), "/public", True),  # no group at all: nothing forbids
        (("SEXTANT",), "/drafts/x", False),  # case-insensitive on our side too
        ("sextant", "/drafts/x", False),  # a lone name is not a sequence of letters
        ("sextant", "/private/x", True),
    ],
)
def test_every_group_addressing_us_must_allow(agents, path, allowed):
    assert RobotsPolicy.parse(LAYERED).allowed(path, agents) is allowed


@pytest.mark.parametrize(
    ("text", "path", "allowed"),
    [
        # An Allow in one group does not reopen what another group closes ...
        ("User-agent: *\nDisallow: /a/\n\nUser-agent: indexer\nAllow: /a/\n", "/a/x", False),
        ("User-agent: sextant\nAllow: /\n\nUser-agent: *\nDisallow: /\n", "/x", False),
        # ... and an empty Disallow in a specific group grants nothing over "*".
        ("User-agent: *\nDisallow: /\n\nUser-agent: indexer\nDisallow:\n", "/x", False),
        # Within one group RFC 9309 still holds: the longest match wins, Allow wins ties.
        ("User-agent: *\nDisallow: /a/\nAllow: /a/open\n", "/a/open/1", True),
        (
            "User-agent: *\nDisallow: /a/\nAllow: /a/open\n\nUser-agent: indexer\n"
            "Disallow: /a/open/secret\n",
            "/a/open/1",
            True,
        ),
        (
            "User-agent: *\nDisallow: /a/\nAllow: /a/open\n\nUser-agent: indexer\n"
            "Disallow: /a/open/secret\n",
            "/a/open/secret",
            False,
        ),
        ("User-agent: *\nDisallow: /p\nAllow: /p\n\nUser-agent: indexer\nAllow: /q\n", "/p", True),
        # One group naming two of our agents counts once and still applies.
        ("User-agent: indexer, sextant\nDisallow: /both/\n", "/both/x", False),
    ],
)
def test_groups_combine_but_do_not_override_each_other(text, path, allowed):
    assert RobotsPolicy.parse(text).allowed(path) is allowed


@pytest.mark.parametrize(
    ("agents", "delay"),
    [
        (DEFAULT_AGENTS, 30.0),  # the largest of sextant's (none), indexer's 10 and *'s 30
        (("indexer", "*"), 30.0),
        (("indexer", "sextant"), 10.0),
        (("*",), 30.0),
        (("sextant",), None),
        (("archiver",), None),
    ],
)
def test_crawl_delay_is_the_largest_of_the_groups_addressing_us(agents, delay):
    assert RobotsPolicy.parse(LAYERED).crawl_delay(agents) == delay


def test_rules_for_lists_every_group_addressing_us_in_agent_order():
    policy = RobotsPolicy.parse(LAYERED + "User-agent: sextant\nAllow: /drafts/public\n")
    assert policy.rules_for() == (
        Rule(False, "/drafts"),
        Rule(True, "/drafts/public"),
        Rule(False, "/private"),
        Rule(False, "/"),
    )
    assert policy.rules_for(("*",)) == (Rule(False, "/"),)
    assert policy.rules_for(("nobody",)) == ()
    assert set(policy.agents) == {"*", "indexer", "sextant"}
    shared = RobotsPolicy.parse("User-agent: sextant, indexer\nDisallow: /x\n")
    assert shared.rules_for() == (Rule(False, "/x"),)  # one group, listed once


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ("User-agent: researcher\nDisallow: /\n", True),
        ("User-agent: *\nDisallow: *\n", True),
        ("User-agent: *\nDisallow: /*\n", True),
        ("Disallow: /\n", True),  # rules before any User-agent are everybody's
        ("User-agent: researcher\nDisallow: /\nAllow: /pub/\n", False),  # reopens a part
        ("User-agent: *\nDisallow: /\n\nUser-agent: researcher\nAllow: /\n", True),
        ("User-agent: researcher\nDisallow: /$\n", False),  # only the home page
        ("User-agent: researcher\nDisallow: /a\n", False),
        ("User-agent: indexer\nDisallow: /\n", False),  # not addressed to the researcher
        ("", False),
    ],
)
def test_closed_means_a_group_addressing_us_disallows_every_path(text, closed):
    assert RobotsPolicy.parse(text).closed(RESEARCHER_AGENTS) is closed


@pytest.mark.parametrize(
    ("text", "path", "allowed"),
    [
        ("User-agent: *\nDisallow: /~ann/drafts/\n", "/~ann/drafts/1", False),  # from the root
        ("User-agent: *\nDisallow: /drafts/\n", "/~ann/drafts/1", False),  # from ~ann/
        ("User-agent: *\nDisallow: /drafts/\n", "/~ann/notes", True),
        ("User-agent: *\nDisallow: /$\n", "/~ann", False),  # the directory itself is its "/"
        ("User-agent: *\nDisallow: /a\n\nUser-agent: researcher\nDisallow: /b\n", "/~ann/b", False),
    ],
)
def test_a_pubnix_users_file_is_read_both_ways(text, path, allowed):
    policy = RobotsPolicy.parse(text)
    assert allowed_in_user_directory(policy, "ann", path, RESEARCHER_AGENTS) is allowed


@pytest.mark.parametrize(
    ("path", "user"),
    [("/~ann/x", "ann"), ("/~ann", "ann"), ("/~/x", None), ("/x/~ann/", None), ("/", None)],
)
def test_pubnix_user(path, user):
    assert pubnix_user(path) == user


@pytest.mark.parametrize(
    "text",
    [
        "USER-AGENT: InDeXeR\nDisallow: /x\n",
        "user-agent: indexer\ndisallow: /x\n",
        "User-Agent: Indexer/2.1 (+gemini://example.org/bot)\nDisallow: /x\n",
        "User agent: indexer\nDisallow: /x\n",
        "User-agent: archiver, indexer\nDisallow: /x\n",
        "  User-agent:   indexer  \n\tDisallow:  /x  \n",
        "User-agent : indexer\nDisallow : /x\n",
        "User-agent: indexer\nDissallow: /x\n",  # the commonest typo
    ],
)
def test_agent_and_directive_spellings(text):
    policy = RobotsPolicy.parse(text)
    assert not policy.allowed("/x/y", ("indexer",))
    assert policy.allowed("/y", ("indexer",))


def test_several_user_agent_lines_share_one_group():
    policy = RobotsPolicy.parse("User-agent: archiver\nUser-agent: indexer\nDisallow: /a\n")
    assert not policy.allowed("/a", ("indexer",))
    assert not policy.allowed("/a", ("archiver",))
    assert policy.allowed("/a", ("*",))


def test_blank_lines_do_not_split_a_group():
    text = "User-agent: indexer\n\nUser-agent: archiver\n\n\nDisallow: /a\n\nDisallow: /b\n"
    policy = RobotsPolicy.parse(text)
    for agent in ("indexer", "archiver"):
        assert policy.rules_for((agent,)) == (Rule(False, "/a"), Rule(False, "/b"))


def test_user_agent_after_rules_starts_a_new_group():
    policy = RobotsPolicy.parse("User-agent: indexer\nDisallow: /a\nUser-agent: *\nDisallow: /b\n")
    assert policy.rules_for(("indexer",)) == (Rule(False, "/a"),)
    assert policy.rules_for(("*",)) == (Rule(False, "/b"),)


def test_groups_for_the_same_agent_are_merged():
    text = (
        "User-agent: indexer\nDisallow: /a\n\n"
        "User-agent: *\nDisallow: /c\n\n"
        "User-agent: INDEXER\nDisallow: /b\n"
    )
    policy = RobotsPolicy.parse(text)
    assert not policy.allowed("/a", ("indexer",))
    assert not policy.allowed("/b", ("indexer",))
    assert policy.allowed("/c", ("indexer",))


def test_unknown_directives_do_not_end_a_group():
    text = "User-agent: indexer\nSitemap: gemini://x/s.xml\nHost: x\nDisallow: /a\n"
    assert not RobotsPolicy.parse(text).allowed("/a", ("indexer",))


def test_rules_before_any_user_agent_apply_to_everyone():
    policy = RobotsPolicy.parse("Disallow: /\n")
    assert not policy.allowed("/x")
    assert not policy.allowed("/x", ("anybody", "*"))


def test_empty_user_agent_value_names_nobody():
    policy = RobotsPolicy.parse("User-agent:\nUser-agent: indexer\nDisallow: /a\n")
    assert policy.agents == ("indexer",)


# ---------------------------------------------------------------- real-world file shapes


def test_crlf_bom_comments_and_leading_spaces():
    text = (
        "\ufeff# robots.txt for my capsule\r\n"
        "User-agent: *   # everybody\r\n"
        "   Disallow: /cgi-bin/ # scripts are slow\r\n"
        "\r\n"
        "#Disallow: /everything\r\n"
    )
    policy = RobotsPolicy.parse(text)
    assert policy.rules_for() == (Rule(False, "/cgi-bin/"),)
    assert not policy.allowed("/cgi-bin/search")
    assert policy.allowed("/everything")


def test_gemtext_lines_mixed_in_are_ignored():
    text = """\
# Robots policy
## For crawlers: please read
=> gemini://example.org/ Home: back
* Note: be nice
> Quote: Disallow: /quoted
```
User-agent: *
Disallow: /private
```
Some paragraph explaining things: nothing here.
"""
    policy = RobotsPolicy.parse(text)
    assert policy.rules_for() == (Rule(False, "/private"),)
    assert policy.allowed("/quoted")
    assert not policy.allowed("/private/diary.gmi")


@pytest.mark.parametrize(
    "text",
    [
        "User-agent: *\nDisallow:\n",
        "User-agent: *\nDisallow:   \n",
        "User-agent: *\nDisallow: # nothing\n",
        "User-agent: *\nAllow:\n",
        "",
        "\n\n\n",
        "just some text\nwith no directives\n",
    ],
)
def test_empty_disallow_or_no_rules_allows_everything(text):
    policy = RobotsPolicy.parse(text)
    assert policy.allowed("/")
    assert policy.allowed("/anything/at/all?q=1")
    assert policy.rules_for() == ()


def test_empty_disallow_in_a_specific_group_does_not_override_star():
    policy = RobotsPolicy.parse("User-agent: *\nDisallow: /\n\nUser-agent: indexer\nDisallow:\n")
    assert not policy.allowed("/x")
    assert policy.allowed("/x", ("indexer",))


def test_robots_txt_itself_is_always_allowed():
    policy = RobotsPolicy.parse("User-agent: *\nDisallow: /\n")
    assert policy.allowed("/robots.txt")
    assert policy.allowed("/robots.txt?x=1")
    assert not policy.allowed("/robots.txt.bak")


def test_rules_past_the_size_limit_are_ignored():
    filler = "# " + "x" * 100 + "\n"
    padding = filler * (MAX_ROBOTS_CHARS // len(filler) + 1)
    policy = RobotsPolicy.parse("User-agent: *\nDisallow: /a\n" + padding + "Disallow: /b\n")
    assert not policy.allowed("/a")
    assert policy.allowed("/b")


def test_allow_all():
    policy = RobotsPolicy.allow_all()
    assert policy.allowed("/anything")
    assert policy.crawl_delay() is None
    assert policy.rules_for() == ()


# ---------------------------------------------------------------- precedence and patterns


@pytest.mark.parametrize(
    ("rules", "path", "allowed"),
    [
        ("Disallow: /a\nAllow: /a/b", "/a", False),
        ("Disallow: /a\nAllow: /a/b", "/a/b/c", True),
        ("Allow: /a/b\nDisallow: /a", "/a/b/c", True),  # order does not matter
        ("Allow: /a\nDisallow: /a/b", "/a/b", False),
        ("Allow: /a\nDisallow: /a/b", "/a/c", True),
        ("Disallow: /page\nAllow: /page", "/page", True),  # equal length: Allow wins
        ("Allow: /page\nDisallow: /page", "/page", True),
        ("Disallow: /private/\nAllow: /*.gmi", "/private/a.gmi", False),  # longer wins
        ("Disallow: /private\nAllow: /private/*.gmi$", "/private/a.gmi", True),
        ("Disallow: /private\nAllow: /private/*.gmi$", "/private/a.txt", False),
        ("Disallow: /x", "/xyz", False),  # plain prefix match
        ("Disallow: /x/", "/x", True),
        ("Disallow: /*.gmi$", "/a.gmi", False),
        ("Disallow: /*.gmi$", "/a.gmi?q=1", True),
        ("Disallow: /*.gmi$", "/a.gmix", True),
        ("Disallow: /*.gmi", "/a.gmix", False),
        ("Disallow: /private*/secret", "/private-notes/secret/1", False),
        ("Disallow: /private*/secret", "/private-notes/public", True),
        ("Disallow: /*?", "/a", True),
        ("Disallow: /*?", "/a?q", False),
        ("Disallow: /*a*b", "/ab-a", False),  # pieces must be placed leftmost
        ("Disallow: /*a*b*a", "/a-b-a-b", False),
        ("Disallow: /ab*b$", "/ab", True),  # the anchored tail may not overlap the head
        ("Disallow: /ab*b$", "/abb", False),
        ("Disallow: /$", "/", False),
        ("Disallow: /$", "/a", True),
        ("Disallow: *", "/anything", False),
        ("Disallow: ***/a***", "/x/a/y", False),
        ("Disallow: /a$b", "/a$b", False),  # "$" in the middle is literal
        ("Disallow: /a$b", "/ab", True),
        ("Disallow: private", "/private/x", False),  # authors who forget the slash
        ("Disallow: /search?q=", "/search?q=gemini", False),
        ("Disallow: /search?q=", "/search", True),
    ],
)
def test_precedence_and_wildcards(rules, path, allowed):
    policy = RobotsPolicy.parse("User-agent: *\n" + rules + "\n")
    assert policy.allowed(path) is allowed


@pytest.mark.parametrize(
    ("pattern", "path", "allowed"),
    [
        ("/%7euser", "/~user/x", False),
        ("/~user", "/%7Euser/x", False),
        ("/%7Euser", "/%7euser/x", False),
        ("/caf%c3%a9", "/café", False),
        ("/café", "/caf%C3%A9", False),
        ("/a%2fb", "/a/b", True),  # an encoded slash is not a slash
        ("/a%2Fb", "/a%2fb", False),
        ("/100%", "/100%25", False),  # a lone % is a literal percent sign
        ("/a b", "/a%20b", False),
        ("/%41", "/A", False),  # unreserved letters are decoded
    ],
)
def test_percent_encoding_is_normalised_on_both_sides(pattern, path, allowed):
    policy = RobotsPolicy.parse(f"User-agent: *\nDisallow: {pattern}\n")
    assert policy.allowed(path) is allowed


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("/a#frag", False), ("a/b", False), ("", True), ("?q", True), ("/b#/a", True)],
)
def test_paths_are_normalised(path, allowed):
    assert RobotsPolicy.parse("User-agent: *\nDisallow: /a\n").allowed(path) is allowed


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("/%7e%7E%41%2f%2F", "/~~A%2F%2F"),
        ("/ü", "/%C3%BC"),
        ("/%zz%", "/%25zz%25"),
        ("/a?b=c&d", "/a?b=c&d"),
        ("/a?b?c", "/a?b?c"),
        ("/[x]", "/%5Bx%5D"),  # as sextant.urls spells them in canonical paths
        ("/%5bx%5d", "/%5Bx%5D"),
        ("/\ud800", "/%ED%A0%80"),
    ],
)
def test_normalize_percent_encoding(text, normalized):
    assert normalize_percent_encoding(text) == normalized


def test_hostile_wildcards_stay_fast():
    pattern = "/" + "*a" * 60 + "*b"
    policy = RobotsPolicy.parse(f"User-agent: *\nDisallow: {pattern}\n")
    start = time.perf_counter()
    assert policy.allowed("/" + "a" * 20_000)
    # A backtracking regex would not finish this in our lifetime; the linear scan takes ms.
    assert time.perf_counter() - start < 1.0


def _reference_match(pattern: str, path: str) -> bool:
    """Independent oracle: the same semantics expressed as a regular expression."""
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(piece) for piece in body.split("*"))
    return re.match(regex + (r"\Z" if anchored else ""), path) is not None


@given(st.text("ab/*$", max_size=8), st.text("ab/", max_size=10))
@example("*a*b*", "b/ab/a")
@example("ab*b$", "ab")
def test_matching_agrees_with_a_regex_oracle(pattern, path):
    policy = RobotsPolicy.parse(f"User-agent: *\nDisallow: {pattern}\n")
    rules = policy.rules_for()
    if not rules:  # an empty pattern is no rule
        assert policy.allowed("/" + path)
        return
    expected = _reference_match(rules[0].pattern, "/" + path)
    assert policy.allowed("/" + path) is (not expected or "/" + path == "/robots.txt")


# ---------------------------------------------------------------- crawl-delay


@pytest.mark.parametrize(
    ("value", "delay"),
    [
        ("5", 5.0),
        ("2.5", 2.5),
        (" 10 ", 10.0),
        ("0", 0.0),
        ("soon", None),
        ("5s", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("", None),
    ],
)
def test_crawl_delay_values(value, delay):
    assert RobotsPolicy.parse(f"User-agent: *\nCrawl-delay: {value}\n").crawl_delay() == delay


def test_the_largest_crawl_delay_in_a_group_wins():
    text = "User-agent: *\nCrawl-delay: 2\nCrawl-Delay: 7\nCrawl-delay: 3\n"
    assert RobotsPolicy.parse(text).crawl_delay() == 7.0


def test_crawl_delay_line_keeps_the_group_together():
    text = "User-agent: indexer\nCrawl-delay: 4\nDisallow: /a\nUser-agent: *\nDisallow: /b\n"
    policy = RobotsPolicy.parse(text)
    assert policy.crawl_delay() == 4.0
    assert policy.rules_for(("indexer",)) == (Rule(False, "/a"),)
    assert policy.rules_for(("*",)) == (Rule(False, "/b"),)


# ---------------------------------------------------------------- fetch outcome


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (20, "parsed"),
        (21, "parsed"),
        (51, "allow_all"),
        (52, "allow_all"),
        (50, "allow_all"),
        (53, "allow_all"),
        (59, "allow_all"),
        (10, None),
        (11, None),
        (30, None),
        (31, None),
        (40, None),
        (41, None),
        (44, None),
        (60, None),
        (61, None),
        (62, None),
        (0, None),
        (99, None),
        (200, None),
    ],
)
def test_parse_robots_response(status, outcome):
    policy = parse_robots_response(status, "User-agent: *\nDisallow: /\n")
    if outcome is None:
        assert policy is None
    else:
        assert policy is not None
        assert policy.allowed("/x") is (outcome == "allow_all")


def test_success_without_a_readable_body_is_not_yet_usable():
    assert parse_robots_response(20, None) is None


def test_success_with_an_empty_body_allows_everything():
    policy = parse_robots_response(20, "")
    assert policy is not None
    assert policy.allowed("/x")


# ---------------------------------------------------------------- never raises


@given(st.text(max_size=2000))
def test_parse_never_raises_on_arbitrary_text(text):
    policy = RobotsPolicy.parse(text)
    for agents in (DEFAULT_AGENTS, ("*",)):
        assert isinstance(policy.allowed("/some/path?q=1", agents), bool)
        delay = policy.crawl_delay(agents)
        assert delay is None or delay >= 0


_directive = st.sampled_from(
    ["User-agent", "user-agent", "Disallow", "Allow", "Crawl-delay", "Sitemap", "=> x", "#"]
)


@given(
    st.lists(st.tuples(_directive, st.text("ab/*$?%2fF é\t#", max_size=8)), max_size=30),
    st.text(max_size=30),
)
def test_parse_and_match_never_raise_on_directive_soup(lines, path):
    text = "\n".join(f"{key}: {value}" for key, value in lines)
    policy = RobotsPolicy.parse(text)
    assert isinstance(policy.allowed(path), bool)
    assert isinstance(policy.rules_for(), tuple)


def test_the_documentation_example_means_what_the_page_says():
    page = Path(__file__).parent.parent / "search_capsule/static/documentation/indexing.gmi"
    examples = re.findall(r"```robots\.txt\n(.*?)```", page.read_text("utf-8"), re.S)
    crawler_example, researcher_example = (RobotsPolicy.parse(text) for text in examples)
    # "The crawler fetches neither /private/ nor /noindex/", and waits five seconds.
    assert not crawler_example.allowed("/private/a")
    assert not crawler_example.allowed("/noindex/a")
    assert crawler_example.allowed("/public")
    assert crawler_example.crawl_delay() == 5.0
    # "they leave out /private/ but count /noindex/ pages".
    assert not crawler_example.allowed("/private/a", RESEARCHER_AGENTS)
    assert crawler_example.allowed("/noindex/a", RESEARCHER_AGENTS)
    assert researcher_example.closed(RESEARCHER_AGENTS)
    assert not researcher_example.closed()  # the crawler is not a researcher
