"""Gemini URLs: parse, normalize, resolve — one canonical string per resource.

Every table in the store is keyed by the canonical string, so two spellings of one
URL must normalize to the same text, and normalizing twice must change nothing.
The rules are RFC 3986 section 6.2.2 (syntax-based normalization) plus what the
Gemini spec asks of requests (section 2: an absolute URL of at most 1024 bytes,
no userinfo, default port 1965):

* scheme and host lower-cased; an internationalized host becomes punycode
  (IDNA 2003, Python's ``idna`` codec) because that is what goes into DNS and SNI;
* the default port is dropped, an empty path becomes ``/``;
* dot segments are removed (RFC 3986 5.2.4);
* percent-encoding: hex digits upper-cased, unreserved characters decoded,
  characters that may not appear raw (space, non-ASCII, ``"<>\\^`{|}``...) encoded
  as UTF-8; reserved characters keep their encoded/raw form because decoding
  ``%2F`` or ``%3F`` would change which resource is named;
* ``+`` stays ``+``: Gemini queries encode spaces as ``%20`` (spec section 3.2.1);
* fragments are dropped: they never reach the server;
* a space inside the path or query is encoded as ``%20`` (authors do write
  ``=> my file.gmi``), but control characters — TAB, CR, LF, NUL... — are refused
  anywhere, since a CR/LF would end the request line early. Whitespace in the
  host is refused too: no host name contains it.

This is a hand-written parser rather than ``urllib.parse``: urllib does not
normalize, silently accepts userinfo and control characters, and is slower than
the handful of ``str.find`` calls below (see ``bench/bench_gemtext.py``).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from sextant.errors import InvalidURL

DEFAULT_PORT = 1965
MAX_URL_BYTES = 1024

# Non-gemini schemes only matter for ``parse(..., gemini_only=False)``; their default
# ports let us drop the port the same way we do for gemini.
_DEFAULT_PORTS: dict[str, int] = {
    "gemini": DEFAULT_PORT,
    "titan": DEFAULT_PORT,
    "spartan": 300,
    "gopher": 70,
    "finger": 79,
    "guppy": 6775,
    "nex": 1900,
    "http": 80,
    "https": 443,
}

# Anything longer than this cannot be a URL anyone meant; refusing it up front keeps a
# hostile megabyte-long link from costing more than a length check. (Dot segments can
# shrink a URL, so the 1024-byte limit itself is checked on the normalized form.)
_MAX_RAW_CHARS = 16 * MAX_URL_BYTES

# Whitespace around a URL is noise from gemtext lines and response headers.
_EDGE_WS = " \t\r\n\f\v"

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 pchar without pct-encoded: unreserved, sub-delims, ":" and "@"; plus "/".
_PATH_CHARS = r"A-Za-z0-9\-._~!$&'()*+,;=:@/"
_PATH_CLEAN_RE = re.compile(f"[{_PATH_CHARS}]*")
_QUERY_CLEAN_RE = re.compile(f"[{_PATH_CHARS}?]*")
# Alternatives in priority order: a valid escape, a stray "%", a run of raw characters
# that must be encoded.
_PATH_FIX_RE = re.compile(f"%([0-9A-Fa-f]{{2}})|%|([^{_PATH_CHARS}%]+)")
_QUERY_FIX_RE = re.compile(f"%([0-9A-Fa-f]{{2}})|%|([^{_PATH_CHARS}?%]+)")
_PCT = tuple(f"%{i:02X}" for i in range(256))

# DNS-style names (underscores allowed: they exist in the wild, ``my_host.example``), labels
# of 1..63 characters, no empty labels, an optional trailing root dot. A hyphen may not start
# or end a label (RFC 952/1123: no registry hands out "-bad-.org", so a link to one is junk
# or an attack on a parser). That rule is checked by _edge_hyphen with plain string tests:
# folded into this regex, it made every host match about 40% slower.
_HOST_RE = re.compile(r"[a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*\.?")
# The label separators the idna codec accepts (RFC 3490 3.1): full stop and its CJK forms.
_IDN_EDGE_HYPHEN_RE = re.compile(r"(?:^|[.\u3002\uff0e\uff61])-|-(?:$|[.\u3002\uff0e\uff61])")
_HOST_PCT_RE = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def _shorten(raw: str, limit: int = 80) -> str:
    """The start of a hostile input is enough to recognise it in a log line."""
    return repr(raw if len(raw) <= limit else raw[:limit] + "…")


@dataclass(frozen=True, slots=True)
class GeminiURL:
    """A normalized absolute URL. Build it with :func:`parse`, which enforces the invariants."""

    scheme: str
    host: str
    port: int
    path: str
    query: str | None

    def __str__(self) -> str:
        text = f"{self.scheme}://{self.authority}{self.path}"
        return text if self.query is None else f"{text}?{self.query}"

    @property
    def display_host(self) -> str:
        """The host as its owner wrote it (``xn--bcher-kva.example`` -> ``bücher.example``)."""
        if "xn--" not in self.host:
            return self.host
        try:
            return self.host.encode("ascii").decode("idna")
        except UnicodeError:
            # A malformed punycode label still identifies the capsule; show it as is.
            return self.host

    @property
    def authority(self) -> str:
        """``host`` or ``host:port``; the port only when it is not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port == _DEFAULT_PORTS.get(self.scheme):
            return host
        return f"{host}:{self.port}"

    def with_path(self, path: str, query: str | None = None) -> GeminiURL:
        """The same capsule with another path (normalized like any parsed path)."""
        if not path.startswith("/"):
            path = "/" + path
        url = GeminiURL(
            self.scheme,
            self.host,
            self.port,
            _remove_dot_segments(_normalize_path(path)),
            None if query is None else _normalize_query(query),
        )
        _check_length(url, str(url))
        return url


def parse(raw: str, *, gemini_only: bool = True) -> GeminiURL:
    """Parse and normalize an absolute URL.

    Raises :class:`~sextant.errors.InvalidURL` for relative URLs, userinfo, empty hosts,
    bad ports, control characters, URLs over 1024 bytes once normalized, and — when
    ``gemini_only`` — any scheme but ``gemini``.
    """
    return _parse(raw, gemini_only)[0]


def normalize(raw: str) -> str:
    """The canonical string of an absolute gemini URL (``str(parse(raw))``)."""
    return _parse(raw, True)[1]


def scheme_of(url: str) -> str:
    """The lower-cased scheme, or ``""`` for a relative reference."""
    match = _SCHEME_RE.match(url.lstrip(_EDGE_WS))
    return match.group(1).lower() if match else ""


def resolve(base: str | GeminiURL, ref: str) -> str:
    """Resolve a link against the page it appears on (RFC 3986 section 5.2).

    Returns the normalized absolute URL. A reference with another scheme (https:,
    gopher:, mailto:...) comes back with only its scheme lower-cased and surrounding
    whitespace stripped: such links are recorded for the link graph, never fetched,
    so rewriting them by our rules would be guesswork. A reference that repeats the
    base's scheme without an authority (``gemini:g``) is read as relative, the
    "non-strict" choice RFC 3986 5.2.2 allows, because that is what its author meant.
    Raises :class:`~sextant.errors.InvalidURL` when the result is a URL we refuse.
    """
    base_url = base if isinstance(base, GeminiURL) else parse(base, gemini_only=False)
    text = ref.strip(_EDGE_WS)
    match = _SCHEME_RE.match(text)
    if match is not None:
        scheme = match.group(1).lower()
        rest = text[match.end() :]
        if scheme != base_url.scheme and scheme != "gemini":
            return f"{scheme}:{rest}"
        if rest.startswith("//"):
            return _parse(scheme + ":" + rest, False)[1]
        if scheme != base_url.scheme:
            raise InvalidURL(f"{_shorten(ref)} has no host (expected gemini://host/...)")
        text = rest
    if text.startswith("//"):
        return _parse(base_url.scheme + ":" + text, False)[1]
    _reject_controls(text, ref)

    hash_at = text.find("#")
    if hash_at >= 0:
        text = text[:hash_at]
    query_at = text.find("?")
    if query_at >= 0:
        ref_path, query = text[:query_at], _normalize_query(text[query_at + 1 :])
    else:
        ref_path, query = text, None

    if not ref_path:
        path = base_url.path
        if query_at < 0:
            query = base_url.query
    elif ref_path.startswith("/"):
        path = _remove_dot_segments(_normalize_path(ref_path))
    else:
        merged = base_url.path[: base_url.path.rfind("/") + 1] + _normalize_path(ref_path)
        path = _remove_dot_segments(merged)
    url = GeminiURL(base_url.scheme, base_url.host, base_url.port, path, query)
    canonical = str(url)
    _check_length(url, canonical)
    return canonical


def scope_of(url: GeminiURL) -> str:
    """The capsule a URL belongs to, for page caps and link statistics.

    Usually the authority, but on a pubnix every ``/~user/`` directory is a separate
    person's capsule, so ``host/~user`` is its own scope.
    """
    path = url.path
    if path.startswith("/~"):
        end = path.find("/", 2)
        user = path[2:] if end < 0 else path[2:end]
        if user:
            return f"{url.authority}/~{user}"
    return url.authority


def robots_url(url: GeminiURL) -> GeminiURL:
    """Where the capsule's robots.txt lives (the robots.txt companion spec: ``/robots.txt``)."""
    return GeminiURL(url.scheme, url.host, url.port, "/robots.txt", None)


# --- internals -------------------------------------------------------------------------


def _parse(raw: str, gemini_only: bool) -> tuple[GeminiURL, str]:
    text = raw.strip(_EDGE_WS)
    if len(text) > _MAX_RAW_CHARS:
        raise InvalidURL(
            f"URL of {len(text)} characters is far over the {MAX_URL_BYTES}-byte limit"
        )
    match = _SCHEME_RE.match(text)
    if match is None:
        if not text:
            raise InvalidURL("empty URL")
        raise InvalidURL(f"relative URL {_shorten(raw)}: resolve it against a base URL first")
    scheme = match.group(1).lower()
    if gemini_only and scheme != "gemini":
        raise InvalidURL(f"{scheme}: URLs cannot be fetched; only gemini:// URLs are allowed")
    rest = text[match.end() :]
    if not rest.startswith("//"):
        raise InvalidURL(f"{_shorten(raw)} has no host (expected {scheme}://host/...)")
    _reject_controls(text, raw)

    rest = rest[2:]
    hash_at = rest.find("#")
    if hash_at >= 0:
        rest = rest[:hash_at]
    # The authority ends at the first "/" or "?" (RFC 3986 3.2).
    slash = rest.find("/")
    question = rest.find("?")
    if question >= 0 and (slash < 0 or question < slash):
        end = question
    elif slash >= 0:
        end = slash
    else:
        end = len(rest)
    host, port = _parse_authority(rest[:end], scheme, raw)
    remainder = rest[end:]

    query_at = remainder.find("?")
    if query_at >= 0:
        path, query = remainder[:query_at], _normalize_query(remainder[query_at + 1 :])
    else:
        path, query = remainder, None
    path = _remove_dot_segments(_normalize_path(path)) if path else "/"

    url = GeminiURL(scheme, host, port, path, query)
    canonical = str(url)
    _check_length(url, canonical)
    return url, canonical


def _reject_controls(text: str, raw: str) -> None:
    """Control characters (CR, LF, TAB, NUL...) inside a URL are an attack or a bug,
    never something to percent-encode: a CR/LF would split the request line."""
    bad = _CONTROL_RE.search(text)
    if bad is not None:
        raise InvalidURL(
            f"URL {_shorten(raw)} contains control character U+{ord(bad.group()):04X} "
            f"at position {bad.start()}"
        )


def _check_length(url: GeminiURL, canonical: str) -> None:
    # The canonical form is pure ASCII (punycode host, percent-encoded path), so
    # characters are bytes.
    if len(canonical) > MAX_URL_BYTES:
        raise InvalidURL(
            f"URL is {len(canonical)} bytes once normalized; Gemini allows at most "
            f"{MAX_URL_BYTES} (spec section 2)"
        )


def _parse_authority(authority: str, scheme: str, raw: str) -> tuple[str, int]:
    if "@" in authority:
        raise InvalidURL(f"{_shorten(raw)}: userinfo (user@host) is not allowed in Gemini URLs")
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise InvalidURL(f"{_shorten(raw)}: unterminated IPv6 literal (missing ']')")
        host = _normalize_ipv6(authority[1:close], raw)
        after = authority[close + 1 :]
        if after and not after.startswith(":"):
            raise InvalidURL(f"{_shorten(raw)}: unexpected {after!r} after the IPv6 address")
        port_text = after[1:] if after else None
    else:
        colon = authority.rfind(":")
        if colon >= 0:
            host_text, port_text = authority[:colon], authority[colon + 1 :]
        else:
            host_text, port_text = authority, None
        if ":" in host_text:
            raise InvalidURL(f"{_shorten(raw)}: an IPv6 host must be written in [brackets]")
        host = _normalize_host(host_text, raw)
    return host, _parse_port(port_text, scheme, raw)


def _edge_hyphen(host: str) -> bool:
    return host.startswith("-") or host.endswith("-") or "-." in host or ".-" in host


def _normalize_host(text: str, raw: str) -> str:
    host = text.lower()
    if _HOST_RE.fullmatch(host) is None or _edge_hyphen(host):
        if host in ("", "."):
            raise InvalidURL(f"{_shorten(raw)} has an empty host")
        if "%" in host:
            host = _decode_host_escapes(host, raw)
        if not host.isascii():
            # Punycode hides a hyphen at the edge of the Unicode label ("-bücher" becomes
            # "xn---bcher-4ya"), so the hyphen rule is applied before encoding.
            if _IDN_EDGE_HYPHEN_RE.search(host):
                raise InvalidURL(f"host {text!r} has a label that starts or ends with a hyphen")
            try:
                host = host.encode("idna").decode("ascii").lower()
            except UnicodeError as exc:
                raise InvalidURL(
                    f"host {text!r} is not a valid internationalized domain name ({exc})"
                ) from None
        if _HOST_RE.fullmatch(host) is None or _edge_hyphen(host):
            raise InvalidURL(_explain_bad_host(text, host))
    # "example.org." and "example.org" are one DNS name; SNI forbids the trailing dot.
    if host.endswith("."):
        host = host[:-1]
    if len(host) > 253:
        raise InvalidURL(f"host of {len(host)} characters is longer than DNS allows (253)")
    return host


def _explain_bad_host(text: str, host: str) -> str:
    labels = host.split(".")
    if labels and labels[-1] == "":
        labels.pop()  # the root dot is allowed
    if "" in labels:
        return f"host {text!r} has an empty label (two dots in a row, or a leading dot)"
    if any(len(label) > 63 for label in labels):
        return f"host {text!r} has a label longer than DNS allows (63 characters)"
    if any(label.startswith("-") or label.endswith("-") for label in labels):
        return f"host {text!r} has a label that starts or ends with a hyphen"
    return f"host {text!r} contains characters not allowed in a host name"


def _decode_host_escapes(host: str, raw: str) -> str:
    def decode(match: re.Match[str]) -> str:
        data = bytes(int(match.group()[i + 1 : i + 3], 16) for i in range(0, len(match.group()), 3))
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidURL(f"{_shorten(raw)}: host escapes are not UTF-8") from None

    return _HOST_PCT_RE.sub(decode, host)


def _normalize_ipv6(text: str, raw: str) -> str:
    if "%" in text:
        raise InvalidURL(f"{_shorten(raw)}: IPv6 zone identifiers are not allowed in URLs")
    try:
        return ipaddress.IPv6Address(text).compressed
    except ValueError:
        raise InvalidURL(f"{_shorten(raw)}: [{text}] is not a valid IPv6 address") from None


def _parse_port(text: str | None, scheme: str, raw: str) -> int:
    if not text:
        # RFC 3986 3.2.3: an empty port ("host:") means the scheme's default.
        default = _DEFAULT_PORTS.get(scheme)
        if default is None:
            raise InvalidURL(f"no default port is known for {scheme}: URLs; give one explicitly")
        return default
    if not (text.isascii() and text.isdigit()):
        raise InvalidURL(f"{_shorten(raw)}: port {text!r} is not a number")
    significant = text.lstrip("0")
    port = int(significant or "0") if len(significant) <= 5 else 65536
    if not 1 <= port <= 65535:
        raise InvalidURL(f"{_shorten(raw)}: port {text} is out of range (1-65535)")
    return port


def _fix_escape(match: re.Match[str]) -> str:
    hex_digits = match.group(1)
    if hex_digits is not None:
        char = chr(int(hex_digits, 16))
        return char if char in _UNRESERVED else "%" + hex_digits.upper()
    run = match.group(2)
    if run is None:
        return "%25"  # a "%" not followed by two hex digits stands for itself
    bad = _CONTROL_RE.search(run)
    if bad is not None:
        raise InvalidURL(f"control character U+{ord(bad.group()):04X} in URL path or query")
    try:
        data = run.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidURL("URL contains a lone surrogate that has no UTF-8 form") from None
    return "".join([_PCT[byte] for byte in data])


def _normalize_path(path: str) -> str:
    if _PATH_CLEAN_RE.fullmatch(path) is not None:
        return path
    return _PATH_FIX_RE.sub(_fix_escape, path)


def _normalize_query(query: str) -> str:
    if _QUERY_CLEAN_RE.fullmatch(query) is not None:
        return query
    return _QUERY_FIX_RE.sub(_fix_escape, query)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path; equivalent to the RFC's buffer algorithm."""
    if "/." not in path:
        return path
    segments = path.split("/")
    output: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if segments[-1] in (".", ".."):
        output.append("")  # "/a/b/.." names the directory "/a/", keep the slash
    return "/" + "/".join(output)
