"""The exclusion rules in force, read as data for the ``/known-excludes`` page.

The built-in rules live in ``crawler/traps.txt``; the operator's removals (``sextant
forget``, usually at an author's request) in the store's ``operator_exclusions`` table.
The capsule may not import crawler code (imports flow sextant ← indexer ← search_capsule),
so it reads the file as package data and only splits each line into its pattern and
reason; matching URLs stays the crawler's business.
The format is documented at the top of the file: ``PATTERN whitespace REASON``, ``#``
comments, and ``# --- Title ---`` comment lines that we show as section headings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sextant.store.models import OperatorExclusion

#: Removals listed at most; a page of ten thousand prefixes helps nobody.
MAX_REMOVALS = 500
REMOVALS_TITLE = "Removed by this installation's operator"

_SECTION = re.compile(r"#\s*-{2,}\s*(.*?)\s*-*\s*$")


@dataclass(frozen=True, slots=True)
class ExcludeRule:
    pattern: str
    reason: str


@dataclass(frozen=True, slots=True)
class ExcludeSection:
    title: str
    rules: tuple[ExcludeRule, ...]


def parse_rules(text: str) -> tuple[ExcludeSection, ...]:
    sections: list[ExcludeSection] = []
    title = ""
    rules: list[ExcludeRule] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            match = _SECTION.fullmatch(line)
            if match and match.group(1):
                if rules:
                    sections.append(ExcludeSection(title, tuple(rules)))
                title, rules = match.group(1), []
            continue
        pattern, *reason = line.split(None, 1)
        rules.append(ExcludeRule(pattern, reason[0].strip() if reason else ""))
    if rules:
        sections.append(ExcludeSection(title, tuple(rules)))
    return tuple(sections)


def builtin_rules(package: str = "crawler", name: str = "traps.txt") -> tuple[ExcludeSection, ...]:
    """The rules shipped with the crawler; empty when the crawler is not installed."""
    try:
        text = (resources.files(package) / name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return ()
    return parse_rules(text)


def operator_removals(session: Session, *, limit: int = MAX_REMOVALS) -> tuple[ExcludeSection, ...]:
    """The operator's removals as one section (none when there are none): URL prefixes."""
    rows = session.execute(
        select(OperatorExclusion.prefix, OperatorExclusion.reason)
        .order_by(OperatorExclusion.prefix)
        .limit(limit)
    ).all()
    if not rows:
        return ()
    title = REMOVALS_TITLE
    if len(rows) == limit:
        total = session.scalar(select(func.count()).select_from(OperatorExclusion)) or 0
        if total > limit:
            title += f" (the first {limit} of {total})"
    return (ExcludeSection(title, tuple(ExcludeRule(row.prefix, row.reason) for row in rows)),)
