"""What one ``sextant crawl`` run was asked to do, fixed before the first request.

Frozen so every task of the crawl reads the same values: a worker cannot change the delay
under another's feet. The CLI builds one from its flags; tests build one directly with tiny
delays and timeouts.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from crawler.fetch import FetchLimits
from crawler.politeness import PolitenessRules
from sextant.errors import ConfigError

DEFAULT_CONCURRENCY = 32
DEFAULT_DELAY = 1.0
DEFAULT_MAX_PAGES_PER_CAPSULE = 10_000
DEFAULT_MAX_DEPTH = 25
# A search form or a filter page can mint endless ?query variants of one path; a hundred
# is more than any real capsule needs to be found.
DEFAULT_MAX_QUERY_URLS_PER_PATH = 100


@dataclass(frozen=True, slots=True)
class HostPattern:
    """One ``--allow-host`` value: ``host``, ``host:port`` or ``*.domain`` (any subdomain)."""

    host: str  # punycode, lower-case; for a wildcard, the domain after "*."
    port: int | None
    wildcard: bool

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        from sextant.urls import parse as parse_url

        raw = text.strip()
        wildcard = raw.startswith("*.")
        body = raw[2:] if wildcard else raw
        if not body or "/" in body or "*" in body:
            raise ConfigError(
                f"--allow-host {text!r}: expected HOST, HOST:PORT or *.DOMAIN "
                "(for example gemini.example.org:1965 or *.example.org)"
            )
        try:
            url = parse_url(f"gemini://{body}/")
        except ValueError as exc:
            raise ConfigError(f"--allow-host {text!r}: {exc}") from None
        explicit_port = body.rsplit("]", 1)[-1].count(":") == 1
        return cls(url.host, url.port if explicit_port else None, wildcard)

    def names(self, host: str, port: int) -> bool:
        """Whether this pattern names ``host`` itself: a wildcard names no one host."""
        return not self.wildcard and self.matches(host, port)

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and port != self.port:
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host


@dataclass(frozen=True, slots=True)
class AllowedHosts:
    """The capsules a run may contact; empty means all of them."""

    patterns: tuple[HostPattern, ...] = ()

    @classmethod
    def parse(cls, values: tuple[str, ...] | list[str]) -> AllowedHosts:
        return cls(tuple(HostPattern.parse(value) for value in values))

    def allows(self, host: str, port: int) -> bool:
        return not self.patterns or any(p.matches(host, port) for p in self.patterns)

    def names(self, host: str, port: int) -> bool:
        return any(p.names(host, port) for p in self.patterns)

    def __bool__(self) -> bool:
        return bool(self.patterns)


def default_owner() -> str:
    """A lease owner name unique to this process, readable in the frontier table."""
    return f"{socket.gethostname()[:32]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class CrawlOptions:
    seeds: tuple[str, ...] = ()
    seeds_file: Path | None = None
    max_pages: int | None = None  # pages fetched in this run
    max_pages_per_capsule: int = DEFAULT_MAX_PAGES_PER_CAPSULE  # per scope (pubnix-aware)
    max_depth: int = DEFAULT_MAX_DEPTH
    max_query_urls_per_path: int = DEFAULT_MAX_QUERY_URLS_PER_PATH
    concurrency: int = DEFAULT_CONCURRENCY
    delay: float = DEFAULT_DELAY
    exclude_file: Path | None = None
    recrawl: bool = False
    resolve: tuple[str, ...] = ()  # curl-style HOST:PORT:ADDR pins
    allow_hosts: AllowedHosts = AllowedHosts()
    # Non-public addresses (loopback, private, link-local...) for every host, not only the
    # hosts named by --resolve or an exact --allow-host (see crawler/resolver.py).
    allow_private: bool = False
    max_time: float | None = None  # seconds
    quiet: bool = False
    log_file: Path | None = None
    # Several processes share the frontier (issue 8): leases of others are respected and
    # only expire, instead of being cleared at start as a lone crawler may do.
    worker: bool = False
    owner: str = field(default_factory=default_owner)
    # The bounded part of the frontier held in memory, and how much of it one capsule may
    # take: enough to keep every worker busy, small enough that RAM never follows the frontier.
    window: int = 512
    window_per_capsule: int = 8
    window_per_address: int = 32
    lease_seconds: float = 300.0
    robots_ttl: float = 86_400.0
    # Time given to requests in flight after --max-time or --max-pages before they are cut;
    # what finishes in that time is stored, so the next run need not ask again.
    stop_grace: float = 30.0
    # The same after Ctrl-C or SIGTERM, where someone waits: the command must end within
    # 2 s (tests/test_ctrl_c.py). What is cut is fetched again by the next run.
    signal_grace: float = 1.0
    # How long and how much one request may take (short timeouts in tests, --timeout).
    fetch_limits: FetchLimits = field(default_factory=FetchLimits)
    # The numbers of the politeness rule (crawler/politeness.py); tests shrink its waits.
    politeness: PolitenessRules = field(default_factory=PolitenessRules)
    progress_interval: float = 0.5
    inbox_interval: float = 30.0  # how often the seed_requests inbox is read during a run

    def may_reach_private(self, host: str, port: int) -> bool:
        """Whether ``host:port`` may be on a non-public address: the operator asked for it
        by name (``--allow-host host``, not ``*.domain``) or for every host."""
        return self.allow_private or self.allow_hosts.names(host, port)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1")
        if self.delay < 0:
            raise ConfigError("--delay cannot be negative")
        if self.max_pages is not None and self.max_pages < 0:
            raise ConfigError("--max-pages cannot be negative")
        if self.max_pages_per_capsule < 1:
            raise ConfigError("--max-pages-per-capsule must be at least 1")
        if self.max_depth < 0:
            raise ConfigError("--max-depth cannot be negative")
        if self.max_time is not None and self.max_time <= 0:
            raise ConfigError("--max-time must be positive")
        if self.window < 1 or self.window_per_capsule < 1 or self.window_per_address < 1:
            raise ConfigError("the in-memory frontier window must hold at least one URL")
