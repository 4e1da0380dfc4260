"""sextant.gemtext: every line type, malformed input, feeds, and hypothesis properties."""

import datetime
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sextant import gemtext
from sextant.gemtext import FeedEntry, Heading, Link

# --- link lines -----------------------------------------------------------------------

LINK_CASES = [
    ("=> gemini://a.example/ A label", ("gemini://a.example/", "A label")),
    ("=>gemini://a.example/ No space after arrow", ("gemini://a.example/", "No space after arrow")),
    ("=>\tgemini://a.example/\tTabbed label", ("gemini://a.example/", "Tabbed label")),
    ("=> \t /rel \t  spaced   inside  \t", ("/rel", "spaced   inside")),
    ("=> /only-url", ("/only-url", "")),
    ("=>/only-url", ("/only-url", "")),
    ("=> /only-url   \t", ("/only-url", "")),
    ("=> url label => with arrow", ("url", "label => with arrow")),
    ("=> https://example.com/ Off-Gemini", ("https://example.com/", "Off-Gemini")),
    ("=> mailto:a@b.example", ("mailto:a@b.example", "")),
    ("=> ../relative/é%20x Ünïcode", ("../relative/é%20x", "Ünïcode")),
    ("=>=> weird", ("=>", "weird")),
]


@pytest.mark.parametrize(("line", "expected"), LINK_CASES)
def test_link_lines(line, expected):
    doc = gemtext.parse(line)
    assert [(link.url, link.label) for link in doc.links] == [expected]
    assert doc.links[0].line == 1
    assert doc.headings == ()


@pytest.mark.parametrize("line", ["=>", "=>   ", "=>\t", "=> \t \t"])
def test_empty_link_line_is_ignored(line):
    doc = gemtext.parse(f"# T\n{line}\nafter")
    assert doc.links == ()
    assert doc.text == "T\nafter"


@pytest.mark.parametrize("line", [" => not a link", "= > not a link", "=not a link", "\t=> x"])
def test_near_links_are_paragraphs(line):
    doc = gemtext.parse(line)
    assert doc.links == ()
    assert doc.text == line.strip()


def test_link_labels_are_indexed_but_urls_are_not():
    doc = gemtext.parse("=> gemini://x.example/secret-path Visible label\n=> /bare")
    assert doc.text == "Visible label"


# --- headings -------------------------------------------------------------------------

HEADING_CASES = [
    ("# Title", Heading(1, "Title")),
    ("#Title", Heading(1, "Title")),
    ("#\tTabbed", Heading(1, "Tabbed")),
    ("## Sub", Heading(2, "Sub")),
    ("##Sub", Heading(2, "Sub")),
    ("### Third  ", Heading(3, "Third")),
    ("###Third", Heading(3, "Third")),
    # Only three levels exist (spec 5.5.1); the extra "#" is kept as text.
    ("#### Deep", Heading(3, "# Deep")),
    ("####x", Heading(3, "#x")),
    ("##### Deeper", Heading(3, "## Deeper")),
    ("# # hash inside", Heading(1, "# hash inside")),
]


@pytest.mark.parametrize(("line", "expected"), HEADING_CASES)
def test_headings(line, expected):
    doc = gemtext.parse(line)
    assert doc.headings == (expected,)
    assert doc.title == expected.text
    assert doc.text == expected.text


@pytest.mark.parametrize("line", ["#", "##", "###", "#   ", "##\t"])
def test_empty_headings_are_dropped(line):
    doc = gemtext.parse(f"{line}\nBody")
    assert doc.headings == ()
    assert doc.title == "Body"


# --- lists, quotes, paragraphs --------------------------------------------------------

TEXT_LINE_CASES = [
    ("* item", "item"),
    ("*  padded item  ", "padded item"),
    ("*item", "*item"),  # the spec requires "* ": this is a paragraph
    ("*emphasis*", "*emphasis*"),
    ("*\titem", "*\titem"),  # "* " means a space; a tab does not make a list item
    ("* ", ""),
    ("*", "*"),
    ("> quoted", "quoted"),
    (">quoted", "quoted"),
    (">  > nested", "> nested"),
    (">", ""),
    ("plain paragraph", "plain paragraph"),
    ("   indented paragraph\t", "indented paragraph"),
    ("\x0bvertical tab and \x85 next-line and \u2028 separator", None),
]


@pytest.mark.parametrize(("line", "expected"), TEXT_LINE_CASES)
def test_text_lines(line, expected):
    doc = gemtext.parse(line)
    # Characters Python's splitlines() would break on are not Gemini line ends.
    assert doc.text == (line.strip() if expected is None else expected)
    assert doc.links == ()
    assert doc.headings == ()


def test_text_joins_indexable_lines_in_order():
    page = (
        "# Heading\n"
        "Paragraph one.\n"
        "\n"
        "* list item\n"
        "> a quote\n"
        "=> /x Link label\n"
        "```\n"
        "code that must not be indexed\n"
        "```\n"
        "## Second\n"
        "   \n"
        "Last."
    )
    doc = gemtext.parse(page)
    assert doc.text.split("\n") == [
        "Heading",
        "Paragraph one.",
        "list item",
        "a quote",
        "Link label",
        "Second",
        "Last.",
    ]
    assert "code" not in doc.text


# --- preformatted ---------------------------------------------------------------------


def test_preformatted_content_is_not_parsed():
    page = (
        "```python code\n"
        "# not a heading\n"
        "=> /not-a-link Not a link\n"
        "* not a list\n"
        "  indented\n"
        "```\n"
        "=> /real Real"
    )
    doc = gemtext.parse(page)
    assert doc.headings == ()
    assert doc.links == (Link("/real", "Real", 7),)
    assert doc.preformatted_alt == ("python code",)
    assert doc.preformatted.split("\n") == [
        "# not a heading",
        "=> /not-a-link Not a link",
        "* not a list",
        "  indented",
    ]
    assert doc.text == "Real"


def test_closing_toggle_text_is_ignored_and_blocks_accumulate():
    page = "```one\na\n``` trailing words\nmiddle\n```\nb\n```\n```  two  \nc\n```"
    doc = gemtext.parse(page)
    assert doc.preformatted_alt == ("one", "two")
    assert doc.preformatted == "a\nb\nc"
    assert doc.text == "middle"


def test_unterminated_block_runs_to_the_end():
    doc = gemtext.parse("# T\n```art\n=> /x y\n# z")
    assert doc.links == ()
    assert doc.headings == (Heading(1, "T"),)
    assert doc.preformatted == "=> /x y\n# z"


def test_preformatted_keeps_blank_and_whitespace_lines():
    doc = gemtext.parse("```\n\n  \n\tx\n```")
    assert doc.preformatted == "\n  \n\tx"


@pytest.mark.parametrize("toggle", ["``", " ```", "`` `"])
def test_not_quite_toggles_are_paragraphs(toggle):
    doc = gemtext.parse(f"{toggle}\n=> /x X")
    assert doc.links == (Link("/x", "X", 2),)
    assert doc.preformatted_alt == ()


# --- line ends and BOM ----------------------------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_ends(newline):
    page = newline.join(["# T", "para", "=> /a A", "", "=> /b", "```", "pre", "```", ""])
    doc = gemtext.parse(page)
    assert doc.title == "T"
    assert doc.links == (Link("/a", "A", 3), Link("/b", "", 5))
    assert doc.text == "T\npara\nA"
    assert doc.preformatted == "pre"


def test_mixed_line_ends_count_lines_once_each():
    doc = gemtext.parse("a\r\n=> /1\rb\n=> /2\r\n\r\n=> /3")
    assert [link.line for link in doc.links] == [2, 4, 6]


def test_leading_bom_is_stripped():
    doc = gemtext.parse("\ufeff# Title\n=> /x")
    assert doc.headings == (Heading(1, "Title"),)
    assert doc.links[0].line == 2


def test_bom_only_at_the_start_is_special():
    doc = gemtext.parse("# T\n\ufeffbody")
    assert doc.text == "T\n\ufeffbody"


# --- titles ---------------------------------------------------------------------------

TITLE_CASES = [
    ("# Heading\ntext", "Heading"),
    ("text first\n## Later heading", "Later heading"),
    ("=> /link Label\n\n  First paragraph  \nsecond", "First paragraph"),
    ("```\npre only\n```\nafter pre", "after pre"),
    ("=> /only Links", None),
    ("```\npre only", None),
    ("* a list item\n> and a quote", "a list item"),
    (">  a quote first\nthen text", "a quote first"),
    ("=> /x Label\n*not a list", "*not a list"),
    ("", None),
    ("\n \n\t\n", None),
    ("#\n##\n", None),
]


@pytest.mark.parametrize(("page", "title"), TITLE_CASES)
def test_title(page, title):
    assert gemtext.parse(page).title == title


def test_long_title_is_capped_at_a_word():
    words = " ".join(f"word{i}" for i in range(100))
    title = gemtext.parse(f"# {words}").title
    assert title is not None
    assert len(title) <= gemtext.TITLE_MAX_CHARS
    assert title.endswith("…")
    assert words.startswith(title[:-1])
    assert title[-2] != " "
    assert title[:-1].split(" ")[-1] in words.split(" ")


def test_long_title_without_spaces_is_cut_hard():
    title = gemtext.parse("x" * 5000).title
    assert title == "x" * (gemtext.TITLE_MAX_CHARS - 1) + "…"


# --- big and hostile input ------------------------------------------------------------


def test_very_long_lines():
    label = "é" * 300_000
    page = f"# {'h' * 200_000}\n=> /{'u' * 200_000} {label}\n{'p' * 500_000}"
    doc = gemtext.parse(page)
    # No URL that long is valid (1024 bytes at most): not a link, but its label is text.
    assert (doc.links, doc.links_oversized) == ((), 1)
    assert len(doc.text) == 200_000 + 300_000 + 500_000 + 2


def test_link_cap_keeps_the_first_line_of_each_url_and_counts_the_others():
    page = "".join(f"=> /{n % 3000} L{n}\n" for n in range(6000)) + "=> /0 again\n"
    doc = gemtext.parse(page, max_links=2000)
    assert [link.url for link in doc.links] == [f"/{n}" for n in range(2000)]
    assert doc.links[5].label == "L5"  # the first line naming a URL wins
    # Lines past the cap naming a URL not kept: /2000../2999, twice each.
    assert doc.links_dropped == 2000
    assert "L5999" in doc.text  # labels are the page's prose all the same


def test_without_a_cap_every_link_line_is_kept():
    doc = gemtext.parse("=> /a\n=> /a\n" * 3000)
    assert (len(doc.links), doc.links_dropped) == (6000, 0)


def test_headings_are_capped_but_their_text_stays():
    page = "".join(f"## H{n}\n" for n in range(gemtext.MAX_HEADINGS + 500))
    doc = gemtext.parse(page)
    assert len(doc.headings) == gemtext.MAX_HEADINGS
    assert doc.text.endswith(f"H{gemtext.MAX_HEADINGS + 499}")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_lines_cut_in_slices_are_the_lines_of_a_split(newline):
    # Lines of every length around the slice size, so cuts fall everywhere.
    text = newline.join("x" * (n * 997 % 40_000) for n in range(60)) + newline
    assert list(gemtext.lines(text)) == text.replace(newline, "\n").split("\n")


_HOSTILE_LINES = {
    "headings": "#ab\n",
    "paragraphs": "ab\n",
    "links": "=>a b\n",
    "crlf": "ab\r\n",
    "preformatted": "```\n" + "ab\n" * 4,
    "alt texts": "```a\n```\n",
}


@pytest.mark.parametrize("line", _HOSTILE_LINES.values(), ids=_HOSTILE_LINES.keys())
def test_a_page_of_tiny_lines_costs_a_small_multiple_of_its_size(line):
    """A Python object per line (about 50 bytes each) made a page of 3-byte lines cost 20
    to 45 times its size (measured: 44x for headings); a 5 MiB body would take 200 MB."""
    page = line * (256 * 1024 // len(line))
    tracemalloc.start()
    try:
        gemtext.parse(page, max_links=2000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * len(page), peak / len(page)


# --- feeds (gemsub) -------------------------------------------------------------------

FEED_LABEL_CASES = [
    ("2024-01-05 - Hyphen", (datetime.date(2024, 1, 5), "Hyphen")),
    ("2024-01-05: Colon", (datetime.date(2024, 1, 5), "Colon")),
    ("2024-01-05 Plain", (datetime.date(2024, 1, 5), "Plain")),
    ("2024-01-05 — Em dash", (datetime.date(2024, 1, 5), "Em dash")),
    ("2024-01-05 | Pipe", (datetime.date(2024, 1, 5), "Pipe")),
    ("2024-01-05\t-\tTabs", (datetime.date(2024, 1, 5), "Tabs")),
    ("2024-01-05 - - double", (datetime.date(2024, 1, 5), "- double")),
    ("2024-01-05", (datetime.date(2024, 1, 5), "")),
    ("2024-02-29 Leap day", (datetime.date(2024, 2, 29), "Leap day")),
    ("2023-02-29 Not a leap year", None),
    ("2024-13-01 Month 13", None),
    ("2024-00-10 Month 0", None),
    ("2024-1-5 Short", None),
    ("20240105 Compact", None),
    ("2024-01-051 Too many digits", None),
    ("On 2024-01-05 text", None),
    ("２０２４-01-05 Fullwidth", None),
    ("", None),
]


@pytest.mark.parametrize(("label", "expected"), FEED_LABEL_CASES)
def test_feed_entry_labels(label, expected):
    doc = gemtext.parse(f"# Feed\n=> /post {label}".rstrip())
    entries = gemtext.feed_entries(doc)
    if expected is None:
        assert entries == ()
    else:
        assert entries == (FeedEntry(expected[0], "/post", expected[1]),)


def test_feed_entries_keep_page_order_and_urls_as_written():
    page = (
        "# My log\n"
        "=> ../about About me\n"
        "=> 2024/02.gmi 2024-02-01 - Second\n"
        "```\n=> /fake 2024-03-01 - inside pre\n```\n"
        "=> gemini://other.example/1 2023-12-31: First\n"
    )
    assert gemtext.feed_entries(gemtext.parse(page)) == (
        FeedEntry(datetime.date(2024, 2, 1), "2024/02.gmi", "Second"),
        FeedEntry(datetime.date(2023, 12, 31), "gemini://other.example/1", "First"),
    )


GEMSUB_CASES = [
    ("# Log\n=> /a 2024-01-05 Post", True),
    ("Intro\n# Log\n=> /a 2024-01-05 Post", True),
    ("## Only level two\n=> /a 2024-01-05 Post", False),
    ("=> /a 2024-01-05 Post", False),
    ("# Log\n=> /a Undated post", False),
    ("# Log\n=> /a 2024-02-30 Impossible date", False),
    ("# Log\n```\n=> /a 2024-01-05 In pre\n```", False),
    ("", False),
]


@pytest.mark.parametrize(("page", "expected"), GEMSUB_CASES)
def test_is_gemsub(page, expected):
    assert gemtext.is_gemsub(gemtext.parse(page)) is expected


# --- properties -----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=500))
def test_parse_never_crashes(text):
    doc = gemtext.parse(text)
    line_count = text.count("\n") + text.count("\r") - text.count("\r\n") + 1
    for link in doc.links:
        assert 1 <= link.line <= line_count
        assert link.url
        assert not any(c.isspace() for c in link.url)
        assert link.label == link.label.strip()
    assert all(1 <= h.level <= 3 and h.text for h in doc.headings)
    assert doc.title is None or 0 < len(doc.title) <= gemtext.TITLE_MAX_CHARS
    gemtext.feed_entries(doc)


# Characters that are not line ends for Gemini (but are for str.splitlines) included on purpose.
_INLINE_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\r\n"),
    max_size=30,
)
_URL_TEXT = _INLINE_TEXT.filter(lambda s: s and not any(c.isspace() for c in s))
_WS = st.sampled_from([" ", "\t", "  ", " \t "])


@st.composite
def gemtext_lines(draw: st.DrawFn) -> tuple[list[str], list[tuple[int, str]]]:
    """Random lines plus the links a correct parser must report (line number, URL)."""
    lines: list[str] = []
    expected: list[tuple[int, str]] = []
    in_pre = False
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["link", "link", "text", "heading", "toggle", "list"]))
        if kind == "link":
            url = draw(_URL_TEXT)
            line = "=>" + draw(st.sampled_from(["", " ", "\t"])) + url
            if draw(st.booleans()):
                line += draw(_WS) + draw(_INLINE_TEXT)
            if not in_pre:
                expected.append((len(lines) + 1, url))
        elif kind == "toggle":
            line = "```" + draw(_INLINE_TEXT)
            in_pre = not in_pre
        elif kind == "heading":
            line = draw(st.sampled_from(["#", "##", "###"])) + draw(_INLINE_TEXT)
        elif kind == "list":
            line = "* " + draw(_INLINE_TEXT)
        else:
            line = draw(_INLINE_TEXT.filter(lambda s: not s.startswith(("=>", "```"))))
        lines.append(line)
    return lines, expected


@settings(max_examples=300, deadline=None)
@given(gemtext_lines(), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans())
def test_every_link_line_gives_exactly_one_link(case, newline, bom):
    lines, expected = case
    text = ("\ufeff" if bom else "") + newline.join(lines)
    doc = gemtext.parse(text)
    assert [(link.line, link.url) for link in doc.links] == expected
