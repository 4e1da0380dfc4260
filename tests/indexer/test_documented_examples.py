"""Every example query that Sextant shows people finds something on the sample space.

The examples are read from where people see them: the lines ``sextant demo`` prints, the
``sextant search`` commands in README.md and indexer/README.md, and the capsule's help
pages (the Examples of /documentation/searching, the example in /about). A new example is
checked as soon as it is written. The sample space is crawled and indexed the way the demo
does it (tests/indexer/sample_index.py).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from indexer.query import Searcher
from tests.indexer.sample_index import sample_searcher

ROOT = Path(__file__).resolve().parents[2]

#: Examples allowed to find nothing, with the reason (an example naming a capsule that the
#: sample space does not have). None today: the examples name sample capsules
#: (files.example, gemlog.example), so that a reader trying them in the demo sees results.
EXEMPT: dict[str, str] = {}

#: ``sextant search`` options that take a value (their value is no query word).
VALUED_OPTIONS = {"--limit", "--page", "--budget"}


def _command_queries(text: str) -> Iterator[str]:
    for line in text.splitlines():
        line = line.split("  #", 1)[0].strip()
        if not line.startswith("sextant search "):
            continue
        words: list[str] = []
        arguments = iter(shlex.split(line)[2:])
        for argument in arguments:
            if argument in VALUED_OPTIONS:
                next(arguments)
            elif not argument.startswith("--"):
                words.append(argument)
        yield " ".join(words)


def documented_examples() -> list[str]:
    examples: list[str] = []
    for readme in ("README.md", "indexer/README.md"):
        examples += _command_queries((ROOT / readme).read_text(encoding="utf-8"))
    demo = (ROOT / "sextant/pipeline.py").read_text(encoding="utf-8")
    examples += re.findall(r"search '([^']+)'", demo)
    docs = ROOT / "search_capsule/static"
    searching = (docs / "documentation/searching.gmi").read_text(encoding="utf-8")
    section = searching.split("## Examples", 1)[1].split("\n## ", 1)[0]
    examples += [line[2:].split(" — ")[0] for line in section.splitlines() if line.startswith("* ")]
    examples += re.findall(r'a search like "([^"]+)"', (docs / "about.gmi").read_text("utf-8"))
    return list(dict.fromkeys(examples))


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Searcher]:
    with sample_searcher(tmp_path_factory.mktemp("sample")) as searcher:
        yield searcher


def test_the_examples_are_found_where_people_read_them() -> None:
    examples = documented_examples()
    assert "lang:de kartoffel" in examples  # the demo's
    assert "gemini client" in examples  # the READMEs'
    assert "mer lang:fr" in examples  # the capsule's help
    assert "type:image" in examples  # /about
    assert set(EXEMPT) <= set(examples), "an exemption for an example nobody shows"


@pytest.mark.parametrize("query", documented_examples())
def test_every_documented_example_finds_something(sample: Searcher, query: str) -> None:
    results = sample.search(query)  # parses, whatever the exemptions say
    if query in EXEMPT:
        pytest.skip(EXEMPT[query])
    assert results.total >= 1, query
    assert results.corrected_from is None, (query, results.query)  # found as written


def test_issue_22_on_the_sample_space(sample: Searcher) -> None:
    """What issue 22 reported on the sample space, as a user would try it."""
    assert sample.search("gemlog").hits[0].url == "gemini://gemlog.example/"
    assert sample.search("biblioteca").hits[0].url == "gemini://biblioteca.example/"
    lighthouse = [hit.url for hit in sample.search("lighthouse").hits]
    assert lighthouse[-1] == "gemini://files.example/lighthouse.png", lighthouse
    solar = [hit.url for hit in sample.search("sol*").hits]
    assert "gemini://gemlog.example/posts/2026-06-30-solar-server.gmi" in solar
    assert sample.search("sol*").suggestion is None
    changelog = sample.search("downloads").hits[0]
    assert changelog.url == "gemini://files.example/changelog.md"
    assert not set("[]#") & set(changelog.snippet), changelog.snippet
    newest = sample.search("site:gemlog.example inurl:posts sort:newest").hits
    assert [hit.date for hit in newest] == sorted((hit.date for hit in newest), reverse=True)
    assert newest[0].url.endswith("2026-11-20-thinkpad-revival.gmi")
    assert sample.search("before:2026-07 raspberry").hits[0].url.endswith("solar-server.gmi")
