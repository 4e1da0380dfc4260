"""Markdown read as prose: the syntax goes, the words stay."""

from __future__ import annotations

import time

import pytest

from sextant.markdown import inline, readable


@pytest.mark.parametrize(
    ("line", "text"),
    [
        ("See [the protocol notes](gemini://docs.example/spec/) now", "See the protocol notes now"),
        ('A [titled](gemini://a.example/ "Title") link', "A titled link"),
        ("![a lighthouse](lighthouse.png)", "a lighthouse"),
        ("[reference style][notes] link", "reference style link"),
        ("<gemini://a.example/>", "gemini://a.example/"),
        (
            "*em* **strong** ***both*** ~~struck~~ `code` __under__",
            "em strong both struck code under",
        ),
        ("snake_case_name and 2*3*4 stay", "snake_case_name and 2*3*4 stay"),
    ],
)
def test_inline_syntax_goes(line: str, text: str) -> None:
    assert inline(line) == text


def test_block_syntax_goes_and_headings_are_kept() -> None:
    doc = readable(
        "# Changelog\n\n## 2026-11-01 ##\n- Added the *lighthouse* photo.\n"
        "1. first\n> quoted\n> > nested\n\n---\n\nSetext title\n============\n"
        "Sub\n---\n```sh\n# not a heading\nrm -rf /\n```\n[notes]: gemini://x.example/\nend\n"
    )
    assert doc.headings == ("Changelog", "2026-11-01", "Setext title", "Sub")
    assert doc.text.splitlines() == [
        "Changelog",
        "",
        "2026-11-01",
        "Added the lighthouse photo.",
        "first",
        "quoted",
        "nested",
        "",
        "",
        "Setext title",
        "Sub",
        "end",
    ]


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert readable("text\n```\ncode\n# no heading").text == "text"


def test_hostile_markdown_costs_time_in_proportion_to_its_size() -> None:
    """Unmatched markers and deep nesting: no backtracking blow-up."""
    hostile = ("*" * 5000 + "_" * 5000 + "[" * 5000 + "`" * 5000 + "~" * 5000 + "\n") * 20
    hostile += "# " + " \t" * 50_000 + "x\n" + "> " * 50_000 + "\n" + "[a](" * 20_000 + "\n"
    hostile += "- " + "*a " * 30_000 + "\n" + "![" * 20_000 + "\n"
    started = time.perf_counter()
    readable(hostile)
    assert time.perf_counter() - started < 5.0
