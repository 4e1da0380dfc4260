"""The search query language: parsed here into a small tree, then compiled to a Whoosh query.

Grammar (documented for users in the README)::

    query    := or_expr
    or_expr  := and_expr ( ("OR" | "|") and_expr )*
    and_expr := unary+                       words side by side must all match
    unary    := ("-" | "NOT") unary | primary
    primary  := "(" or_expr ")" | "\\"phrase\\"" | filter | word
    filter   := name ":" ( word | "\\"phrase\\"" )

Filters: ``site:`` (a capsule, optionally with a path: ``site:example.org/~alice``),
``domain:`` (a host and all its subdomains), ``lang:`` (``lang:de``; matches ``de-AT`` too),
``type:``/``content_type:``/``mime:`` (a MIME type ``text/gemini``, a major type ``image``,
or ``input`` for ``1x`` endpoints, ``feed`` for feeds), ``charset:``, ``size:`` (``>10K``, ``<=2M``,
``1K..5K``; K, M, G are powers of 1024), ``intitle:``/``title:``, ``inurl:``, ``after:`` and
``before:`` (a year, month or day: :mod:`indexer.dates`). ``sort:newest`` is no filter but
orders the results by date, anywhere in the query.

A ``name:value`` whose name is not a filter is an ordinary word (``gemini://`` must not need
escaping), ``OR``, ``AND`` and ``NOT`` are operators only in capitals, so ``cats or dogs`` is three
words. A word with punctuation inside (``example.org``) must match as a phrase of its parts.

What the query language refuses, with a message saying what to change: unbalanced
parentheses or quotes, an operator with nothing to apply to, a filter without a value or with
one it cannot use, a query that only excludes (``-foo``: everything else is not a search), and
queries too long or too deeply nested to be anyone's real question. Phrases are what a query
costs most (positions read for every candidate, see :mod:`indexer.positions`), so their
number and length are bounded too; the search budget (:mod:`indexer.budget`) bounds the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from whoosh import query as wq

from indexer.analysis import (
    STEMMED_LANGUAGES,
    fold,
    primary_language,
    query_variants_by_language,
    word_list,
    words,
)
from indexer.dates import date_filter
from indexer.documents import normalize_charset
from indexer.navigation import hosts_in
from indexer.require import Require
from indexer.schema import BOOST_FIELDS, TEXT_FIELD
from indexer.sizefilter import SizeRange
from indexer.wildcard import MIN_PREFIX_CHARS, WordPrefix
from sextant.errors import InvalidURL, QueryError
from sextant.urls import parse as parse_url

#: Longer than a Gemini request's whole URL (1024 bytes, spec section 2); nobody types more.
MAX_QUERY_CHARS = 1024
MAX_TERMS = 64
MAX_DEPTH = 16
#: Phrases in one query: quoted ones and words joined by punctuation (``example.org``). Each
#: is a position check on every candidate; an OR of 32 phrases of the commonest words held a
#: search thread for seconds (issue 18). Nobody's question has more than a handful.
MAX_PHRASES = 16
#: Terms in one phrase (a CJK run is a phrase of its character pairs: 24 is a long sentence).
MAX_PHRASE_TERMS = 24
#: Terms in the whole query once analysed, phrases' terms included: each is a posting list
#: to load and combine.
MAX_QUERY_TERMS = 96

FILTER_NAMES = {
    "site": "site",
    "domain": "domain",
    "lang": "lang",
    "type": "type",
    "content_type": "type",
    "mime": "type",
    "charset": "charset",
    "size": "size",
    "intitle": "intitle",
    "title": "intitle",
    "inurl": "inurl",
    "after": "after",
    "before": "before",
    "sort": "sort",
}

#: Orders ``sort:`` accepts: by relevance (the default) or by the page's date, newest first.
SORTS = ("relevance", "newest")

#: Short names people type for common types.
TYPE_ALIASES = {
    "gemini": "text/gemini",
    "gemtext": "text/gemini",
    "gmi": "text/gemini",
    "plain": "text/plain",
    "txt": "text/plain",
    "markdown": "text/markdown",
    "md": "text/markdown",
    "html": "text/html",
    "pdf": "application/pdf",
}

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2}
_SIZE_UNITS |= {"g": 1024**3, "gb": 1024**3}
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?b?)", re.IGNORECASE)
_FILTER_RE = re.compile(r"([A-Za-z_]+):(.*)", re.DOTALL)
_LANG_RE = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")
_MIME_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*(?:/(?:\*|[a-z0-9][a-z0-9!#$&^_.+-]*\*?))?")


# --- the tree ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Text:
    """Words to find; ``phrase`` when quoted; ``field`` for intitle:/inurl:."""

    value: str
    phrase: bool = False
    field: str | None = None
    prefix: bool = False  # ``sol*``: any word of the index starting with ``value``


@dataclass(frozen=True, slots=True)
class Filter:
    name: str  # canonical: site, domain, lang, type, charset, size
    value: str


@dataclass(frozen=True, slots=True)
class Not:
    child: Node


@dataclass(frozen=True, slots=True)
class All:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    children: tuple[Node, ...]


Node = Text | Filter | Not | All | AnyOf


@dataclass(frozen=True, slots=True)
class Span:
    """Where a plain word sits in the query string (for "did you mean" rewrites)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    text: str
    root: Node
    words: tuple[Span, ...]  # plain, non-negated words, for spelling suggestions
    has_text: bool  # False for filter-only queries, which are ordered by link score
    sort: str = "relevance"  # or "newest" (sort:newest): by the page's date


# --- lexer -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "(", ")", "OR", "AND", "NOT", "-", "phrase", "word", "filter"
    value: str
    start: int
    end: int
    name: str = ""  # filter name


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            tokens.append(_Token(ch, ch, i, i + 1))
            i += 1
        elif ch == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise QueryError(f'unclosed quote at position {i + 1}: add the closing "')
            tokens.append(_Token("phrase", text[i + 1 : end], i, end + 1))
            i = end + 1
        elif ch == "-" and i + 1 < n and not text[i + 1].isspace() and _starts_term(text, i):
            tokens.append(_Token("-", ch, i, i + 1))
            i += 1
        elif ch == "|":
            tokens.append(_Token("OR", ch, i, i + 1))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '()"':
                i += 1
            word = text[start:i]
            match = _FILTER_RE.fullmatch(word)
            if word in ("OR", "AND", "NOT"):
                tokens.append(_Token(word, word, start, i))
            elif len(word) > 1 and word.endswith("*") and not match:
                tokens.append(_Token("prefix", _prefix_word(word), start, i))
            elif match and match.group(1).lower() in FILTER_NAMES:
                name = FILTER_NAMES[match.group(1).lower()]
                value = match.group(2)
                if not value and i < n and text[i] == '"':
                    end = text.find('"', i + 1)
                    if end < 0:
                        raise QueryError(f'unclosed quote at position {i + 1}: add the closing "')
                    value, i = text[i + 1 : end], end + 1
                    tokens.append(_Token("filter", value, start, i, name=f"{name}\0phrase"))
                    continue
                if not value:
                    raise QueryError(
                        f"{match.group(1)}: needs a value, e.g. {_FILTER_EXAMPLES[name]}"
                    )
                tokens.append(_Token("filter", value, start, i, name=name))
            else:
                tokens.append(_Token("word", word, start, i))
    return tokens


def _prefix_word(word: str) -> str:
    """The folded beginning a ``sol*`` stands for; refused when too short to be a question
    (``a*`` is most of the index) or not one word."""
    stem = word[:-1]
    found = list(words(stem))
    if len(found) != 1 or found[0].cjk or found[0].text != stem:
        raise QueryError(
            f"{word}: a * goes at the end of one word, e.g. sol* (punctuation inside a "
            "prefix is not supported)"
        )
    if len(stem) < MIN_PREFIX_CHARS:
        raise QueryError(
            f"{word}: a prefix needs at least {MIN_PREFIX_CHARS} letters before the *, e.g. sol*"
        )
    return fold(stem)


def _starts_term(text: str, i: int) -> bool:
    """A ``-`` negates only at the start of a term (``e-mail`` is one word, not ``e NOT mail``)."""
    return i == 0 or text[i - 1].isspace() or text[i - 1] == "("


_FILTER_EXAMPLES = {
    "site": "site:example.org",
    "domain": "domain:example.org",
    "lang": "lang:de",
    "type": "type:image or type:text/gemini",
    "charset": "charset:utf-8",
    "size": "size:>10K",
    "intitle": "intitle:recipes",
    "inurl": "inurl:gemlog",
    "after": "after:2024-06",
    "before": "before:2023-12-31",
    "sort": "sort:newest",
}


# --- parser ------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.pos = 0
        self.depth = 0
        self.words: list[Span] = []
        self.negated = 0
        self.terms = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def parse(self) -> Node:
        node = self.or_expr()
        token = self.peek()
        if token is not None:  # only a stray ")" can stop or_expr early
            raise QueryError(
                f"unbalanced parenthesis: the ')' at position {token.start + 1} has no '(' "
                "before it"
            )
        return node

    def or_expr(self) -> Node:
        token = self.peek()
        if token is not None and token.kind == "OR":
            raise QueryError("OR needs a term on both sides (nothing before it)")
        children = [self.and_expr()]
        while (token := self.peek()) is not None and token.kind == "OR":
            self.pos += 1
            following = self.peek()
            if following is None or following.kind in ("OR", ")"):
                raise QueryError("OR needs a term on both sides (nothing after it)")
            children.append(self.and_expr())
        return children[0] if len(children) == 1 else AnyOf(tuple(children))

    def and_expr(self) -> Node:
        children: list[Node] = []
        while (token := self.peek()) is not None and token.kind not in ("OR", ")"):
            if token.kind == "AND":
                self.pos += 1
                continue
            children.append(self.unary())
        if not children:
            token = self.peek()
            if token is None:
                raise QueryError("the query ends where a term was expected")
            raise QueryError(f"a term was expected before {token.value!r}")
        return children[0] if len(children) == 1 else All(tuple(children))

    def unary(self) -> Node:
        token = self.peek()
        assert token is not None
        if token.kind in ("-", "NOT"):
            self.pos += 1
            following = self.peek()
            if following is None or following.kind in ("OR", ")"):
                raise QueryError(f"{token.value} needs a term after it")
            self.negated += 1
            try:
                child = self.unary()
            finally:
                self.negated -= 1
            return Not(child)
        return self.primary()

    def primary(self) -> Node:
        token = self.peek()
        assert token is not None
        self.pos += 1
        if token.kind == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise QueryError(f"parentheses nested more than {MAX_DEPTH} deep")
            following = self.peek()
            if following is not None and following.kind == ")":
                raise QueryError(f"empty parentheses at position {token.start + 1}")
            if following is None:
                raise QueryError(f"missing ')' for the '(' at position {token.start + 1}")
            node = self.or_expr()
            closing = self.peek()
            if closing is None or closing.kind != ")":
                raise QueryError(f"missing ')' for the '(' at position {token.start + 1}")
            self.pos += 1
            self.depth -= 1
            return node
        if token.kind == ")":
            raise QueryError(
                f"unbalanced parenthesis: the ')' at position {token.start + 1} has no '(' "
                "before it"
            )
        self._count()
        if token.kind == "phrase":
            if not token.value.strip():
                raise QueryError(f'empty quotes at position {token.start + 1}: put words inside ""')
            return Text(token.value, phrase=True)
        if token.kind == "filter":
            name, _, phrase = token.name.partition("\0")
            if name in ("intitle", "inurl"):
                return Text(token.value, phrase=bool(phrase), field=name)
            return Filter(name, token.value)
        if token.kind == "prefix":  # not a word to correct: "sol*" is not a typo of "son"
            return Text(token.value, prefix=True)
        if not self.negated:
            self.words.append(Span(token.start, token.end, token.value))
        return Text(token.value)

    def _count(self) -> None:
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise QueryError(f"too many terms: a query may hold at most {MAX_TERMS}")


def parse(text: str) -> ParsedQuery:
    """Parse a query string; raises :class:`QueryError` with a message for people."""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is too long: at most {MAX_QUERY_CHARS} characters")
    if any(ord(ch) < 32 and not ch.isspace() for ch in text):
        raise QueryError("the query contains control characters")
    tokens = _tokens(text)
    sort = "relevance"
    for token in tokens:
        if token.kind == "filter" and token.name.partition("\0")[0] == "sort":
            sort = token.value.strip().lower()
            if sort not in SORTS:
                raise QueryError(
                    f"sort: orders by {' or '.join(SORTS)} (sort:newest), not {token.value!r}"
                )
    tokens = [
        token
        for token in tokens
        if token.kind != "filter" or token.name.partition("\0")[0] != "sort"
    ]
    if not tokens:
        raise QueryError("the query is empty: type some words to search for")
    parser = _Parser(text, tokens)
    root = parser.parse()
    if not _has_positive(root):
        raise QueryError(
            "the query only excludes: add a word or a filter to search for, "
            "e.g. gemini -gopher or site:example.org -draft"
        )
    return ParsedQuery(text, root, tuple(parser.words), _has_text(root), sort)


@dataclass(frozen=True, slots=True)
class NamedCapsules:
    """Capsule names in a query (:mod:`indexer.navigation`): their start pages rank first,
    and those of ``standalone`` names are shown even when their text does not match."""

    names: tuple[str, ...] = ()
    standalone: tuple[str, ...] = ()


NO_NAMES = NamedCapsules()


def capsule_names_in(parsed: ParsedQuery) -> NamedCapsules:
    """The whole query's words joined (when it is only words), and any host name or start
    page URL written in it."""
    children = parsed.root.children if isinstance(parsed.root, All) else (parsed.root,)
    texts = [child for child in children if isinstance(child, Text)]
    hosts = [host for node in texts for host in hosts_in(node.value)]
    only_words = len(texts) == len(children) and all(
        node.field is None and not node.prefix for node in texts
    )
    if not only_words:
        return NamedCapsules(tuple(hosts))
    whole = " ".join(fold(word) for node in texts for word in word_list(node.value))
    if not whole:
        return NamedCapsules(tuple(hosts))
    standalone = [whole] + (hosts if len(texts) == 1 else [])
    return NamedCapsules(tuple(sorted({*hosts, whole})), tuple(standalone))


def _has_positive(node: Node) -> bool:
    if isinstance(node, Not):
        return False
    if isinstance(node, All):
        return any(_has_positive(child) for child in node.children)
    if isinstance(node, AnyOf):
        return all(_has_positive(child) for child in node.children)
    return True


def _has_text(node: Node) -> bool:
    if isinstance(node, Text):
        return True
    if isinstance(node, All | AnyOf):
        return any(_has_text(child) for child in node.children)
    return False


# --- compiler ------------------------------------------------------------------------------


@dataclass(slots=True)
class PhraseCheck:
    """A phrase the searcher must verify on candidates: it holds when any alternative
    (field, term sequence at consecutive positions) is present in the document."""

    alternatives: list[tuple[str, tuple[str, ...]]]


@dataclass(slots=True)
class Compiled:
    """The Whoosh query, the terms a snippet should mark, phrases left to verify, and the
    (field, term) pairs whose boost-field scores the best candidates get."""

    query: wq.Query
    terms: set[str] = field(default_factory=set)
    phrases: list[PhraseCheck] = field(default_factory=list)
    boosts: set[tuple[str, str]] = field(default_factory=set)
    #: Word prefixes (field, folded beginning): their terms join ``terms`` and ``boosts``
    #: once the index has expanded them (:func:`indexer.query._expand_prefixes`).
    prefixes: list[tuple[str, str]] = field(default_factory=list)
    #: Phrases and analysed terms so far, for the limits (MAX_PHRASES, MAX_QUERY_TERMS).
    phrase_count: int = 0
    term_count: int = 0


def compile_query(parsed: ParsedQuery) -> Compiled:
    """Turn the tree into a Whoosh query over ``text``, plus what the searcher does after it:
    phrases to verify and boost-field terms to re-score with."""
    langs = _language_scope(parsed.root)
    compiled = Compiled(wq.NullQuery)
    query = _compile(parsed.root, langs, compiled, top=True, negated=False)
    if query is None:
        raise QueryError(
            "nothing to search for: the query holds no letters or digits "
            "(punctuation alone is not indexed)"
        )
    compiled.query = query
    return compiled


def _language_scope(root: Node) -> tuple[str | None, ...] | None:
    """A ``lang:`` filter that applies to the whole query narrows stemming to that language."""
    children = root.children if isinstance(root, All) else (root,)
    for child in children:
        if isinstance(child, Filter) and child.name == "lang":
            lang = primary_language(child.value)
            if lang in STEMMED_LANGUAGES:
                return (None, lang)
            return (None,)
    return None


def _compile(
    node: Node,
    langs: tuple[str | None, ...] | None,
    compiled: Compiled,
    *,
    top: bool,
    negated: bool,
) -> wq.Query | None:
    """Compile ``node``. ``top`` is true for the query and its positive conjuncts: only there
    is "the candidates of the loose query, filtered by the phrase" the same set of documents,
    so only there are phrases deferred to verification."""
    if isinstance(node, Text):
        return _text(node, langs, compiled, top=top, negated=negated)
    if isinstance(node, Filter):
        # Only a filter inside OR or NOT gets here (see the All case below): a page that
        # matches by the filter alone gets a small constant score.
        return wq.ConstantScoreQuery(_filter(node), score=1.0)
    if isinstance(node, Not):
        child = _compile(node.child, langs, compiled, top=False, negated=not negated)
        return None if child is None else wq.Not(child)
    if isinstance(node, AnyOf):
        parts = [
            _compile(child, langs, compiled, top=False, negated=negated) for child in node.children
        ]
        present = [part for part in parts if part is not None]
        if not present:
            return None
        return present[0] if len(present) == 1 else wq.Or(present)
    positives: list[wq.Query] = []
    filters: list[wq.Query] = []
    negatives: list[wq.Query] = []
    for child in node.children:
        if isinstance(child, Not):
            excluded = _compile(child.child, langs, compiled, top=False, negated=not negated)
            if excluded is not None:
                negatives.append(excluded)
        elif isinstance(child, Filter):
            filters.append(_filter(child))
        else:
            part = _compile(child, langs, compiled, top=top, negated=negated)
            if part is not None:
                positives.append(part)
    if positives:
        query = positives[0] if len(positives) == 1 else wq.And(positives)
        if filters:
            # Require: filters decide what matches, only the text decides the score, and
            # Whoosh's block-max skipping still works on the text (an And would add the
            # filter terms' BM25 to every score).
            query = Require(query, filters[0] if len(filters) == 1 else wq.And(filters))
    elif filters:
        query = filters[0] if len(filters) == 1 else wq.And(filters)
    else:
        return None
    if not negatives:
        return query
    return wq.AndNot(query, negatives[0] if len(negatives) == 1 else wq.Or(negatives))


def _text(
    node: Text,
    langs: tuple[str | None, ...] | None,
    compiled: Compiled,
    *,
    top: bool,
    negated: bool,
) -> wq.Query | None:
    """Words or a phrase, matched in ``text`` (or ``title``/``urlwords`` for intitle:/inurl:),
    in every language's form.

    A stemmed form only counts on pages of its own language: the German stem of ``here`` is
    ``her``, which English pages hold for another word entirely, so language-specific forms
    are required to come with a ``lang`` term. The unstemmed form matches pages of any
    language. URL words are indexed unstemmed, so inurl: uses the unstemmed form only.

    A multi-term sequence at the top of the query compiles to the AND of its terms (cheap,
    scored, skippable by Whoosh's block-max optimizations) and the positional check is
    recorded for the searcher to run on the best candidates only (see
    :func:`indexer.query._verify_phrases`): Whoosh's own phrase matcher decodes every position
    of every document holding all the words, seconds for "of the" on a large index.
    """
    field_name = {"intitle": "title", "inurl": "urlwords"}.get(node.field or "", TEXT_FIELD)
    if node.prefix:
        _count(compiled, 1)
        if not negated:
            compiled.prefixes.append((field_name, node.value))
        return WordPrefix(field_name, node.value)
    variants = query_variants_by_language(
        node.value, (None,) if field_name == "urlwords" else langs
    )
    if not variants:
        return None
    _count(compiled, max(len(sequence) for sequence in variants))
    check = PhraseCheck([])
    parts: list[wq.Query] = []
    for sequence, languages in sorted(variants.items(), key=lambda item: item[0]):
        if not negated:
            compiled.terms.update(sequence)
            if field_name == TEXT_FIELD:
                compiled.boosts.update((name, term) for name in BOOST_FIELDS for term in sequence)
        if len(sequence) == 1:
            part: wq.Query = wq.Term(field_name, sequence[0])
        elif top and not negated:
            check.alternatives.append((field_name, sequence))
            part = wq.And([wq.Term(field_name, term) for term in sequence])
        else:
            part = wq.Phrase(field_name, list(sequence))
        if None not in languages:
            only = [wq.Term("lang", lang) for lang in sorted(lang for lang in languages if lang)]
            part = Require(part, only[0] if len(only) == 1 else wq.Or(only))
        parts.append(part)
    if check.alternatives:
        compiled.phrases.append(check)
    return parts[0] if len(parts) == 1 else wq.Or(parts)


def _count(compiled: Compiled, length: int) -> None:
    """Count a word or phrase of ``length`` terms against the query's limits."""
    if length > MAX_PHRASE_TERMS:
        raise QueryError(
            f"a phrase is too long: at most {MAX_PHRASE_TERMS} words in one phrase; "
            "quote a shorter part of it"
        )
    compiled.term_count += length
    if compiled.term_count > MAX_QUERY_TERMS:
        raise QueryError(
            f"too many words: a query may hold at most {MAX_QUERY_TERMS}, phrases' words included"
        )
    if length > 1:
        compiled.phrase_count += 1
        if compiled.phrase_count > MAX_PHRASES:
            raise QueryError(
                f"too many phrases: a query may hold at most {MAX_PHRASES} (words joined by "
                "punctuation, such as example.org, count as phrases)"
            )


def _filter(node: Filter) -> wq.Query:
    if node.name == "site":
        return _site(node.value)
    if node.name == "domain":
        return wq.Term("domain", _host(node.value, "domain"))
    if node.name == "lang":
        lang = primary_language(node.value) if _LANG_RE.fullmatch(node.value) else None
        if lang is None:
            raise QueryError(f"lang: expects a language code such as lang:en, not {node.value!r}")
        return wq.Term("lang", lang)
    if node.name == "type":
        return _type(node.value)
    if node.name in ("after", "before"):
        return date_filter(node.name, node.value)
    if node.name == "charset":
        charset = normalize_charset(node.value)
        if charset is None:
            raise QueryError("charset: needs a value, e.g. charset:utf-8")
        return wq.Term("charset", charset)
    return _size(node.value)


def _host(value: str, name: str) -> str:
    try:
        url = parse_url(f"gemini://{value.strip().rstrip('/')}/")
    except InvalidURL as exc:
        raise QueryError(
            f"{name}: expects a host such as {name}:example.org, not {value!r}"
        ) from exc
    return url.host


def _site(value: str) -> wq.Query:
    text = value.strip()
    if "://" not in text:
        text = f"gemini://{text}"
    try:
        url = parse_url(text)
    except InvalidURL as exc:
        raise QueryError(
            f"site: expects a capsule such as site:example.org, not {value!r}"
        ) from exc
    host = wq.Term("host", url.authority)
    if url.path in ("", "/") and url.query is None:
        return host
    return wq.And([host, wq.Prefix("url", str(url))])


def _type(value: str) -> wq.Query:
    mime = value.strip().lower()
    if mime == "input":
        return wq.Term("kind", "input")
    if mime in ("feed", "feeds"):
        return wq.Every("feed")
    mime = TYPE_ALIASES.get(mime, mime)
    if not _MIME_RE.fullmatch(mime):
        raise QueryError(
            f"type: expects a MIME type such as type:text/gemini or type:image, not {value!r}"
        )
    major, _, minor = mime.partition("/")
    if not minor or minor == "*":
        return wq.Prefix("mime", f"{major}/")
    if minor.endswith("*"):
        return wq.Prefix("mime", mime[:-1])
    return wq.Term("mime", mime)


def parse_size(value: str) -> tuple[int | None, int | None, bool, bool]:
    """``>10K`` → (10240, None, True, False): low, high, low exclusive, high exclusive."""
    text = value.strip()
    try:
        bounds = _size_bounds(text)
    except ValueError:
        raise QueryError(
            f"size: expects a size such as size:>10K, size:<2M or size:1K..5K, not {value!r}"
        ) from None
    low, high = bounds[0], bounds[1]
    if low is not None and high is not None and low > high:
        raise QueryError(f"size: the range {value!r} is empty (the low end is higher)")
    return bounds


def _size_bounds(text: str) -> tuple[int | None, int | None, bool, bool]:
    if ".." in text:
        low_text, _, high_text = text.partition("..")
        low = _bytes(low_text) if low_text else None
        high = _bytes(high_text) if high_text else None
        if low is None and high is None:
            raise ValueError(text)
        return low, high, False, False
    for operator in (">=", "<=", ">", "<", "="):
        if text.startswith(operator):
            amount = _bytes(text[len(operator) :])
            break
    else:
        operator, amount = "=", _bytes(text)
    return {
        ">": (amount, None, True, False),
        ">=": (amount, None, False, False),
        "<": (None, amount, False, True),
        "<=": (None, amount, False, False),
        "=": (amount, amount, False, False),
    }[operator]


def _bytes(text: str) -> int:
    match = _SIZE_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(text)
    amount = float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
    if amount >= 2**62:
        raise ValueError(text)
    return int(amount)


def _size(value: str) -> wq.Query:
    low, high, low_excl, high_excl = parse_size(value)
    return SizeRange(low, high, low_exclusive=low_excl, high_exclusive=high_excl)
