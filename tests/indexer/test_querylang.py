"""The query language: what it parses to, what it compiles to, and what it refuses."""

from __future__ import annotations

import re

import pytest
from whoosh import query as wq

from indexer.querylang import (
    MAX_PHRASE_TERMS,
    MAX_PHRASES,
    MAX_QUERY_CHARS,
    All,
    AnyOf,
    Filter,
    Not,
    Text,
    compile_query,
    parse,
    parse_size,
)
from indexer.require import Require
from sextant.errors import QueryError


def test_words_are_anded() -> None:
    assert parse("tomato soup").root == All((Text("tomato"), Text("soup")))


def test_phrases_or_and_not() -> None:
    root = parse('"sourdough starter" OR bread -rye NOT wheat').root
    assert root == AnyOf(
        (
            Text("sourdough starter", phrase=True),
            All((Text("bread"), Not(Text("rye")), Not(Text("wheat")))),
        )
    )


def test_parentheses_group() -> None:
    root = parse("(cats | dogs) food").root
    assert root == All((AnyOf((Text("cats"), Text("dogs"))), Text("food")))


def test_lowercase_operators_are_words_and_hyphens_inside_words_are_not_negation() -> None:
    assert parse("cats or dogs").root == All((Text("cats"), Text("or"), Text("dogs")))
    assert parse("e-mail").root == Text("e-mail")


def test_filters_and_their_aliases() -> None:
    root = parse(
        'site:example.org domain:tilde.example lang:de content_type:image title:"a b" '
        "mime:text/gemini"
    ).root
    assert root == All(
        (
            Filter("site", "example.org"),
            Filter("domain", "tilde.example"),
            Filter("lang", "de"),
            Filter("type", "image"),
            Text("a b", phrase=True, field="intitle"),
            Filter("type", "text/gemini"),
        )
    )


def test_unknown_names_with_colons_are_plain_words() -> None:
    assert parse("gemini://example.org").root == Text("gemini://example.org")
    assert parse("note: hello").root == All((Text("note:"), Text("hello")))


def test_filter_only_and_text_queries_are_told_apart() -> None:
    assert parse("site:example.org").has_text is False
    assert parse("site:example.org lang:en").has_text is False
    assert parse("site:example.org cats").has_text is True


def test_spans_of_plain_words_are_kept_for_suggestions() -> None:
    parsed = parse('gemni "exact phrase" -skip capsle site:x.org')
    assert [(span.text, span.start) for span in parsed.words] == [("gemni", 0), ("capsle", 27)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (">10K", (10240, None, True, False)),
        (">=1.5M", (int(1.5 * 1024**2), None, False, False)),
        ("<2k", (None, 2048, False, True)),
        ("<=100", (None, 100, False, False)),
        ("512", (512, 512, False, False)),
        ("1K..4KB", (1024, 4096, False, False)),
        ("..1G", (None, 1024**3, False, False)),
    ],
)
def test_parse_size(text: str, expected: tuple[object, ...]) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ('"unclosed phrase', "unclosed quote"),
        ('title:"unclosed', "unclosed quote"),
        ("(cats dogs", "missing ')'"),
        ("cats dogs)", "no '('"),
        ("()", "empty parentheses"),
        ("cats ( ) dogs", "empty parentheses"),
        ("OR cats", "OR needs a term"),
        ("cats OR", "OR needs a term"),
        ("cats OR OR dogs", "OR needs a term"),
        ("cats NOT", "NOT needs a term"),
        ("cats -", None),  # a lone dash is punctuation, not an operator
        ("-", "nothing to search for"),
        ("-cats", "only excludes"),
        ("NOT cats -dogs", "only excludes"),
        ("site:", "site: needs a value"),
        ("lang:", "lang: needs a value"),
        ("size:>abc", "size: expects"),
        ("size:10X", "size: expects"),
        ("size:5K..1K", "empty"),
        ("size:..", "size: expects"),
        ("lang:123", "lang: expects"),
        ("type:!!", "type: expects"),
        ("site:exa mple", None),  # two terms: "site:exa" and "mple" — valid
        ("site:bad_host:99999", "site: expects"),
        ('""', "empty quotes"),
        ("...", "nothing to search for"),
        ("x" * (MAX_QUERY_CHARS + 1), "too long"),
        (" ".join(["w"] * 65), "too many terms"),
        # Phrases are what a query costs most (issue 18): their number and length are bounded.
        (" OR ".join(['"of the"'] * MAX_PHRASES), None),
        (" OR ".join(['"of the"'] * (MAX_PHRASES + 1)), "too many phrases"),
        (" ".join(["example.org"] * (MAX_PHRASES + 1)), "too many phrases"),
        ('"' + " ".join(["w"] * MAX_PHRASE_TERMS) + '"', None),
        ('"' + " ".join(["w"] * (MAX_PHRASE_TERMS + 1)) + '"', "a phrase is too long"),
        (" ".join(['"a b c d e f g h i j k l m"'] * 8), "too many words"),  # 104 terms
        (" ".join(['"a b c d e f g h i j k l"'] * 8), None),
        ("(" * 20 + "x" + ")" * 20, "nested"),
        ("cats\x00dogs", "control characters"),
    ],
)
def test_malformed_queries_get_clear_messages(text: str, message: str | None) -> None:
    if message is None:
        compile_query(parse(text))
        return
    with pytest.raises(QueryError, match=re.escape(message)):
        compile_query(parse(text))


def leaves(query: wq.Query) -> list[wq.Query]:
    return list(query.leaves())


def test_plain_word_matches_text_and_boosts_the_boost_fields() -> None:
    compiled = compile_query(parse("gardening"))
    fields = {leaf.fieldname for leaf in leaves(compiled.query) if leaf.fieldname != "lang"}
    assert fields == {"text"}
    assert "garden" in compiled.terms
    assert "gardening" in compiled.terms
    assert ("title", "garden") in compiled.boosts
    assert ("anchors", "gardening") in compiled.boosts
    assert compiled.phrases == []


def test_intitle_and_inurl_match_their_own_fields_without_boosts() -> None:
    compiled = compile_query(parse("intitle:gardening inurl:gemlog"))
    fields = {leaf.fieldname for leaf in leaves(compiled.query) if leaf.fieldname != "lang"}
    assert fields == {"title", "urlwords"}
    assert compiled.boosts == set()
    assert {leaf.text for leaf in leaves(compiled.query) if leaf.fieldname == "urlwords"} == {
        "gemlog"
    }


def test_stemmed_forms_only_count_on_pages_of_their_language() -> None:
    # German "here" stems to "her", an English word: that form must require lang:de.
    query = compile_query(parse("here")).query
    restricted = [
        part
        for part in query.subqueries
        if isinstance(part, Require) and part.a == wq.Term("text", "her")
    ]
    assert len(restricted) == 1
    assert wq.Term("lang", "de") in list(restricted[0].b.leaves())
    assert wq.Term("lang", "en") not in list(restricted[0].b.leaves())
    assert wq.Term("text", "here") in query.subqueries  # the unstemmed form, unrestricted


def test_top_level_filters_restrict_without_scoring() -> None:
    query = compile_query(parse("tomato site:example.org -soup")).query
    assert isinstance(query, wq.AndNot)
    assert isinstance(query.a, Require)
    assert query.a.b == wq.Term("host", "example.org")


def test_top_level_phrases_are_loosened_and_deferred_nested_ones_are_not() -> None:
    compiled = compile_query(parse('"sourdough starter" bread'))
    assert not any(isinstance(leaf, wq.Phrase) for leaf in leaves(compiled.query))
    (check,) = compiled.phrases
    assert ("text", ("sourdough", "starter")) in check.alternatives
    assert ("text", ("sourdough", "start")) in check.alternatives  # English stems
    nested = compile_query(parse('"sourdough starter" OR bread'))
    assert nested.phrases == []
    assert any(isinstance(leaf, wq.Phrase) for leaf in nested.query.subqueries[0].subqueries)
    negated = compile_query(parse('bread -"sourdough starter"'))
    assert negated.phrases == []


def test_compound_words_are_phrases() -> None:
    (check,) = compile_query(parse("example.org")).phrases
    assert ("text", ("example", "org")) in check.alternatives
    (check,) = compile_query(parse("inurl:example.org")).phrases
    assert check.alternatives == [("urlwords", ("example", "org"))]


def test_negated_words_are_not_marked_in_snippets() -> None:
    compiled = compile_query(parse("cats -dogs"))
    assert isinstance(compiled.query, wq.AndNot)
    assert "dog" not in compiled.terms
    assert "dogs" not in compiled.terms
    assert "cat" in compiled.terms


def test_lang_filter_narrows_stemming_to_that_language() -> None:
    terms = compile_query(parse("running lang:de")).terms
    assert "run" not in terms  # the English stem is not needed for German pages
    assert "running" in terms


def test_filters_compile_to_exact_terms() -> None:
    def only(text: str) -> wq.Query:
        compiled = compile_query(parse(text)).query
        assert isinstance(compiled, wq.ConstantScoreQuery)
        return compiled.child

    assert only("site:Example.ORG") == wq.Term("host", "example.org")
    assert only("site:example.org:1966") == wq.Term("host", "example.org:1966")
    assert only("site:bücher.example") == wq.Term("host", "xn--bcher-kva.example")
    assert only("site:example.org/~alice/") == wq.And(
        [wq.Term("host", "example.org"), wq.Prefix("url", "gemini://example.org/~alice/")]
    )
    assert only("domain:Example.org") == wq.Term("domain", "example.org")
    assert only("lang:en-GB") == wq.Term("lang", "en")
    assert only("type:image") == wq.Prefix("mime", "image/")
    assert only("type:text/*") == wq.Prefix("mime", "text/")
    assert only("type:gemini") == wq.Term("mime", "text/gemini")
    assert only("type:input") == wq.Term("kind", "input")
    assert only("charset:UTF8") == wq.Term("charset", "utf-8")
    assert only("charset:latin1") == wq.Term("charset", "iso8859-1")
