"""What a crawl shows while it runs and leaves behind when it ends.

Three outputs of the same counters: a status line on stderr redrawn in place (only on a
terminal, never with ``--quiet``), a summary table at the end, and with ``--log FILE`` one
JSON object per request, for people who want to grep or plot a crawl afterwards.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sextant.display import json_text, one_line
from sextant.errors import ConfigError


@dataclass(slots=True)
class CrawlStats:
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    pages: int = 0  # page requests that got an outcome (any status, or an error)
    robots: int = 0  # robots.txt requests
    bytes: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # by error kind
    skipped: Counter[str] = field(default_factory=Counter)  # excluded / disallowed
    slow_downs: int = 0
    deferred: int = 0  # rows given back with a later due time
    retries: int = 0  # rows kept for another attempt
    parked: int = 0  # capsules parked
    certificate_events: int = 0
    new_pages: int = 0
    enqueued: int = 0
    stop_reason: str = ""
    writer_cpu: float = 0.0  # seconds of CPU the single writer used
    writer_transactions: int = 0

    @property
    def requests(self) -> int:
        return self.pages + self.robots

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def pages_per_second(self) -> float:
        elapsed = self.elapsed
        return self.pages / elapsed if elapsed > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The figures kept in ``runs.stats`` (JSON)."""
        return {
            "pages": self.pages,
            "robots_requests": self.robots,
            "bytes": self.bytes,
            "seconds": round(self.elapsed, 3),
            "pages_per_second": round(self.pages_per_second, 2),
            "statuses": {str(code): count for code, count in sorted(self.statuses.items())},
            "errors": dict(sorted(self.errors.items())),
            "skipped": dict(sorted(self.skipped.items())),
            "slow_downs": self.slow_downs,
            "deferred": self.deferred,
            "retries": self.retries,
            "parked_capsules": self.parked,
            "certificate_events": self.certificate_events,
            "new_pages": self.new_pages,
            "enqueued": self.enqueued,
            "stop_reason": self.stop_reason,
            "writer_cpu_seconds": round(self.writer_cpu, 3),
            "writer_transactions": self.writer_transactions,
        }


def status_line(stats: CrawlStats, *, active: int, window: int, frontier: int | None) -> str:
    errors = ", ".join(f"{kind} {count}" for kind, count in stats.errors.most_common(3))
    parts = [
        f"{stats.pages} pages",
        f"{stats.pages_per_second:.1f}/s",
        f"{active} capsules active",
        f"window {window}",
        f"frontier {frontier if frontier is not None else '?'}",
    ]
    if errors:
        parts.append(f"errors: {errors}")
    return " · ".join(parts)


def summary_table(stats: CrawlStats, *, frontier: int | None = None) -> str:
    """A plain-text table for the end of a run."""
    families = Counter[str]()
    for code, count in stats.statuses.items():
        families[f"{code // 10}x"] += count
    rows: list[tuple[str, str]] = [
        ("pages fetched", str(stats.pages)),
        ("robots.txt requests", str(stats.robots)),
        ("time", f"{stats.elapsed:.1f} s"),
        ("pages/s", f"{stats.pages_per_second:.1f}"),
        ("bytes received", f"{stats.bytes:,}"),
    ]
    rows += [(f"status {family}", str(count)) for family, count in sorted(families.items())]
    rows += [(f"error: {kind}", str(count)) for kind, count in stats.errors.most_common()]
    rows += [(f"not fetched: {kind}", str(count)) for kind, count in sorted(stats.skipped.items())]
    rows += [
        ("44 slow down", str(stats.slow_downs)),
        ("retries scheduled", str(stats.retries)),
        ("deferred to later", str(stats.deferred)),
        ("capsules parked", str(stats.parked)),
        ("certificate events", str(stats.certificate_events)),
        ("new pages discovered", str(stats.new_pages)),
        ("queued for fetching", str(stats.enqueued)),
    ]
    if frontier is not None:
        rows.append(("frontier left", str(frontier)))
    if stats.stop_reason:
        rows.append(("stopped because", stats.stop_reason))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in rows)


class StatusDisplay:
    """The live line: ``\\r`` + text + erase-to-end, so a shorter line leaves no debris."""

    def __init__(self, stream: IO[str], *, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self._shown = False

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        # One control character in the text would break the redraw, or do worse.
        self.stream.write("\r" + one_line(text) + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


class FetchLog:
    """``--log FILE``: one JSON object per request, appended, flushed per line so a killed
    crawl leaves a complete log up to its last request."""

    def __init__(self, path: Path | None) -> None:
        self._file: IO[str] | None = None
        if path is not None:
            try:
                self._file = path.open("a", encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot open log file {path}: {exc.strerror}") from None

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def write(self, entry: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json_text(entry) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
