"""One exception tree for the whole project.

Library code raises these; only ``cli.py`` modules turn them into a one-line
message and a non-zero exit, so users never see a traceback for their mistakes::

    SextantError
      ├─ InvalidURL               a URL we refuse (malformed, userinfo, too long, wrong scheme)
      ├─ MalformedHeader          a response header that breaks the grammar (the capsule's fault)
      ├─ MalformedRequest         a request line our servers refuse (the client's fault; 59 meta)
      ├─ FetchError               one request failed on the way
      │    ├─ ConnectFailed       DNS, TCP or TLS handshake failure
      │    │    └─ AddressRefused a host on a non-public address the crawler may not contact
      │    └─ FetchTimeout        connect, header, total or minimum-rate limit hit
      ├─ QueryError               a search query we cannot parse
      ├─ SearchCancelled          a search abandoned because its client went away
      ├─ ConfigError              settings that cannot work (bad data dir, bad DB URL)
      └─ StoreError               our side: schema behind, index missing or busy, writes refused
           └─ StoreUnavailable    the database is locked, unreachable or not a database

A body cut at the size limit and a certificate that changed (TOFU) are not errors: the
crawler keeps the page and records the fact (``FetchResult.truncated``, a certificate
event), so neither has a class here.
"""


class SextantError(Exception):
    """Base of every error Sextant raises on purpose."""


class InvalidURL(SextantError, ValueError):
    """A URL that is malformed or that Gemini does not allow."""


class MalformedHeader(SextantError, ValueError):
    """A response header line that does not follow ``<2 digits> <meta>\\r\\n``."""


class MalformedRequest(SextantError, ValueError):
    """A request line our servers refuse; the message is short and safe to send as a 59 meta."""


class FetchError(SextantError):
    """A request that did not produce a usable response."""

    kind = "fetch-error"


class ConnectFailed(FetchError):
    kind = "connect-failed"


class AddressRefused(ConnectFailed):
    """The host resolves to a loopback, private or other non-public address, and the
    operator did not allow it: connecting would let anyone probe the crawler's network."""

    kind = "refused-address"


class FetchTimeout(FetchError):
    kind = "timeout"


class QueryError(SextantError, ValueError):
    """A search query that cannot be parsed; the message says what to change."""


class SearchCancelled(SextantError):
    """A search stopped because nobody waits for its answer any more."""


class ConfigError(SextantError):
    """Settings that cannot work; the message says how to fix them."""


class StoreError(SextantError):
    """The database is missing, unreachable or not migrated."""


class StoreUnavailable(StoreError):
    """The database cannot answer now: locked past the busy timeout, unreachable, or a file
    that is no longer a database. Not a bug in a query, so callers tell people to come back
    (the capsule answers 41) instead of reporting an internal error."""
