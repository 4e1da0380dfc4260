"""robots.txt as Gemini capsules write it, interpreted politely.

The Gemini companion spec (geminiprotocol.net/docs/companion/robots.gmi) adopts the web's
format and adds *virtual* user agents named after a bot's purpose: a bot respects the one
matching its activity and "should still respect" the rules for ``*``. The crawler answers to
``indexer``, the statistics and graph exports to ``researcher``, and both to our own name,
``sextant``, and to ``*``.

Where RFC 9309 (the web's robots.txt standard) lets only the most specific group apply, we
apply *every* group that addresses us: a path is allowed only if each of them allows it, and
the largest Crawl-delay among them holds. Within one group RFC 9309 decides: longest-match
precedence, Allow winning ties, ``*`` and ``$``, an always-allowed ``/robots.txt``. An Allow
in one group never reopens what another group closes, so ``User-agent: indexer`` with
``Allow: /`` does not undo ``User-agent: *`` with ``Disallow: /private/``.

Capsule authors write these files by hand, sometimes serve them as text/gemini, and make
the web's usual mistakes; where a file is ambiguous we choose the reading that crawls less.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from string import ascii_letters, digits

from sextant.errors import MalformedHeader
from sextant.protocol import Family, family

# Every group among these applies; the order only decides how the capsule page lists them.
DEFAULT_AGENTS = ("sextant", "indexer", "*")  # crawling for the search index
RESEARCHER_AGENTS = ("sextant", "researcher", "*")  # statistics and graph exports

# Like Google, read at most this much: a robots.txt larger than this is a mistake or an
# attack, and rules past the limit are unlikely to be the ones that matter.
MAX_ROBOTS_CHARS = 512 * 1024

_UNRESERVED = frozenset(ascii_letters + digits + "-._~")
# Characters a path or query may carry unencoded (RFC 3986 pchar, "/" and "?"); "%" is handled
# apart. "[", "]" and "#" are left out on purpose: sextant.urls encodes them in paths, and the
# crawler hands us its canonical paths, so a rule written with a raw "[" must match "%5B".
_URL_SAFE = _UNRESERVED | frozenset("!$&'()*+,;=:@/?")
_HEX = frozenset("0123456789abcdefABCDEF")

_USER_AGENT_KEYS = frozenset({"useragent"})
# RFC 9309 §2.2.2 invites parsers to accept typos of directives; these are the ones seen.
_DISALLOW_KEYS = frozenset({"disallow", "dissallow", "dissalow", "disalow", "disallaw"})
_ALLOW_KEYS = frozenset({"allow"})
_CRAWL_DELAY_KEYS = frozenset({"crawldelay"})


def normalize_percent_encoding(text: str) -> str:
    """One spelling for one path, so ``/%7efoo``, ``/~foo`` and ``/%7Efoo`` compare equal.

    RFC 3986 §6.2.2: hex digits upper-cased, escapes of unreserved characters decoded.
    Characters that cannot appear raw in a URL (non-ASCII, spaces) are encoded as UTF-8 so a
    rule written with ``ü`` matches a request for ``%C3%BC``; a ``%`` that starts no valid
    escape is a literal percent sign and becomes ``%25``.
    """
    out: list[str] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "%":
            hex_digits = text[i + 1 : i + 3]
            if len(hex_digits) == 2 and set(hex_digits) <= _HEX:
                decoded = chr(int(hex_digits, 16))
                out.append(decoded if decoded in _UNRESERVED else "%" + hex_digits.upper())
                i += 3
                continue
            out.append("%25")
        elif char in _URL_SAFE:
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


def _normalize_path(path: str) -> str:
    """The part of a URL that rules are matched against: path plus query, never a fragment."""
    path = path.partition("#")[0]
    if not path.startswith("/"):
        path = "/" + path
    return normalize_percent_encoding(path)


def _normalize_pattern(value: str) -> str:
    """A rule's pattern in the same spelling as :func:`_normalize_path` produces.

    ``$`` is special only at the very end (RFC 9309 §2.2.3); runs of ``*`` collapse because
    they match the same strings; a pattern not starting with ``/`` or ``*`` gets a leading
    ``/``, since authors who write ``Disallow: private`` mean the directory at the root.
    """
    anchored = value.endswith("$")
    body = value[:-1] if anchored else value
    while "**" in body:
        body = body.replace("**", "*")
    if not body.startswith(("/", "*")):
        body = "/" + body
    return normalize_percent_encoding(body) + ("$" if anchored else "")


def _pattern_matches(pattern: str, path: str) -> bool:
    """Whether a normalized pattern matches a normalized path (a prefix match unless ``$``).

    Deliberately not a regular expression: a hostile ``/*a*a*a*a*a*b`` would make a
    backtracking engine take exponential time. Placing each literal piece at its leftmost
    possible position is correct for ``*``-only globs and costs O(len(path) * pieces).
    """
    anchored = pattern.endswith("$")
    pieces = (pattern[:-1] if anchored else pattern).split("*")
    first = pieces[0]
    if not path.startswith(first):
        return False
    pos = len(first)
    if len(pieces) == 1:
        return not anchored or pos == len(path)
    for piece in pieces[1:-1]:
        found = path.find(piece, pos)
        if found < 0:
            return False
        pos = found + len(piece)
    last = pieces[-1]
    if anchored:
        return path.endswith(last) and len(path) - len(last) >= pos
    return path.find(last, pos) >= 0


@dataclass(frozen=True, slots=True)
class Rule:
    """One Allow/Disallow line; ``pattern`` is normalized (see :func:`_normalize_pattern`)."""

    allow: bool
    pattern: str

    def matches(self, path: str) -> bool:
        """``path`` must already be normalized; :meth:`RobotsPolicy.allowed` does that."""
        return _pattern_matches(self.pattern, path)


@dataclass(slots=True)
class _Group:
    rules: list[Rule] = field(default_factory=list)
    crawl_delay: float | None = None


def _directive_key(raw: str) -> str:
    """``User-Agent``, ``user agent``, ``User_agent`` all name the same directive."""
    return "".join(raw.split()).replace("-", "").replace("_", "").lower()


def _agent_tokens(value: str) -> list[str]:
    """The product tokens a User-agent line names, lower-cased, versions dropped.

    RFC 9309 §2.2.1 matches on the product token only, so ``Sextant/1.0`` names ``sextant``.
    Commas and blanks also separate names because some authors list several on one line.
    """
    names = value.replace(",", " ").split()
    tokens = (name.split("/", 1)[0].lower() for name in names)
    return [token for token in tokens if token]


def _group_allows(group: _Group, normalized: str) -> bool:
    """RFC 9309 within one group: the longest matching pattern decides, Allow wins ties."""
    best: tuple[int, bool] | None = None
    for rule in group.rules:
        if rule.matches(normalized):
            candidate = (len(rule.pattern), rule.allow)
            if best is None or candidate > best:
                best = candidate
    return best is None or best[1]


def _matches_every_path(pattern: str) -> bool:
    """``/``, ``*``, ``/*``: a prefix every normalized path (which starts with ``/``) has."""
    return not pattern.endswith("$") and pattern.replace("*", "") in ("", "/")


def _parse_delay(value: str) -> float | None:
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


class RobotsPolicy:
    """The rules of one capsule's robots.txt, grouped by the agent they address."""

    __slots__ = ("_groups",)

    def __init__(self, groups: dict[str, _Group]) -> None:
        self._groups = groups

    @classmethod
    def allow_all(cls) -> RobotsPolicy:
        """No rules at all: what a missing robots.txt means."""
        return cls({})

    @classmethod
    def parse(cls, text: str) -> RobotsPolicy:
        """Read a robots.txt; never raises, because any line we cannot read is ignored.

        Grouping follows RFC 9309 §2.1: consecutive User-agent lines open one group, which
        the following rule lines fill until the next User-agent line after a rule. Blank
        lines, comments, unknown directives (Sitemap, Host) and gemtext lines that slipped in
        (``=> gemini://…``, ``* item``, headings, which the ``#`` comment rule swallows)
        neither end a group nor add to it. Groups naming the same agent are merged (§2.2.1).

        Two polite readings beyond the RFC: rules before any User-agent line apply to ``*``
        (a file that is just ``Disallow: /`` clearly means everyone), and when a group gives
        several Crawl-delay values the largest wins.
        """
        text = text[:MAX_ROBOTS_CHARS].removeprefix("\ufeff")
        groups: dict[str, _Group] = {}
        current: list[_Group] = []
        seen_rule = False
        for raw_line in text.splitlines():
            line = raw_line.partition("#")[0].strip()
            key, colon, value = line.partition(":")
            if not colon:
                continue
            key, value = _directive_key(key), value.strip()
            if key in _USER_AGENT_KEYS:
                if seen_rule:
                    current, seen_rule = [], False
                for token in _agent_tokens(value):
                    group = groups.setdefault(token, _Group())
                    if all(group is not other for other in current):
                        current.append(group)
                continue
            if key in _ALLOW_KEYS or key in _DISALLOW_KEYS:
                rule = Rule(key in _ALLOW_KEYS, _normalize_pattern(value)) if value else None
                delay = None
            elif key in _CRAWL_DELAY_KEYS:
                rule, delay = None, _parse_delay(value)
            else:
                continue
            if not current:
                current = [groups.setdefault("*", _Group())]
            seen_rule = True
            for group in current:
                # An empty Disallow/Allow is a rule line that grants nothing new (RFC 9309
                # §2.2.2): it keeps the group alive without adding a pattern.
                if rule is not None:
                    group.rules.append(rule)
                if delay is not None:
                    group.crawl_delay = max(delay, group.crawl_delay or 0.0)
        return cls(groups)

    def _groups_for(self, agents: Sequence[str]) -> list[_Group]:
        """The group of each of ``agents`` that the file names, in the order of ``agents``."""
        if isinstance(agents, str):  # a lone name, not a sequence of one-letter agents
            agents = (agents,)
        names = dict.fromkeys(agent.strip().lower() for agent in agents)
        return [self._groups[name] for name in names if name in self._groups]

    def allowed(self, path: str, agents: Sequence[str] = DEFAULT_AGENTS) -> bool:
        """Whether ``path`` (with its ``?query``, if any) may be fetched: only if every group
        addressing one of ``agents`` allows it.

        Within a group the longest matching pattern decides; at equal length Allow wins (RFC
        9309 §2.2.2). ``/robots.txt`` itself is always allowed (§2.2.2), otherwise we could
        never reread it.
        """
        normalized = _normalize_path(path)
        if normalized.partition("?")[0] == "/robots.txt":
            return True
        return all(_group_allows(group, normalized) for group in self._groups_for(agents))

    def closed(self, agents: Sequence[str] = DEFAULT_AGENTS) -> bool:
        """Whether some group addressing ``agents`` disallows every path and reopens none
        (``Disallow: /`` without an Allow): the author wants the whole capsule left alone."""
        return any(
            any(not rule.allow and _matches_every_path(rule.pattern) for rule in group.rules)
            and not any(rule.allow for rule in group.rules)
            for group in self._groups_for(agents)
        )

    def crawl_delay(self, agents: Sequence[str] = DEFAULT_AGENTS) -> float | None:
        """The largest Crawl-delay among the groups addressing ``agents``, in seconds;
        unbounded, so the crawler applies its own ceiling."""
        delays = [g.crawl_delay for g in self._groups_for(agents) if g.crawl_delay is not None]
        return max(delays) if delays else None

    def rules_for(self, agents: Sequence[str] = DEFAULT_AGENTS) -> tuple[Rule, ...]:
        """The rules of every group addressing ``agents`` (normalized patterns), group by
        group in the order of ``agents``, each group in file order, each rule once (a line
        under ``User-agent: indexer, sextant`` belongs to both groups). Empty: nothing
        applies."""
        groups = self._groups_for(agents)
        return tuple(dict.fromkeys(rule for group in groups for rule in group.rules))

    @property
    def agents(self) -> tuple[str, ...]:
        """Every agent the file addresses, lower-cased, for display and debugging."""
        return tuple(self._groups)

    def __repr__(self) -> str:
        return f"RobotsPolicy(agents={list(self._groups)!r})"


def pubnix_user(path: str) -> str | None:
    """``alice`` for ``/~alice/...``: on a pubnix each ``/~user/`` directory is a person's
    capsule, whose own ``/~alice/robots.txt`` covers that directory."""
    if not path.startswith("/~"):
        return None
    end = path.find("/", 2)
    return (path[2:] if end < 0 else path[2:end]) or None


def allowed_in_user_directory(
    policy: RobotsPolicy, user: str, path: str, agents: Sequence[str] = DEFAULT_AGENTS
) -> bool:
    """Whether a pubnix user's own robots.txt allows ``path`` (a path in ``/~user/``).

    Its author may have written paths from the host's root (``Disallow: /~alice/drafts/``)
    or from the user directory (``Disallow: /drafts/``); a path is allowed only if both
    readings allow it, the cautious choice this module makes wherever a file is ambiguous.
    """
    if not policy.allowed(path, agents):
        return False
    return policy.allowed(path[len(f"/~{user}") :] or "/", agents)


def parse_robots_response(status: int, body: str | None) -> RobotsPolicy | None:
    """Turn the outcome of fetching ``/robots.txt`` into a policy, or ``None`` for "not yet".

    - 2x: the body is the policy (``None`` body, i.e. unreadable or truncated: not yet).
    - 5x (51 NOT FOUND, 52 GONE, the rest of the family too): there is no policy and there
      will not be one, which the companion spec and the web both read as "allow all".
    - 1x (a robots.txt asking for input), 3x (the caller follows redirects and reports the
      final status; one still here is unresolved), 4x (including 44 SLOW DOWN) and 6x (a
      client certificate we do not have): the policy exists or may, but we cannot read it
      now, so crawling must wait rather than assume permission.
    - A status outside 10..69 is a broken server: also ``None``.
    """
    try:
        kind = family(status)
    except MalformedHeader:
        return None
    if kind is Family.SUCCESS:
        return None if body is None else RobotsPolicy.parse(body)
    if kind is Family.PERMANENT_FAILURE:
        return RobotsPolicy.allow_all()
    return None
