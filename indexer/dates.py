"""A page's date: the best evidence of when it was written, for ``after:``, ``before:`` and
``sort:newest``.

Gemini has no Last-Modified header, so the date comes from what capsules write, in order of
trust:

1. a date opening the label of a link to the page: the gemlog index convention
   (``=> 2024-05-02-tomatoes.gmi 2024-05-02 Growing tomatoes``, also what Gemini
   subscriptions are made of), or a date in the page's own first heading;
2. a date in its URL path (``/2023/05/…``, ``2023-05-14-title.gmi``);
3. else the first time the crawler saw it (then the time it was fetched).

Dates are whole days, kept in a per-document column as days since 1970-01-01 (-1 unknown)
and filtered like sizes (:class:`~indexer.sizefilter.ColumnRange`). ``after:`` and
``before:`` take a year, a month or a day, and include all of it: ``after:2024-06`` is from
1 June 2024 on, ``before:2023`` up to 31 December 2023.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from datetime import date, datetime, timedelta

from indexer.sizefilter import UNKNOWN, ColumnRange
from sextant.errors import QueryError

DATE_COLUMN = "dates"
UNKNOWN_DATE = UNKNOWN
EPOCH = date(1970, 1, 1)
#: Older "dates" in labels and paths are numbers that look like one (an ISBN, a count).
EARLIEST_YEAR = 1970

_LABEL_DATE = re.compile(r"\s*(\d{4})-(\d{2})-(\d{2})(?!\d)")
_TEXT_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_PATH_DATE = re.compile(r"(?<![\d])(\d{4})([-/])(\d{2})(?:\2(\d{2}))?(?![\d])")
_PERIOD = re.compile(r"(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")


class DateRange(ColumnRange):
    """Pages whose date (days since 1970-01-01) is within the range."""

    column = DATE_COLUMN


def day_number(day: date) -> int:
    return (day - EPOCH).days


def from_day_number(number: int) -> date | None:
    return None if number < 0 else EPOCH + timedelta(days=number)


def _valid(year: str, month: str, day: str | None, latest: date) -> date | None:
    try:
        found = date(int(year), int(month), int(day) if day else 1)
    except ValueError:
        return None
    return found if EARLIEST_YEAR <= found.year and found <= latest else None


def page_date(
    labels: Iterable[str],
    first_heading: str | None,
    path: str,
    discovered: datetime | None,
    fetched: datetime | None,
) -> date | None:
    """The page's date from the best evidence there is (see the module doc)."""
    seen = discovered or fetched
    latest = (seen or datetime.now()).date() + timedelta(days=1)  # a capsule's clock may run ahead
    for label in labels:
        match = _LABEL_DATE.match(label)
        if match and (found := _valid(match[1], match[2], match[3], latest)):
            return found
    if first_heading:
        match = _TEXT_DATE.search(first_heading)
        if match and (found := _valid(match[1], match[2], match[3], latest)):
            return found
    for match in _PATH_DATE.finditer(path):
        year, _, month, day = match.groups()
        if found := _valid(year, month, day, latest):
            return found
    return None if seen is None else seen.date()


def parse_period(name: str, value: str) -> tuple[int, int]:
    """``2024``, ``2024-06``, ``2024-06-30`` → its first and last day, as day numbers."""
    match = _PERIOD.fullmatch(value.strip())
    try:
        if match is None:
            raise ValueError(value)
        year, month, day = (int(part) if part else None for part in match.groups())
        assert year is not None
        first = date(year, month or 1, day or 1)
        if day is not None:
            last = first
        elif month is not None:
            last = date(year, month, calendar.monthrange(year, month)[1])
        else:
            last = date(year, 12, 31)
    except (ValueError, OverflowError):
        raise QueryError(
            f"{name}: expects a date such as {name}:2024, {name}:2024-06 or {name}:2024-06-30, "
            f"not {value!r}"
        ) from None
    return day_number(first), day_number(last)


def date_filter(name: str, value: str) -> DateRange:
    """``after:`` (that period and later) or ``before:`` (that period and earlier)."""
    first, last = parse_period(name, value)
    return DateRange(first, None) if name == "after" else DateRange(None, last)
