"""Infinite spaces: exclusion rules for known traps, and structural heuristics for new ones.

A crawler that follows every link of a web proxy, a git browser or a calendar never finishes,
and it hammers the small server behind it while it tries. Two defences live here:

* :class:`Exclusions`: rules read from ``traps.txt`` (shipped in the package, one reason per
  rule, published by the search capsule so capsule authors know why a page is missing) merged
  with the user's ``--exclude`` file in the same format;
* :func:`looks_like_trap`: shape checks on a single URL (repeating or very deep paths,
  calendars far from today, git objects addressed by hash, self-feeding query strings) that
  catch traps nobody has listed yet.

The file format is documented at the top of ``traps.txt``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from itertools import pairwise
from pathlib import Path

from sextant.errors import ConfigError
from sextant.urls import GeminiURL

_REGEX_PREFIX = "re:"
_GLOB_SCHEME = "gemini://"


def _compile(pattern: str) -> re.Pattern[str]:
    """Turn a rule pattern into a regex searched in the canonical URL.

    ``re:`` patterns are used as written. Globs are anchored at the start and are prefixes
    unless they end in ``$``; ``*`` stays inside one path segment, ``**`` crosses segments and
    ``**/`` also matches nothing, so ``gemini://*/**/proxy/`` covers ``/proxy/`` at any depth.
    Raises ``ValueError`` with a message fit for a ``file:line:`` prefix.
    """
    if pattern.startswith(_REGEX_PREFIX):
        source = pattern[len(_REGEX_PREFIX) :]
        if not source:
            raise ValueError("empty regular expression after 're:'")
        try:
            return re.compile(source)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {source!r}: {exc}") from None
    if not pattern.startswith(_GLOB_SCHEME):
        raise ValueError(
            f"pattern {pattern!r} must start with {_GLOB_SCHEME!r} (a URL glob) "
            f"or {_REGEX_PREFIX!r} (a regular expression)"
        )
    anchored_end = pattern.endswith("$")
    body = pattern[:-1] if anchored_end else pattern
    # URLs are matched in canonical form, where the authority is lower-case.
    authority_end = body.find("/", len(_GLOB_SCHEME))
    if authority_end < 0:
        authority_end = len(body)
    body = body[:authority_end].lower() + body[authority_end:]
    parts: list[str] = []
    pos = 0
    while pos < len(body):
        if body.startswith("**/", pos):
            parts.append("(?:.*/)?")
            pos += 3
        elif body.startswith("**", pos):
            parts.append(".*")
            pos += 2
        elif body[pos] == "*":
            parts.append("[^/]*")
            pos += 1
        else:
            parts.append(re.escape(body[pos]))
            pos += 1
    return re.compile(r"\A" + "".join(parts) + (r"\Z" if anchored_end else ""))


@dataclass(frozen=True, slots=True)
class ExclusionRule:
    """One rule: URLs matching ``pattern`` are not fetched, because of ``reason``."""

    pattern: str
    reason: str
    source: str = "traps.txt"  # where the rule came from, e.g. "exclude.txt:12"
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", _compile(self.pattern))

    def matches(self, url: GeminiURL | str) -> bool:
        return self._regex.search(str(url)) is not None


class Exclusions:
    """An ordered set of rules; the first matching rule gives the reason."""

    __slots__ = ("_rules",)

    def __init__(self, rules: tuple[ExclusionRule, ...] = ()) -> None:
        self._rules = tuple(rules)

    @classmethod
    def default(cls) -> Exclusions:
        """The rules shipped with Sextant in ``crawler/traps.txt``."""
        text = resources.files("crawler").joinpath("traps.txt").read_text(encoding="utf-8")
        return cls.parse(text, source="traps.txt", require_reason=True)

    @classmethod
    def from_file(cls, path: Path) -> Exclusions:
        """A user exclude file (same format; a rule without a reason gets one naming the file).

        Raises :class:`ConfigError` naming the file and line of the first bad rule, so one typo
        cannot silently leave a trap open.
        """
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read exclude file {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"exclude file {path} is not UTF-8 text") from None
        return cls.parse(text, source=str(path), require_reason=False)

    @classmethod
    def parse(cls, text: str, *, source: str, require_reason: bool) -> Exclusions:
        rules: list[ExclusionRule] = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            pattern, *rest = line.split(None, 1)
            reason = rest[0].strip() if rest else ""
            where = f"{source}:{number}"
            if not reason:
                if require_reason:
                    raise ConfigError(f"{where}: rule {pattern!r} has no reason after the pattern")
                reason = f"listed in {source}"
            try:
                rules.append(ExclusionRule(pattern, reason, where))
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        return cls(tuple(rules))

    def merged(self, other: Exclusions) -> Exclusions:
        return Exclusions(self._rules + other._rules)

    def match(self, url: GeminiURL | str) -> ExclusionRule | None:
        text = str(url)
        for rule in self._rules:
            if rule.matches(text):
                return rule
        return None

    @property
    def rules(self) -> tuple[ExclusionRule, ...]:
        return self._rules

    def __len__(self) -> int:
        return len(self._rules)


# --- structural heuristics ---------------------------------------------------------------

# Real capsules rarely nest deeper than a dozen directories; relative-link accidents and
# generated mazes go on forever.
MAX_PATH_SEGMENTS = 20
# a/b/a/b/a/b: a relative link that resolves one level deeper each time it is followed.
LOOP_REPEATS = 3
# One non-numeric name showing up this often in a path is a loop with something in between.
MAX_SAME_SEGMENT = 4
# Calendars link to "next month" forever; dates this far from today are never real content.
EARLIEST_YEAR = 1970
YEARS_AHEAD = 2
MAX_QUERY_CHARS = 512

_GIT_VIEWS = frozenset(
    {"tree", "blob", "raw", "commit", "commits", "blame", "log", "diff", "patch", "plain"}
)
_HASH_RE = re.compile(r"[0-9a-f]{7,64}")
_QUERY_HASH_RE = re.compile(r"(?:^|[&;])(?:id|h|rev|commit)=[0-9a-f]{7,64}(?:$|[&;])")
_YEAR_RE = re.compile(r"[0-9]{4}")
_MONTH_RE = re.compile(r"[0-9]{1,2}")
_DATE_RE = re.compile(r"(?<![0-9])([0-9]{4})-([0-9]{2})(?:-([0-9]{2}))?(?![0-9])")
_QUERY_DATE_RE = re.compile(r"(?:^|[&;])(?:year|y|date|month|day|week)=([0-9]{4})(?![0-9])")
_PARAM_NAME_RE = re.compile(r"(?:^|[&;])([^=&;]+)=")
_NESTED_QUERY_RE = re.compile(r"\?|%3F", re.IGNORECASE)


def looks_like_trap(url: GeminiURL, *, today: date | None = None) -> str | None:
    """The reason ``url`` looks like part of an infinite space, or ``None``.

    The reasons start with a stable category ("repeated path segments", "very deep path", ...)
    before a colon, so statistics can group them. ``today`` anchors the calendar bound.
    """
    segments = url.path.split("/")[1:]
    if len(segments) > MAX_PATH_SEGMENTS:
        return f"very deep path: {len(segments)} segments (limit {MAX_PATH_SEGMENTS})"
    reason = _repeated_segments(segments)
    if reason is None:
        reason = _git_object(segments, url.query)
    if reason is None:
        reason = _calendar(segments, url.query, (today or date.today()).year)
    if reason is None and url.query is not None:
        reason = _query_loop(url.query)
    return reason


def _repeated_segments(segments: list[str]) -> str | None:
    count = len(segments)
    for period in range(1, count // LOOP_REPEATS + 1):
        for start in range(count - LOOP_REPEATS * period + 1):
            unit = segments[start : start + period]
            if all(
                segments[start + k * period : start + (k + 1) * period] == unit
                for k in range(1, LOOP_REPEATS)
            ):
                shown = "/".join(unit) or "(empty)"
                return f"repeated path segments: {shown!r} {LOOP_REPEATS} times in a row"
    named = Counter(s for s in segments if s and not s.isdigit())
    if named:
        name, seen = named.most_common(1)[0]
        if seen >= MAX_SAME_SEGMENT:
            return f"repeated path segments: {name!r} appears {seen} times"
    return None


def _git_object(segments: list[str], query: str | None) -> str | None:
    for view, following in pairwise(segments):
        if view in _GIT_VIEWS and _HASH_RE.fullmatch(following):
            return f"git browser: /{view}/ of object {following[:12]}"
    if query and any(s in _GIT_VIEWS for s in segments) and _QUERY_HASH_RE.search(query):
        return "git browser: object addressed by hash in the query"
    return None


def _calendar(segments: list[str], query: str | None, this_year: int) -> str | None:
    years: list[int] = []
    for segment, following in pairwise(segments):
        if (
            _YEAR_RE.fullmatch(segment)
            and _MONTH_RE.fullmatch(following)
            and 1 <= int(following) <= 12
        ):
            years.append(int(segment))
    for segment in segments:
        years.extend(
            int(m.group(1)) for m in _DATE_RE.finditer(segment) if 1 <= int(m.group(2)) <= 12
        )
    if query:
        years.extend(int(m.group(1)) for m in _QUERY_DATE_RE.finditer(query))
    latest = this_year + YEARS_AHEAD
    for year in years:
        if not EARLIEST_YEAR <= year <= latest:
            return f"calendar out of range: year {year} (outside {EARLIEST_YEAR}-{latest})"
    return None


def _query_loop(query: str) -> str | None:
    if len(query) > MAX_QUERY_CHARS:
        return f"query loop: query of {len(query)} characters (limit {MAX_QUERY_CHARS})"
    names = Counter(_PARAM_NAME_RE.findall(query))
    if names:
        name, seen = names.most_common(1)[0]
        if seen > 1:
            return f"query loop: parameter {name!r} repeated {seen} times"
    if len(_NESTED_QUERY_RE.findall(query)) >= 2:
        return "query loop: the query carries nested queries"
    return None
